"""Notebook viewers (ipywidgets): a conversation viewer linked to the Figure-3 chart, and an
annotator that writes the annotation format of ``cocoeval.annotate``. All model and human text
is HTML-escaped before display."""

from __future__ import annotations

import csv
import html
from pathlib import Path
from typing import Any

import ipywidgets as w

from .annotate import FIELDS
from .charts import CATEGORY_COLOURS, HUMAN
from .convstats import STATISTICS, conversation_stats
from .frames import REFERENCE
from .judge import Target, targets_for
from .schema import Judgment
from .taxonomy import Taxonomy, load_taxonomy

ALL = "(all)"


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


class ConversationViewer:
    """Pick an instance; see M, S, a collapsible history, and the human reference beside the
    chosen simulated continuations, turn by turn, each turn tagged with the behaviours the judge
    found (colour by category; evidence on hover), each column ending with its judge-free statistics
    (``convstats``). Filters: dataset, setup, behaviour, judge."""

    def __init__(self, run: dict[str, Any], *, judge: str | None = None, taxonomy: Taxonomy | None = None) -> None:
        self.run = run
        self.tax = taxonomy or load_taxonomy()
        self.names = {b.id: b for b in self.tax.behaviours}
        self.instances = {i.id: i for i in run["instances"]}
        self.targets: dict[tuple[str, str], Target] = {
            (t.instance.id, t.name): t for t in targets_for(run["instances"], run["continuations"])}
        self.judgments: dict[tuple[str, str, str], Judgment] = {}
        for name, js in run.get("judgments", {}).items():
            for j in js:
                if j.kind == "fine_grained":
                    self.judgments[(j.judge_name or name, j.instance_id, j.target_name or j.target)] = j
        judges = sorted({k[0] for k in self.judgments})
        setups = sorted(run["continuations"])
        datasets = sorted({i.dataset for i in run["instances"]})
        self.dataset = w.Dropdown(options=[ALL, *datasets], description="dataset")
        self.behaviour = w.Dropdown(options=[(ALL, ALL)] + [(b.name, b.id) for b in self.tax.behaviours],
                                    description="behaviour")
        self.setups = w.SelectMultiple(options=setups, value=tuple(setups[:2]), description="setups", rows=4)
        self.judge = w.Dropdown(options=judges or [None], value=judge if judge in judges else (judges or [None])[0],
                                description="judge")
        self.instance = w.Dropdown(description="instance", layout=w.Layout(width="520px"))
        self.html = w.HTML()
        self.behind = w.HTML()
        for control in (self.dataset, self.behaviour, self.setups, self.judge):
            control.observe(self._refilter, "value")
        self.instance.observe(lambda _: self.refresh(), "value")
        self._refilter()
        self.widget = w.VBox([w.HBox([self.dataset, self.behaviour, self.judge]), self.setups, self.instance,
                              self.behind, self.html])

    # ------------------------------------------------------------------ filtering and rendering
    def _matches(self, inst_id: str) -> bool:
        inst = self.instances[inst_id]
        if self.dataset.value != ALL and inst.dataset != self.dataset.value:
            return False
        if self.behaviour.value == ALL:
            return True
        for target in [REFERENCE, *self.setups.value]:
            j = self.judgments.get((self.judge.value, inst_id, target))
            if j and any(self.behaviour.value in lb.behaviours for lb in j.labels):
                return True
        return False

    def _refilter(self, *_: Any) -> None:
        ids = [i for i in sorted(self.instances) if self._matches(i)]
        current = self.instance.value
        self.instance.options = ids
        self.instance.value = current if current in ids else (ids[0] if ids else None)
        self.refresh()

    def _turn(self, t: Any, i: int, judgment: Judgment | None) -> str:
        tags = ""
        if judgment is not None:
            lb = next((x for x in judgment.labels if x.turn == i), None)
            for b in lb.behaviours if lb else []:
                beh = self.names.get(b)
                colour = CATEGORY_COLOURS.get(beh.category if beh else "", "#666")
                tags += (f'<span class="cc-tag" data-behaviour="{_e(b)}" title="{_e(lb.evidence.get(b, ""))}" '
                         f'style="background:{colour};color:white;border-radius:3px;padding:0 4px;'
                         f'margin-left:4px;font-size:85%">{_e(beh.name if beh else b)}</span>')
        hi = ' style="background:#fff3cd"' if self.behaviour.value != ALL and f'data-behaviour="{self.behaviour.value}"' in tags else ""
        return f"<div{hi}><b>{_e(t.speaker)}</b>: {_e(t.text)}{tags}</div>"

    def render(self) -> str:
        iid = self.instance.value
        if iid is None:
            return "<i>No instance matches the filters.</i>"
        inst = self.instances[iid]
        m = inst.metadata
        parts = [f"<h4>{_e(inst.id)} <small>({_e(inst.dataset)})</small></h4>",
                 "<b>Goals</b><ul>" + "".join(f"<li>{_e(g)}</li>" for g in m.goals) + "</ul>",
                 "<b>Participants</b>: " + ", ".join(
                     _e(p.name) + (f" <i>({_e(', '.join(x for x in (p.role, p.stance) if x))})</i>" if p.role or p.stance else "")
                     for p in m.participants),
                 f"<p><b>Summary</b> ({_e(m.method)}/{_e(inst.summary.method)}): {_e(inst.summary.text)}</p>",
                 f"<p><small>M: {_e(m.method)}, S: {_e(inst.summary.method)}, turns: "
                 f"{_e(inst.provenance.text_method)}</small></p>",
                 f"<details><summary>History ({len(inst.history)} turns)</summary>"
                 + "".join(f"<div><b>{_e(t.speaker)}</b>: {_e(t.text)}</div>" for t in inst.history) + "</details>"]
        cols = []
        for target in [REFERENCE, *self.setups.value]:
            t = self.targets.get((iid, target))
            title = HUMAN if target == REFERENCE else target
            if t is None:
                cont = next((c for c in self.run["continuations"].get(target, []) if c.instance_id == iid), None)
                body = f"<i>{'invalid: ' + _e(cont.reason) if cont else 'not simulated'}</i>"
            else:
                j = self.judgments.get((self.judge.value, iid, target))
                note = "" if j is None or j.status != "invalid" else f"<i>judgment invalid: {_e(j.reason)}</i>"
                body = note + "".join(self._turn(x, i, j) for i, x in enumerate(t.turns)) + self.stats_html(t)
            cols.append(f'<td style="vertical-align:top;padding:4px;width:{100 // (1 + len(self.setups.value))}%">'
                        f"<b>{_e(title)}</b>{body}</td>")
        parts.append('<table style="width:100%;border-collapse:collapse"><tr>' + "".join(cols) + "</tr></table>")
        return "\n".join(parts)

    def judge_free(self, target: Target) -> dict[str, Any]:
        """The judge-free statistics of one target (``convstats.conversation_stats``; None: undefined)."""
        inst = target.instance
        p = len({x.speaker for x in [*inst.history, *inst.reference]})
        return conversation_stats(target.turns, history=inst.history, goals=inst.metadata.goals, participants=p,
                                  scored=target.judged)

    def stats_html(self, target: Target) -> str:
        def fmt(k: str, v: Any) -> str:
            return "–" if v is None else str(v) if k in ("turns", "speakers") else f"{v:.2f}"

        rows = "".join(f'<tr><td>{_e(STATISTICS[k])}</td><td style="text-align:right">{fmt(k, v)}</td></tr>'
                       for k, v in self.judge_free(target).items())
        return ('<details class="cc-stats"><summary>judge-free statistics</summary>'
                f'<table style="font-size:85%">{rows}</table></details>')

    def refresh(self) -> None:
        self.html.value = self.render()

    # ------------------------------------------------------------------ chart linking
    def turns_behind(self, target: str, behaviour: str) -> list[tuple[str, int, str, str]]:
        """(instance, turn, speaker, text) of every turn of ``target`` the current judge labelled
        with ``behaviour``: the data behind one bar of Figure 3."""
        out = []
        for (judge, iid, tgt), j in sorted(self.judgments.items()):
            if judge != self.judge.value or tgt != target:
                continue
            t = self.targets.get((iid, tgt))
            for lb in j.labels:
                if behaviour in lb.behaviours and t is not None:
                    out.append((iid, lb.turn, t.turns[lb.turn].speaker, t.turns[lb.turn].text))
        return out

    def show_bar(self, target: str, behaviour: str) -> None:
        rows = self.turns_behind(target, behaviour)
        name = self.names[behaviour].name if behaviour in self.names else behaviour
        self.behind.value = (f"<b>{len(rows)} turn(s) of {_e(target)} labelled {_e(name)}</b><ol>"
                             + "".join(f"<li>{_e(i)} #{n + 1} <b>{_e(s)}</b>: {_e(x)}</li>" for i, n, s, x in rows)
                             + "</ol>")
        if behaviour in [v for _, v in self.behaviour.options]:
            self.behaviour.value = behaviour

    def on_selection(self, value: list[dict[str, Any]]) -> None:
        """Handle a Figure-3 bar selection ({panel, series, behaviour} fields)."""
        if not value:
            return
        v = value[0]
        target = REFERENCE if v.get("series") == HUMAN else v.get("panel", REFERENCE)
        self.show_bar(target, v["behaviour"])

    def link(self, jchart: Any, param: str = "pick") -> None:
        """Clicking a bar of ``charts.behaviour_bars(..., selectable=True)`` shown as an
        ``alt.JupyterChart`` lists the turns behind it here."""
        jchart.selections.observe(lambda change: self.on_selection(change.new.value), [param])


