// cocoeval's annotation page (cocoeval/annotate/page.py). Every text of the export is put into the
// page with textContent, never as markup. Progress is kept in localStorage under the export's id and
// the annotator's name, asked for first: every file:// page of a browser profile shares one storage,
// so a second annotator on the same browser starts with nothing of the first's.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("an-data").textContent);
  const KEY = "cocoeval-annotate:" + D.export_id + ":";
  const KEYS = "1234567890";
  const items = D.items;
  const behaviours = D.behaviours;

  // the work of one annotator (named at the start) on this export
  function load(who) {
    try {
      const s = JSON.parse(window.localStorage.getItem(KEY + who) || "null");
      if (s && typeof s === "object" && s.items && typeof s.items === "object") return { annotator: who, items: s.items };
    } catch (e) { /* storage unreadable or refused: start afresh */ }
    return { annotator: who, items: {} };
  }
  let state = { annotator: "", items: {} };
  let storageOk = true;
  // save the work; ``it``: the item changed (only its mark is updated)
  function save(it) {
    if (!state.annotator) return;
    try {
      window.localStorage.setItem(KEY + state.annotator, JSON.stringify(state));
      storageOk = true;
    } catch (e) {
      storageOk = false;
    }
    progress(it);
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function itemState(id) {
    if (!state.items[id]) state.items[id] = { turns: {}, scores: {} };
    const s = state.items[id];
    if (!s.turns) s.turns = {};
    if (!s.scores) s.scores = {};
    return s;
  }
  function turnState(id, n) {
    const s = itemState(id);
    if (!s.turns[n]) s.turns[n] = { b: [], none: false, other: "" };
    return s.turns[n];
  }
  const annotated = (it) => it.turns.filter((t) => t.annotate);
  const isOverall = (it) => it.tasks.indexOf("overall") >= 0;
  const known = new Set(behaviours.map((b) => b.id));
  // the behaviours ticked on a turn (only the taxonomy's: storage is read back as it is)
  const ticked = (t) => (t && Array.isArray(t.b) ? t.b.filter((id) => known.has(id)) : []);
  function turnDone(t) {
    return !!t && (t.none === true || ticked(t).length > 0);
  }
  function itemDone(it) {
    const s = state.items[it.item_id];
    if (!s) return false;
    for (const t of annotated(it)) if (!turnDone(s.turns && s.turns[t.turn])) return false;
    if (isOverall(it)) for (const f of D.likert) if (!s.scores || !s.scores[f]) return false;
    return true;
  }

  // ------------------------------------------------------------------------------ the header
  const bar = document.getElementById("an-bar");
  const prog = el("span", null);
  prog.id = "an-progress";
  const nameLab = el("label", "an-label", "Annotator");
  const name = el("input");
  name.id = "an-annotator";
  name.type = "text";
  name.placeholder = "your name or id";
  name.maxLength = 64;
  nameLab.htmlFor = "an-annotator";
  const start = el("button", null, "Start");
  start.id = "an-start";
  start.type = "button";
  const exp = el("button", null, "Export");
  exp.id = "an-export";
  exp.type = "button";
  exp.hidden = true;
  const msg = el("span", null);
  msg.id = "an-msg";
  bar.append(prog, nameLab, name, start, exp, msg);

  // the items labelled completely; each item's section (a mark is updated only where it changed)
  const doneSet = new Set();
  const secOf = new Map();
  function mark(it) {
    const d = itemDone(it);
    if (d) doneSet.add(it.item_id);
    else doneSet.delete(it.item_id);
    const sec = secOf.get(it.item_id);
    if (sec) sec.classList.toggle("an-done", d);
  }
  function progress(it) {
    if (it) mark(it);
    prog.textContent = doneSet.size + " of " + items.length + " items labelled";
    prog.dataset.done = String(doneSet.size);
    if (!storageOk) {
      msg.className = "";
      msg.textContent = "this browser does not keep the work (storage refused): export before closing";
    }
  }

  // ------------------------------------------------------------------------------ the items
  const main = document.getElementById("an-main");
  const instr = el("details", null);
  instr.open = true;
  instr.append(el("summary", null, "Instructions"), el("div", "an-how", D.how_to), el("div", "an-instr", D.instructions));
  main.append(instr);

  function turnBox(it, t, div) {
    const st = () => turnState(it.item_id, t.turn);
    const boxes = el("div", "an-boxes");
    const inputs = [];
    behaviours.forEach((b, i) => {
      const lab = el("label");
      const cb = el("input");
      cb.type = "checkbox";
      cb.value = b.id;
      cb.dataset.behaviour = b.id;
      cb.tabIndex = -1;
      lab.title = b.definition;
      if (i < KEYS.length) lab.append(el("span", "an-key", KEYS[i]));
      lab.append(cb, document.createTextNode(" " + b.name));
      boxes.append(lab);
      inputs.push(cb);
    });
    const noneLab = el("label");
    const none = el("input");
    none.type = "checkbox";
    none.dataset.behaviour = D.none;
    none.tabIndex = -1;
    noneLab.append(el("span", "an-key", "x"), none, document.createTextNode(" no behaviour"));
    boxes.append(noneLab);
    const other = el("input", "an-other");
    other.type = "text";
    other.placeholder = "not in the taxonomy (optional)";
    other.maxLength = 500;
    other.dataset.field = "not_in_taxonomy";

    function show() {
      const s = state.items[it.item_id] && state.items[it.item_id].turns[t.turn];
      const b = ticked(s);
      inputs.forEach((cb) => { cb.checked = b.indexOf(cb.value) >= 0; });
      none.checked = !!(s && s.none);
      other.value = (s && typeof s.other === "string") ? s.other : "";
      div.classList.toggle("an-labelled", turnDone(s));
    }
    function set(ids, isNone) {
      const s = st();
      s.b = behaviours.map((b) => b.id).filter((id) => ids.indexOf(id) >= 0);
      s.none = !!isNone && s.b.length === 0;
      show();
      save(it);
    }
    function toggle(i) {
      const s = st();
      if (i === "none") return set([], !s.none);
      const id = behaviours[i].id;
      const now = ticked(s);
      const b = now.indexOf(id) >= 0 ? now.filter((x) => x !== id) : now.concat([id]);
      set(b, false);
    }
    inputs.forEach((cb, i) => cb.addEventListener("change", () => { toggle(i); div.focus(); }));
    none.addEventListener("change", () => { toggle("none"); div.focus(); });
    other.addEventListener("input", () => {
      st().other = other.value;
      save(it);
    });
    div.annToggle = toggle;
    show();
    return [boxes, other];
  }

  const turnDivs = [];
  // the items, built once the annotator is named (their work read back from storage)
  function render() {
    items.forEach((it, k) => {
      const sec = el("section", "an-item");
      sec.dataset.item = it.item_id;
      secOf.set(it.item_id, sec);
      sec.append(el("h2", null, "Item " + (k + 1) + " of " + items.length + " (" + it.item_id + "; " +
        it.tasks.map((x) => x === "fine_grained" ? "fine-grained" : x).join(", ") + ")"));
      const goals = el("div", "an-meta");
      goals.append(el("span", "an-label", "Goals:"), document.createTextNode((it.goals || []).join("; ") || "(none)"));
      const parts = el("div", "an-meta");
      parts.append(el("span", "an-label", "Participants:"), document.createTextNode((it.participants || []).map((p) =>
        p.name + ([p.role, p.stance].filter(Boolean).length ? " (" + [p.role, p.stance].filter(Boolean).join(", ") + ")" : "")
      ).join("; ") || "(none)"));
      const summ = el("div", "an-summary");
      summ.append(el("span", "an-label", "Summary:"), document.createTextNode(it.summary || "(none)"));
      const hist = el("details", "an-hist");
      hist.append(el("summary", null, "History (" + (it.history || []).length + " turns)"));
      for (const h of it.history || []) {
        const d = el("div");
        d.append(el("span", "an-speaker", h.speaker + ":"), document.createTextNode(h.text));
        hist.append(d);
      }
      sec.append(goals, parts, summ, hist, el("div", "an-label", "Continuation:"));
      for (const t of it.turns) {
        const div = el("div", "an-turn" + (t.annotate ? "" : " an-ctx"));
        div.dataset.turn = String(t.turn);
        const head = el("div");
        head.append(el("span", "an-num", t.annotate ? String(t.turn) : ""), el("span", "an-speaker", t.speaker + ":"),
          document.createTextNode(t.text));
        div.append(head);
        if (t.annotate) {
          div.tabIndex = 0;
          div.classList.add("an-ann");
          div.append(...turnBox(it, t, div));
          turnDivs.push(div);
        }
        sec.append(div);
      }
      if (isOverall(it)) {
        const ov = el("div", "an-overall");
        for (const f of D.likert) {
          const lab = el("label", null);
          const sel = el("select");
          sel.dataset.score = f;
          sel.append(el("option", null, "-"));
          sel.options[0].value = "";
          for (let v = 1; v <= 10; v++) {
            const o = el("option", null, String(v));
            o.value = String(v);
            sel.append(o);
          }
          const s = state.items[it.item_id];
          sel.value = s && s.scores && s.scores[f] ? String(s.scores[f]) : "";
          sel.addEventListener("change", () => {
            const sc = itemState(it.item_id).scores;
            if (sel.value) sc[f] = parseInt(sel.value, 10);
            else delete sc[f];
            save(it);
          });
          lab.append(el("span", "an-label", f + " (1-10)"), sel);
          ov.append(lab);
        }
        sec.append(ov);
      }
      main.append(sec);
      mark(it);
    });
    for (const d of turnDivs) {
      d.addEventListener("focus", () => {
        if (current && current !== d) current.classList.remove("an-focus");
        current = d;
        d.classList.add("an-focus");
      });
      // focus gone elsewhere (not to a box or the note of this turn): no turn is shown as current
      d.addEventListener("focusout", (e) => {
        if (!d.contains(e.relatedTarget)) d.classList.remove("an-focus");
      });
    }
  }

  // ------------------------------------------------------------------------------ keys
  let current = null;
  function focusTurn(div) {
    if (!div) return;
    if (current) current.classList.remove("an-focus");
    current = div;
    div.classList.add("an-focus");
    div.focus({ preventScroll: true });
    div.scrollIntoView({ block: "center" });
  }
  document.addEventListener("keydown", (e) => {
    const tag = e.target && e.target.tagName;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (tag === "INPUT" && e.target.type === "text" || tag === "SELECT" || tag === "TEXTAREA") return;
    const k = e.key;
    if (k === "n" || k === "p") {
      const i = current ? turnDivs.indexOf(current) : -1;
      const j = k === "n" ? Math.min(i + 1, turnDivs.length - 1) : Math.max(i - 1, 0);
      focusTurn(turnDivs[j]);
      e.preventDefault();
      return;
    }
    // a key labels the current turn only while the focus is on it (a click elsewhere leaves it)
    if (!current || !current.contains(document.activeElement)) return;
    const i = KEYS.indexOf(k);
    if (i >= 0 && i < behaviours.length) {
      current.annToggle(i);
      e.preventDefault();
    } else if (k === "x") {
      current.annToggle("none");
      e.preventDefault();
    }
  });

  // ------------------------------------------------------------------------------ start
  function badName(who) {
    if (!who) return "put your name or id in first (your work is kept under it, and it names your labels in the run)";
    if (/[\/\\:\u0000-\u001f\u007f]/.test(who)) return "a name without / \\ : or control characters, please";
    return "";
  }
  function begin() {
    const who = (name.value || "").trim();
    const bad = badName(who);
    msg.className = "";
    msg.textContent = bad;
    if (bad) {
      name.focus();
      return;
    }
    state = load(who);
    name.value = who;
    name.readOnly = true;
    start.hidden = true;
    exp.hidden = false;
    render();
    progress();
    document.body.dataset.started = "1";
  }
  start.addEventListener("click", begin);
  name.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !state.annotator) begin();
  });

  // ------------------------------------------------------------------------------ export
  function cell(v) {
    const s = v === undefined || v === null ? "" : String(v);
    return /[",\r\n]/.test(s) || /^\s|\s$/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  exp.addEventListener("click", () => {
    const who = state.annotator;
    msg.className = "";
    if (!who) return;
    const rows = [D.columns.join(",")];
    let turns = 0;
    let overall = 0;
    let noteOnly = 0;
    for (const it of items) {
      const s = state.items[it.item_id];
      if (!s) continue;
      for (const t of annotated(it)) {
        const ts = s.turns && s.turns[t.turn];
        if (!turnDone(ts)) {
          if (ts && typeof ts.other === "string" && ts.other.trim()) noteOnly++;
          continue;
        }
        const b = ticked(ts).length ? ticked(ts).join(";") : D.none;
        const r = { annotator: who, item_id: it.item_id, turn: t.turn, behaviours: b, not_in_taxonomy: (ts.other || "").trim() };
        rows.push(D.columns.map((c) => cell(r[c])).join(","));
        turns++;
      }
      if (isOverall(it) && s.scores && D.likert.every((f) => s.scores[f])) {
        const r = { annotator: who, item_id: it.item_id };
        for (const f of D.likert) r[f] = s.scores[f];
        rows.push(D.columns.map((c) => cell(r[c])).join(","));
        overall++;
      }
    }
    const left = noteOnly ? "; " + noteOnly + " turn(s) with a 'not in the taxonomy' note but nothing ticked " +
      "left out (not annotated): tick what the turn shows, or 'no behaviour', to export them" : "";
    if (!turns && !overall) {
      msg.textContent = "nothing labelled yet: tick the behaviours of a turn (or no behaviour) first" + left;
      return;
    }
    const a = el("a");
    a.href = "data:text/csv;charset=utf-8," + encodeURIComponent(rows.join("\n") + "\n");
    a.download = "annotations-" + who.replace(/[^A-Za-z0-9_.-]+/g, "_") + "-" + D.export_id.slice(0, 8) + ".csv";
    document.body.append(a);
    a.click();
    a.remove();
    msg.className = "ok";
    msg.textContent = "exported " + turns + " turn(s) and " + overall + " overall score(s): " +
      "import with cocoeval annotate-import FILE RUN --key key.json" + left;
  });

  progress();
  document.body.dataset.ready = "1";
})();
