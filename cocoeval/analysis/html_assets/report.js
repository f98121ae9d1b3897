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

  function tableElement(t) {
    var head = el("tr", {}, t.columns.map(function (c) { return el("th", {text: c}); }));
    var body = t.rows.map(function (r) {
      return el("tr", {}, r.map(function (v) {
        return el("td", {cls: typeof v === "number" ? "num" : "", text: fmt(v)});
      }));
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
        }
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
    "turn by turn, each turn tagged with the behaviours the judge found (red: inconsistent, blue: uncollaborative; " +
    "the evidence on hover). Click a bar of a Figure-3 chart to list the turns behind it."}));

  function select(id, label, options) {
    var s = el("select", {id: id});
    options.forEach(function (o) { s.appendChild(el("option", {value: o[0], text: o[1]})); });
    return [s, el("span", {}, [el("label", {"for": id, text: label}), s])];
  }
  var dsSel = select("cc-dataset", "dataset", [[ALL, ALL]].concat(V.datasets.map(function (d) { return [d, d]; })));
  var bSel = select("cc-behaviour", "behaviour", [[ALL, ALL]].concat(V.behaviours.map(function (b) { return [b.id, b.name]; })));
  var jSel = select("cc-judge", "judge", (V.judges.length ? V.judges : ["(none)"]).map(function (j) { return [j, j]; }));
  if (DATA.judge && V.judges.indexOf(DATA.judge) >= 0) { jSel[0].value = DATA.judge; }
  var setupBox = el("div", {cls: "cc-setups", id: "cc-setups"});
  V.setups.forEach(function (s, k) {
    var cb = el("input", {type: "checkbox", value: s});
    cb.checked = k < 2;
    setupBox.appendChild(el("label", {}, [cb, " " + s]));
  });
  var iSel = el("select", {id: "cc-instance"});
  vs.appendChild(el("div", {cls: "cc-controls"}, [dsSel[1], bSel[1], jSel[1],
    el("span", {}, [el("label", {text: "setups"}), setupBox]),
    el("span", {}, [el("label", {"for": "cc-instance", text: "instance"}), iSel])]));
  var behind = el("div", {id: "cc-behind"});
  var view = el("div", {id: "cc-view"});
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
  function matches(n) {
    var inst = V.instances[n];
    if (dsSel[0].value !== ALL && inst.dataset !== dsSel[0].value) { return false; }
    var b = bSel[0].value;
    if (b === ALL) { return true; }
    return [REFERENCE].concat(chosen()).some(function (t) { return hasBehaviour(judgment(jSel[0].value, t, n), b); });
  }
  function simulatedCount(n) {
    var ok = V.instances[n].ok;
    return chosen().filter(function (s) { return s in ok; }).length;
  }

  var quiet = false;
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
  function turnElement(turn, i, j, ev) {
    var d = el("div", {cls: "cc-turn", "data-turn": String(i)}, [el("b", {text: turn[0]}), ": " + turn[1]]);
    var labels = j && (j.s === "ok" || j.s === "repaired") && j.l ? (j.l[String(i)] || []) : [];
    labels.forEach(function (b) {
      var beh = BEHAVIOURS[b];
      var tag = el("span", {cls: "cc-tag", "data-behaviour": b, text: beh ? beh.name : b});
      tag.style.background = COLOURS[beh ? beh.category : ""] || "#666";
      tag.title = ((ev || {})[String(i)] || {})[b] || "";
      d.appendChild(tag);
    });
    if (bSel[0].value !== ALL && labels.indexOf(bSel[0].value) >= 0) { d.classList.add("cc-hit"); }
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
      var turns = null, notes = [];
      if (target === REFERENCE) { turns = b.reference; }
      else {
        var c = b.continuations[target];
        if (!c) { missing.push(target); return; }
        if (c.s !== "ok") { notes.push(c.s + (c.r ? ": " + c.r : "")); }
        if (c.t) { turns = c.t; }  // a stale ok continuation keeps its turns, under its note
      }
      var j = judgment(judge, target, n);
      var col = el("div", {cls: "cc-col", "data-target": target},
        [el("div", {cls: "cc-title", text: target === REFERENCE ? HUMAN : target})]);
      notes.forEach(function (t) { col.appendChild(note(t)); });
      if (turns) {
        var jn = judgmentNote(j);
        if (jn) { col.appendChild(note(jn)); }
        var ev = b.evidence[judge + "\u0000" + target] || {};
        turns.forEach(function (t, i) { col.appendChild(turnElement(t, i, j, ev)); });
      }
      cols.push(col);
    });
    view.appendChild(el("div", {cls: "cc-cols"}, cols));
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
        var pick = br.instances.length ? br.instances[0] : null;
        if (pick !== null && dsSel[0].value !== ALL && dsSel[0].value !== V.instances[pick].dataset) { dsSel[0].value = ALL; }
        refilter(pick);
      } finally { showing = false; }
      return br;
    }).catch(failed);
  }

  /* a change of instance or filters clears the list of turns behind a clicked bar: it named
     what the bar held, not what is shown now */
  function changed(fn) {
    return function () { if (!showing) { behind.textContent = ""; } fn(); };
  }
  function again() { return refilter(); }
  [dsSel[0], bSel[0], jSel[0]].forEach(function (s) { s.addEventListener("change", changed(again)); });
  setupBox.addEventListener("change", changed(again));
  iSel.addEventListener("change", changed(render));
  var viewer = {showBar: showBar, bar: bar, refilter: refilter};
  window.ccViewer = viewer;
  refilter();

  // ------------------------------------------------------------------ provenance
  var prov = section("cc-provenance", "Provenance");
  prov.appendChild(el("p", {text: "What made this run (its manifest.json): the params, the setup and judge ids, " +
    "the versions." + (DATA.pipeline_check ? " Labelled pipeline check: a tiny model, not results." : "")}));
  prov.appendChild(el("pre", {cls: "cc-json", text: JSON.stringify(DATA.provenance, null, 2)}));
  document.body.setAttribute("data-ready", "1");
})();