class Annotator:
    """Label the turns and the two Likert scores of one target; Save appends rows in the
    annotation format to a CSV (import with ``cocoeval annotate-import``)."""

    def __init__(self, target: Target, out_csv: str | Path, *, taxonomy: Taxonomy | None = None,
                 item_id: str | None = None) -> None:
        self.target, self.out = target, Path(out_csv)
        self.item_id = item_id
        tax = taxonomy or load_taxonomy()
        self.annotator = w.Text(description="annotator")
        self.turns: dict[int, w.SelectMultiple] = {}
        rows = []
        for i, t in enumerate(target.turns):
            label = w.HTML(f"<b>{i + 1}. {_e(t.speaker)}</b>: {_e(t.text)}")
            if i in target.judged:
                sel = w.SelectMultiple(options=[(b.name, b.id) for b in tax.behaviours], rows=3)
                self.turns[i] = sel
                rows.append(w.VBox([label, sel]))
            else:
                rows.append(label)
        self.consistency = w.IntSlider(value=5, min=1, max=10, description="consistency")
        self.collaborativeness = w.IntSlider(value=5, min=1, max=10, description="collaborative")
        self.save = w.Button(description="Save", button_style="primary")
        self.status = w.HTML()
        self.save.on_click(lambda _: self.write())
        self.widget = w.VBox([self.annotator, *rows, self.consistency, self.collaborativeness, self.save, self.status])

    def rows(self) -> list[dict[str, Any]]:
        who = self.annotator.value.strip()
        ident = {"item_id": self.item_id} if self.item_id else {
            "instance_id": self.target.instance.id, "target": self.target.name}
        out = [{"annotator": who, **ident, "turn": i + 1, "behaviours": ";".join(sel.value)}
               for i, sel in self.turns.items()]
        out.append({"annotator": who, **ident, "consistency": self.consistency.value,
                    "collaborativeness": self.collaborativeness.value})
        return out

    def write(self) -> None:
        if not self.annotator.value.strip():
            self.status.value = "<span style='color:#c0392b'>Fill in the annotator name first.</span>"
            return
        new = not self.out.exists()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        with self.out.open("a", newline="", encoding="utf-8") as f:
            wr = csv.DictWriter(f, fieldnames=FIELDS)
            if new:
                wr.writeheader()
            wr.writerows(self.rows())
        self.status.value = f"Saved {len(self.turns) + 1} rows to {_e(self.out)}."
