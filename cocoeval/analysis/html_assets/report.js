/* cocoeval's HTML report (cocoeval/analysis/html_report.py): renders the figures (Vega-Embed,
   inlined), the tables, the provenance and the conversation viewer from the JSON blocks of this
   file. Every text of the run goes into the page through textContent or an attribute set by the
   DOM, never as markup. Nothing is fetched: this file is the whole report. */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("cc-data").textContent);
  var V = DATA.viewer;
  var HUMAN = V.human, REFERENCE = V.reference, ALL = "(all)";
  var COLOURS = {inconsistent: "#c0392b", uncollaborative: "#2471a3"};
  var BEHAVIOURS = {};
  V.behaviours.forEach(function (b) { BEHAVIOURS[b.id] = b; });
  var INDEX = {};
  V.instances.forEach(function (inst, n) { INDEX[inst.id] = n; });
  var blocks = {};
  window.ccErrors = [];

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") { e.textContent = attrs[k]; }
      else if (k === "cls") { e.className = attrs[k]; }
      else { e.setAttribute(k, attrs[k]); }
    });
    (children || []).forEach(function (c) { if (c != null) { e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); } });
    return e;
  }

  /* one instance's conversations (JSON, gzip, base64), inflated the first time they are shown:
     a promise of the block */
  function block(n) {
    if (!(n in blocks)) {
      var s = document.querySelector('script.cc-conv[data-i="' + n + '"]');
      if (typeof DecompressionStream === "undefined") {
        blocks[n] = Promise.reject(new Error("this browser cannot inflate the conversations (no DecompressionStream: " +
          "Chromium 80+, Firefox 113+ and Safari 16.4+ can)"));
      } else {
        var bin = atob(s.textContent.trim()), bytes = new Uint8Array(bin.length);
        for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
        var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
        blocks[n] = new Response(stream).text().then(JSON.parse);
      }
    }
    return blocks[n];
  }
  function failed(err) { window.ccErrors.push(String(err)); console.error(err); }

  function fmt(v) {
    if (v === null || v === undefined) { return "–"; }
    if (typeof v === "number" && !Number.isInteger(v)) { return v.toFixed(3); }
    if (typeof v === "object") { return JSON.stringify(v); }
    return String(v);
  }

  // ------------------------------------------------------------------ sections, figures, tables
  var main = document.getElementById("cc-main"), nav = document.getElementById("cc-nav");
  var FIGS = {}, TABS = {};
  DATA.figures.forEach(function (f) { FIGS[f.name] = f; });
  DATA.tables.forEach(function (t) { TABS[t.name] = t; });

  function section(id, title) {
    nav.appendChild(el("a", {href: "#" + id, text: title}));
    var s = el("section", {id: id}, [el("h2", {text: title})]);
    main.appendChild(s);
    return s;
  }

  /* the column of a table that names a setup: its rows lead to that setup's conversations */
  var SETUP_COLUMNS = ["setup", "target", "panel"];
  function setupColumn(t) {
    for (var k = 0; k < SETUP_COLUMNS.length; k++) {
      var c = t.columns.indexOf(SETUP_COLUMNS[k]);
      if (c >= 0 && t.rows.some(function (r) { return V.setups.indexOf(r[c]) >= 0; })) { return c; }
    }
    return -1;
  }
  function gotoLink(setup, judge) {
    return el("a", {href: "#cc-viewer", cls: "cc-goto", "data-setup": setup, "data-judge": judge || "", text: "conversations"});
  }

  function tableElement(t) {
    var sc = setupColumn(t), jc = t.columns.indexOf("judge");
    var head = el("tr", {}, t.columns.map(function (c) { return el("th", {text: c}); })
      .concat(sc >= 0 ? [el("th", {text: ""})] : []));
    var body = t.rows.map(function (r) {
      var cells = r.map(function (v) {
        return el("td", {cls: typeof v === "number" ? "num" : "", text: fmt(v)});
      });
      if (sc >= 0) {
        cells.push(el("td", {}, [V.setups.indexOf(r[sc]) >= 0 ? gotoLink(r[sc], jc >= 0 ? r[jc] : null) : null]));
      }
      return el("tr", {}, cells);
    });
    return el("table", {cls: "cc-table", "data-table": t.name}, [el("thead", {}, [head]), el("tbody", {}, body)]);
  }

  function addTable(parent, t) {
    var d = el("details", {cls: "cc-tabledetails", "data-name": t.name},
      [el("summary", {}, [el("b", {text: t.name}), ": " + t.what + " (" + t.rows.length + " rows)"])]);
    var filled = false;
    d.addEventListener("toggle", function () {
      if (d.open && !filled) { filled = true; d.appendChild(tableElement(t)); }
    });
    if (t.name === "invalid_rates") { d.open = true; }
    parent.appendChild(d);
  }

  var views = [];
  function addFigure(parent, f) {
    var box = el("div", {cls: "cc-chart", "data-figure": f.name});
    parent.appendChild(el("div", {cls: "cc-figure"}, [el("div", {cls: "cc-caption"}, [el("b", {text: f.name}), ": " + f.what]), box]));
    var meta = (f.spec.usermeta || {}).cocoeval || {};
    var p = vegaEmbed(box, f.spec, {actions: false, renderer: "svg", logLevel: 1 /* vega.Error: no warning about empty layers */}).then(function (res) {
      box.setAttribute("data-rendered", "1");
      res.view.addEventListener("click", function (event, item) {
        var d = item && item.datum;
        if (d && d.behaviour && d.series && d.panel) {
          viewer.showBar(d.panel, d.series, d.behaviour, meta.reference_scope || "panel", d.judge);
          document.getElementById("cc-viewer").scrollIntoView();
          return;
        }
        // a point of a setup (the leaderboard, the judge-free statistics, detectability): its conversations
        var setup = d && SETUP_COLUMNS.map(function (c) { return d[c]; })
          .filter(function (v) { return V.setups.indexOf(v) >= 0; })[0];
        if (setup) { viewer.showSetup(setup, d.judge); }
      });
      views.push(res.view);
    }).catch(function (err) { window.ccErrors.push(String(err)); console.error(err); });
    return p;
  }

  var rendering = [];
  var shown = {};
  var texts = document.querySelectorAll("template.cc-sectext");
  DATA.sections.forEach(function (sec, k) {
    var s = section("cc-sec-" + k, sec.title);
    if (sec.collapsed) {  // the paper-coverage table: after the answer, folded
      var fold = el("details", {cls: "cc-collapsed"}, [el("summary", {text: "show what of the paper this run lacks, " +
        "and the steps that add it"})]);
      s.appendChild(fold);
      s = fold;
    }
    if (texts[k]) { s.appendChild(texts[k].content.cloneNode(true)); }  // the report's own text, escaped
    sec.names.forEach(function (name) {
      if (FIGS[name] && !shown["f" + name]) { shown["f" + name] = 1; rendering.push(addFigure(s, FIGS[name])); }
    });
    sec.names.forEach(function (name) {
      if (TABS[name] && !shown["t" + name]) { shown["t" + name] = 1; addTable(s, TABS[name]); }
    });
  });
  var rest = DATA.figures.filter(function (f) { return !shown["f" + f.name]; });
  var restT = DATA.tables.filter(function (t) { return !shown["t" + t.name]; });
  if (rest.length || restT.length) {
    var other = section("cc-sec-other", "Other figures and tables");
    rest.forEach(function (f) { rendering.push(addFigure(other, f)); });
    restT.forEach(function (t) { addTable(other, t); });
  }
  Promise.all(rendering).then(function () { document.body.setAttribute("data-charts", "done"); });

  // ------------------------------------------------------------------ the conversation viewer
  var vs = section("cc-viewer", "Conversation viewer");
  vs.appendChild(el("p", {text: "Pick an instance: the human reference beside the chosen setups' continuations, " +
    "aligned by turn number (a row per turn, a column per target), each turn tagged with the behaviours the judge " +
    "found (red: inconsistent, blue: uncollaborative; the evidence on hover); a speaker who is not a participant " +
    "is marked. Search the turns by text and speaker; filter by dataset, behaviour and judge score (1–10, the " +
    "chosen setups' overall judgments). Click a bar of a Figure-3 chart to list the turns behind it, a setup's " +
    "point or a row of the leaderboard to see its conversations."}));

  function select(id, label, options) {
    var s = el("select", {id: id});
    options.forEach(function (o) { s.appendChild(el("option", {value: o[0], text: o[1]})); });
    return [s, el("span", {}, [el("label", {"for": id, text: label}), s])];
  }
  function input(id, label, attrs) {
    var i = el("input", Object.assign({id: id}, attrs));
    return [i, el("span", {}, [el("label", {"for": id, text: label}), i])];
  }
  var dsSel = select("cc-dataset", "dataset", [[ALL, ALL]].concat(V.datasets.map(function (d) { return [d, d]; })));
  var bSel = select("cc-behaviour", "behaviour", [[ALL, ALL]].concat(V.behaviours.map(function (b) { return [b.id, b.name]; })));
  var jSel = select("cc-judge", "judge", (V.judges.length ? V.judges : ["(none)"]).map(function (j) { return [j, j]; }));
  if (DATA.judge && V.judges.indexOf(DATA.judge) >= 0) { jSel[0].value = DATA.judge; }
  var sSel = select("cc-score", "judge score", [[ALL, ALL], ["0", "consistency"], ["1", "collaborativeness"]]);
  var sMin = input("cc-score-min", "from", {type: "number", min: "1", max: "10", value: "1", size: "3"});
  var sMax = input("cc-score-max", "to", {type: "number", min: "1", max: "10", value: "10", size: "3"});
  var setupBox = el("div", {cls: "cc-setups", id: "cc-setups"});
  V.setups.forEach(function (s, k) {
    var cb = el("input", {type: "checkbox", value: s});
    cb.checked = k < 2;
    setupBox.appendChild(el("label", {}, [cb, " " + s]));
  });
  var iSel = el("select", {id: "cc-instance"});
  vs.appendChild(el("div", {cls: "cc-controls"}, [dsSel[1], bSel[1], jSel[1],
    el("span", {}, [sSel[1], sMin[1], sMax[1]]),
    el("span", {}, [el("label", {text: "setups"}), setupBox]),
    el("span", {}, [el("label", {"for": "cc-instance", text: "instance"}), iSel])]));
  var qText = input("cc-search", "search", {type: "search", placeholder: "words in a turn", size: "28"});
  var qSpeaker = input("cc-speaker", "speaker", {type: "search", placeholder: "a speaker's name", size: "18"});
  var qGo = el("button", {id: "cc-search-go", type: "button", text: "search"});
  vs.appendChild(el("div", {cls: "cc-controls cc-searchbar"}, [qText[1], qSpeaker[1], qGo]));
  var found = el("div", {id: "cc-found"});
  var behind = el("div", {id: "cc-behind"});
  var view = el("div", {id: "cc-view"});
  vs.appendChild(found);
  vs.appendChild(behind);
  vs.appendChild(view);

  function chosen() {
    return Array.prototype.filter.call(setupBox.querySelectorAll("input"), function (c) { return c.checked; })
      .map(function (c) { return c.value; });
  }
  function judgment(judge, target, n) {
    var byT = (V.judgments[judge] || {})[target] || {};
    return byT[String(n)] || null;
  }
  function valid(judge, target, n) {
    var j = judgment(judge, target, n);
    return j && (j.s === "ok" || j.s === "repaired") ? j : null;
  }
  function hasBehaviour(j, b) {
    if (!j || !j.l) { return false; }
    return Object.keys(j.l).some(function (t) { return j.l[t].indexOf(b) >= 0; });
  }
  /* the judge's score (consistency 0 or collaborativeness 1) of a target on instance n, or null */
  function score(judge, target, n, which) {
    var s = (((V.scores || {})[judge] || {})[target] || {})[String(n)];
    return s && s[which] !== null && s[which] !== undefined ? s[which] : null;
  }
  function scoreMatches(n) {
    if (sSel[0].value === ALL) { return true; }
    var lo = Number(sMin[0].value || 1), hi = Number(sMax[0].value || 10), which = Number(sSel[0].value);
    var targets = chosen().length ? chosen() : [REFERENCE];
    return targets.some(function (t) {
      var v = score(jSel[0].value, t, n, which);
      return v !== null && v >= lo && v <= hi;
    });
  }
  function matches(n) {
    var inst = V.instances[n];
    if (dsSel[0].value !== ALL && inst.dataset !== dsSel[0].value) { return false; }
    if (!scoreMatches(n)) { return false; }
    var b = bSel[0].value;
    if (b === ALL) { return true; }
    return [REFERENCE].concat(chosen()).some(function (t) { return hasBehaviour(judgment(jSel[0].value, t, n), b); });
  }
  function simulatedCount(n) {
    var ok = V.instances[n].ok;
    return chosen().filter(function (s) { return Object.prototype.hasOwnProperty.call(ok, s); }).length;
  }

  function refilter(want) {
    var ids = [];
    V.instances.forEach(function (inst, n) { if (matches(n)) { ids.push(n); } });
    var current = want !== undefined && want !== null && ids.indexOf(want) >= 0 ? want
      : iSel.value === "" ? null : Number(iSel.value);
    if (ids.indexOf(current) < 0 && ids.length) {  // open on an instance the chosen setups simulated
      current = ids.reduce(function (best, n) { return simulatedCount(n) > simulatedCount(best) ? n : best; }, ids[0]);
    }
    iSel.textContent = "";
    ids.forEach(function (n) { iSel.appendChild(el("option", {value: String(n), text: V.instances[n].id})); });
    if (ids.length) { iSel.value = String(current); }
    return render();
  }

  function note(text) { return el("div", {cls: "cc-note", text: text}); }
  function judgmentNote(j) {
    if (!j || j.s === "ok" || j.s === "repaired") { return null; }
    return "judgment " + j.s + (j.r ? ": " + j.r : "");
  }
  function needle() { return qText[0].value.trim().toLowerCase(); }
  function speakerNeedle() { return qSpeaker[0].value.trim().toLowerCase(); }
  function turnMatches(turn) {
    var q = needle(), sp = speakerNeedle();
    if (!q && !sp) { return false; }
    return (!q || turn[1].toLowerCase().indexOf(q) >= 0) && (!sp || turn[0].toLowerCase().indexOf(sp) >= 0);
  }
  function turnElement(turn, i, target, j, ev, unknown) {
    var d = el("div", {cls: "cc-turn", "data-turn": String(i), "data-target": target, id: "cc-t-" + target + "-" + i});
    d.appendChild(el("b", {cls: "cc-speaker", text: turn[0]}));
    if (unknown) {
      d.classList.add("cc-unknown");
      d.appendChild(el("span", {cls: "cc-unknown-tag", title: "this speaker is not a participant of the conversation",
        text: "unknown speaker"}));
    }
    d.appendChild(document.createTextNode(": " + turn[1]));
    var labels = j && (j.s === "ok" || j.s === "repaired") && j.l ? (j.l[String(i)] || []) : [];
    labels.forEach(function (b) {
      var beh = BEHAVIOURS[b];
      var tag = el("span", {cls: "cc-tag", "data-behaviour": b, text: beh ? beh.name : b});
      tag.style.background = COLOURS[beh ? beh.category : ""] || "#666";
      tag.title = ((ev || {})[String(i)] || {})[b] || "";
      d.appendChild(tag);
    });
    if (bSel[0].value !== ALL && labels.indexOf(bSel[0].value) >= 0) { d.classList.add("cc-hit"); }
    if (turnMatches(turn)) { d.classList.add("cc-found-hit"); }
    return d;
  }

  var renders = 0;
  function render() {
    var token = ++renders;
    view.removeAttribute("data-instance");
    if (iSel.value === "") {
      view.textContent = "";
      view.appendChild(el("i", {text: "No instance matches the filters."}));
      view.setAttribute("data-instance", "");
      return Promise.resolve();
    }
    var n = Number(iSel.value);
    return block(n).then(function (b) {
      if (token === renders) { draw(n, b); }
    }).catch(failed);
  }

  function draw(n, b) {
    var judge = jSel[0].value;
    view.textContent = "";
    view.appendChild(el("h3", {}, [b.id + " ", el("small", {text: "(" + b.dataset + ")"})]));
    view.appendChild(el("div", {}, [el("b", {text: "Goals"}),
      el("ul", {}, b.goals.map(function (g) { return el("li", {text: g}); }))]));
    view.appendChild(el("div", {}, [el("b", {text: "Participants"}), ": " + b.participants.map(function (p) {
      return p[0] + (p[1] ? " (" + p[1] + ")" : ""); }).join(", ")]));
    view.appendChild(el("p", {}, [el("b", {text: "Summary"}), " (" + b.methods[0] + "/" + b.methods[1] + "): " + b.summary]));
    view.appendChild(el("p", {}, [el("small", {text: "M: " + b.methods[0] + ", S: " + b.methods[1] + ", turns: " + b.methods[2]})]));
    view.appendChild(el("details", {}, [el("summary", {text: "History (" + b.history.length + " turns)"})].concat(
      b.history.map(function (t) { return el("div", {}, [el("b", {text: t[0]}), ": " + t[1]]); }))));
    var cols = [], missing = [];
    [REFERENCE].concat(chosen()).forEach(function (target) {
      var turns = null, notes = [], unknown = [];
      if (target === REFERENCE) { turns = b.reference; unknown = b.reference_unknown || []; }
      else {
        var c = b.continuations[target];
        if (!c) { missing.push(target); return; }
        if (c.s !== "ok") { notes.push(c.s + (c.r ? ": " + c.r : "")); }
        if (c.t) { turns = c.t; unknown = c.u || []; }  // a stale ok continuation keeps its turns, under its note
      }
      var j = judgment(judge, target, n);
      if (turns) {
        var jn = judgmentNote(j);
        if (jn) { notes.push(jn); }
      }
      var sc = [0, 1].map(function (w) { return score(judge, target, n, w); });
      cols.push({target: target, turns: turns || [], notes: notes, j: j, unknown: unknown, scores: sc,
        ev: b.evidence[judge + "\u0000" + target] || {}});
    });
    /* one grid: the turn number, then a column per target; row i holds turn i of every target */
    var grid = el("div", {cls: "cc-grid"});
    grid.style.gridTemplateColumns = "3.2em repeat(" + cols.length + ", minmax(0, 1fr))";
    grid.appendChild(el("div", {cls: "cc-num cc-headcell", text: "turn"}));
    cols.forEach(function (c) {
      var head = el("div", {cls: "cc-head cc-headcell", "data-target": c.target},
        [el("div", {cls: "cc-title", text: c.target === REFERENCE ? HUMAN : c.target})]);
      if (c.scores[0] !== null || c.scores[1] !== null) {
        head.appendChild(el("div", {cls: "cc-scores", text: "consistency " + fmt(c.scores[0]) + ", collaborativeness " +
          fmt(c.scores[1]) + " (" + judge + ")"}));
      }
      c.notes.forEach(function (t) { head.appendChild(note(t)); });
      grid.appendChild(head);
    });
    var rows = Math.max.apply(null, [0].concat(cols.map(function (c) { return c.turns.length; })));
    for (var i = 0; i < rows; i++) {
      grid.appendChild(el("div", {cls: "cc-num", "data-turn": String(i), text: "#" + (i + 1)}));
      cols.forEach(function (c) {
        grid.appendChild(i < c.turns.length ? turnElement(c.turns[i], i, c.target, c.j, c.ev, c.unknown.indexOf(i) >= 0)
          : el("div", {cls: "cc-empty", "data-target": c.target}));
      });
    }
    view.appendChild(grid);
    if (missing.length) { view.appendChild(el("div", {cls: "cc-fold", text: "not simulated here: " + missing.join(", ")})); }
    view.setAttribute("data-instance", b.id);
  }

  /* the turns behind one Figure-3 bar, counted as stats.figure3_means counts them (and as the
     notebooks' ConversationViewer.bar): the simulated series of a panel is its setup's valid
     judgments; the human series is the reference on the same instances (scope "all": every one) */
  function bar(panel, series, behaviour, scope, judge) {
    var target = series === HUMAN ? REFERENCE : panel;
    var out = {panel: panel, series: series, behaviour: behaviour, n: 0, rows: [], instances: []};
    V.instances.forEach(function (inst, n) {
      if (scope === "panel" && V.setups.indexOf(panel) >= 0 && !valid(judge, panel, n)) { return; }
      var j = valid(judge, target, n);
      var len = target === REFERENCE ? inst.n : inst.ok[target];
      if (!j || len === undefined) { return; }
      out.n += 1;
      Object.keys(j.l || {}).map(Number).sort(function (a, c) { return a - c; }).forEach(function (t) {
        if (j.l[String(t)].indexOf(behaviour) >= 0 && t >= 0 && t < len) {
          out.rows.push([n, t]);
          if (out.instances.indexOf(n) < 0) { out.instances.push(n); }
        }
      });
    });
    return out;
  }

  /* open instance n and bring its turn t of target into view (a search result, a turn behind a bar) */
  function openTurn(n, target, t) {
    if (target !== REFERENCE && chosen().indexOf(target) < 0) {
      var box = setupBox.querySelector('input[value="' + CSS.escape(target) + '"]');
      if (box) { box.checked = true; }
    }
    if (!matches(n)) { dsSel[0].value = ALL; bSel[0].value = ALL; sSel[0].value = ALL; }
    return refilter(n).then(function () {
      var e = document.getElementById("cc-t-" + target + "-" + t);
      if (e) { e.classList.add("cc-focus"); e.scrollIntoView({block: "center"}); }
    });
  }

  var showing = false, shows = 0;
  function showBar(panel, series, behaviour, scope, judge) {
    if (judge && V.judges.indexOf(judge) >= 0) { jSel[0].value = judge; }
    var br = bar(panel, series, behaviour, scope, jSel[0].value), token = ++shows;
    var name = BEHAVIOURS[behaviour] ? BEHAVIOURS[behaviour].name : behaviour;
    var mean = br.n ? "; mean " + (br.rows.length / br.n).toFixed(2) + " per conversation over n = " + br.n : "";
    behind.textContent = "";
    return Promise.all(br.instances.map(block)).then(function (bs) {
      if (token !== shows) { return br; }
      var got = {};
      br.instances.forEach(function (n, k) { got[n] = bs[k]; });
      var list = el("ol", {}, br.rows.map(function (r) {
        var b = got[r[0]], turns = br.series === HUMAN ? b.reference : b.continuations[panel].t, t = turns[r[1]];
        return el("li", {"data-instance": b.id, "data-turn": String(r[1])},
          [b.id + " #" + (r[1] + 1) + " ", el("b", {text: t[0]}), ": " + t[1]]);
      }));
      showing = true;  // the controls the bar sets keep its list
      try {
        behind.textContent = "";
        behind.appendChild(el("div", {cls: "cc-behind"}, [el("b", {text: br.rows.length + " turn(s) in " +
          br.instances.length + " of " + br.n + " instance(s)"}), ": " + series + " in panel " + panel + ", labelled " +
          name + " by " + jSel[0].value + mean, list]));
        if (bSel[0].querySelector('option[value="' + CSS.escape(behaviour) + '"]')) { bSel[0].value = behaviour; }
        if (V.setups.indexOf(panel) >= 0) {
          setupBox.querySelectorAll("input").forEach(function (c) { c.checked = c.value === panel; });
        }
        sSel[0].value = ALL;
        var pick = br.instances.length ? br.instances[0] : null;
        if (pick !== null && dsSel[0].value !== ALL && dsSel[0].value !== V.instances[pick].dataset) { dsSel[0].value = ALL; }
        refilter(pick);
      } finally { showing = false; }
      return br;
    }).catch(failed);
  }

  /* a setup's conversations (a leaderboard row, a setup's point in a chart): that setup alone beside
     the humans, every filter cleared, on the first instance it simulated */
  function showSetup(setup, judge) {
    if (V.setups.indexOf(setup) < 0) { return Promise.resolve(); }
    if (judge && V.judges.indexOf(judge) >= 0) { jSel[0].value = judge; }
    showing = true;
    try {
      setupBox.querySelectorAll("input").forEach(function (c) { c.checked = c.value === setup; });
      dsSel[0].value = ALL; bSel[0].value = ALL; sSel[0].value = ALL;
      var ok = V.instances.filter(function (inst) { return Object.prototype.hasOwnProperty.call(inst.ok, setup); }).length;
      var all = V.instances.length;
      behind.textContent = "";
      behind.appendChild(el("div", {cls: "cc-behind", "data-setup": setup}, [el("b", {text: setup}),
        ": " + ok + " of " + all + " instance(s) with an ok continuation, beside the human reference; " +
        "pick an instance below."]));
      var first = null;
      V.instances.forEach(function (inst, n) { if (first === null && Object.prototype.hasOwnProperty.call(inst.ok, setup)) { first = n; } });
      var p = refilter(first);
    } finally { showing = false; }
    vs.scrollIntoView();
    return p;
  }

  /* every turn (the reference and the chosen setups' continuations) of the instances the dataset
     filter keeps whose text holds the search words and whose speaker holds the speaker's */
  var MAX_FOUND = 200, searches = 0;
  function search() {
    var token = ++searches;
    found.textContent = "";
    found.removeAttribute("data-found");
    if (!needle() && !speakerNeedle()) { return render(); }
    var ns = [];
    V.instances.forEach(function (inst, n) { if (dsSel[0].value === ALL || inst.dataset === dsSel[0].value) { ns.push(n); } });
    return Promise.all(ns.map(block)).then(function (bs) {
      if (token !== searches) { return; }
      var hits = [];
      bs.forEach(function (b, k) {
        [REFERENCE].concat(chosen()).forEach(function (target) {
          var c = target === REFERENCE ? null : b.continuations[target];
          var turns = target === REFERENCE ? b.reference : c && c.t ? c.t : [];
          turns.forEach(function (t, i) { if (turnMatches(t)) { hits.push([ns[k], target, i, t, b.id]); } });
        });
      });
      var shown = hits.slice(0, MAX_FOUND);
      var list = el("ol", {}, shown.map(function (h) {
        var a = el("a", {href: "#cc-t-" + h[1] + "-" + h[2], text: h[4] + " · " + (h[1] === REFERENCE ? HUMAN : h[1]) +
          " #" + (h[2] + 1)});
        a.addEventListener("click", function (ev) { ev.preventDefault(); openTurn(h[0], h[1], h[2]); });
        return el("li", {"data-instance": h[4], "data-target": h[1], "data-turn": String(h[2])},
          [a, " ", el("b", {text: h[3][0]}), ": " + h[3][1]]);
      }));
      found.appendChild(el("div", {cls: "cc-behind"}, [el("b", {text: hits.length + " turn(s) found" +
        (hits.length > MAX_FOUND ? " (the first " + MAX_FOUND + " listed)" : "")}),
        " in the human references and the chosen setups' continuations", list]));
      found.setAttribute("data-found", String(hits.length));
      return render();
    }).catch(failed);
  }

  /* a change of instance or filters clears the list of turns behind a clicked bar: it named
     what the bar held, not what is shown now */
  function changed(fn) {
    return function () { if (!showing) { behind.textContent = ""; } fn(); };
  }
  function again() { return refilter(); }
  [dsSel[0], bSel[0], jSel[0], sSel[0], sMin[0], sMax[0]].forEach(function (s) { s.addEventListener("change", changed(again)); });
  setupBox.addEventListener("change", changed(again));
  iSel.addEventListener("change", changed(render));
  qGo.addEventListener("click", search);
  [qText[0], qSpeaker[0]].forEach(function (q) {
    q.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { search(); } });
    q.addEventListener("search", search);  // the clear button of a search field
  });
  /* every "conversations" link (the headline's leaders, a table's rows) opens that setup's conversations */
  document.addEventListener("click", function (ev) {
    var a = ev.target && ev.target.closest ? ev.target.closest("a.cc-goto") : null;
    if (!a) { return; }
    ev.preventDefault();
    showSetup(a.getAttribute("data-setup"), a.getAttribute("data-judge"));
  });
  var viewer = {showBar: showBar, showSetup: showSetup, search: search, bar: bar, refilter: refilter};
  window.ccViewer = viewer;
  refilter();

  // ------------------------------------------------------------------ provenance
  var prov = section("cc-provenance", "Provenance");
  prov.appendChild(el("p", {text: "What made this run (its manifest.json): the params, the setup and judge ids, " +
    "the versions." + (DATA.pipeline_check ? " Labelled pipeline check: a tiny model, not results." : "")}));
  prov.appendChild(el("pre", {cls: "cc-json", text: JSON.stringify(DATA.provenance, null, 2)}));
  /* the sticky navigation's height (it wraps on a narrow window): what a heading jumped to keeps clear of */
  function navHeight() { document.documentElement.style.setProperty("--cc-nav-h", (nav.offsetHeight + 8) + "px"); }
  navHeight();
  window.addEventListener("resize", navHeight);
  document.body.setAttribute("data-ready", "1");
})();
