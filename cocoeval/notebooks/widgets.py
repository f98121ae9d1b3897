"""Notebook viewers (ipywidgets): a conversation viewer linked to the Figure-3 chart, and an
annotator (``cocoeval.notebooks.annotator``) that writes the annotation format of ``cocoeval.annotate.exchange``.
All model and human text is HTML-escaped before display."""

from __future__ import annotations

import html
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from cocoeval.analysis.charts import CATEGORY_COLOURS, HUMAN
from cocoeval.analysis.convstats import STATISTICS, conversation_stats
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.html_report import continuation_note, judgment_note, not_simulated_line
from cocoeval.analysis.verdicts import Verdict, verdicts
from cocoeval.core.targets import REFERENCE, Target, targets_for
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy

from .annotator import Annotator

if TYPE_CHECKING:
    from cocoeval.analysis.store import RunLike

ALL = "(all)"
WIDE = {"description_width": "initial"}
__all__ = ["ALL", "Annotator", "Bar", "ConversationViewer", "Verdict", "verdicts"]


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


@dataclass
class Bar:
    """The data behind one bar of Figure 3: ``n`` instances with a valid judgment of ``target``
    (the bar's n; for the human series, the panel setup's instances), and every labelled turn."""

    panel: str
    series: str
    behaviour: str
    target: str
    n: int = 0
    rows: list[tuple[str, int, str, str]] = field(default_factory=list)
    """(instance, turn index, speaker, text)"""

    @property
    def instances(self) -> list[str]:
        """The instances that contribute a labelled turn, in order."""
        return list(dict.fromkeys(r[0] for r in self.rows))

    @property
    def mean(self) -> float | None:
        return len(self.rows) / self.n if self.n else None


class ConversationViewer:
    """Pick an instance; see M, S, a collapsible history, and the human reference beside the
    chosen simulated continuations, turn by turn, each turn tagged with the behaviours the judge
    found (colour by category; evidence on hover), each column ending with its judge-free statistics
    (``convstats``). Filters: dataset, setup, behaviour, judge. Linked to a Figure-3 chart
    (``link``), a bar click lists the turns behind that bar and shows one of its conversations."""

    def __init__(self, run: RunLike, *, judge: str | None = None, taxonomy: Taxonomy | None = None) -> None:
        self.run = run
        self.tax = taxonomy or load_taxonomy()
        self.names = {b.id: b for b in self.tax.behaviours}
        # what the lists and filters need comes from the frames, and the texts of a conversation
        # from its own lines when it is shown (``RunStore.instance``, ``RunStore.continuation``): a
        # store (``frames.open_run_dir``) reads no record whole, judgments included
        frames = run_frames(run, self.tax)
        self.datasets: dict[str, str] = dict(frames.instances.select("instance_id", "dataset").iter_rows())
        """{instance id: its dataset}, every instance of the run."""
        self._status = {
            (iid, setup): status
            for setup, iid, status in frames.continuations.select("setup", "instance_id", "status").iter_rows()
        }
        self._targets: dict[tuple[str, str], Target | None] = {}
        self.judgments: dict[tuple[str, str, str], Verdict] = verdicts(frames)
        judges = sorted({k[0] for k in self.judgments})
        judge_options: list[str | None] = [*judges] or [None]
        setups = sorted(run.names("continuations"))
        datasets = sorted(set(self.datasets.values()))
        self._quiet = False
        self.dataset = w.Dropdown(options=[ALL, *datasets], description="dataset", style=WIDE)
        self.behaviour = w.Dropdown(
            options=[(ALL, ALL)] + [(b.name, b.id) for b in self.tax.behaviours], description="behaviour", style=WIDE
        )
        self.setups = w.SelectMultiple(
            options=setups,
            value=tuple(setups[:2]),
            description="setups",
            rows=max(1, min(len(setups), 12)),
            style=WIDE,
            layout=w.Layout(width="auto", min_width="360px"),
        )
        self.judge = w.Dropdown(
            options=judge_options, value=judge if judge in judges else judge_options[0], description="judge", style=WIDE
        )
        self.instance = w.Dropdown(description="instance", style=WIDE, layout=w.Layout(width="auto", min_width="520px"))
        self.html = w.HTML()
        self.behind = w.HTML()
        for control in (self.dataset, self.behaviour, self.setups, self.judge):
            control.observe(self._refilter, "value")
        self.instance.observe(lambda _: None if self._quiet else self.refresh(), "value")
        self._showing = False  # a bar's list is being shown: its own changes keep it
        for control in (self.dataset, self.behaviour, self.setups, self.judge, self.instance):
            control.observe(self._clear_behind, "value")
        self._refilter()
        self.widget = w.VBox(
            [w.HBox([self.dataset, self.behaviour, self.judge]), self.setups, self.instance, self.behind, self.html]
        )

    # ------------------------------------------------------------------ filtering and rendering
    def _clear_behind(self, *_: Any) -> None:
        """Another instance or filter: the list of turns behind a clicked bar named what the bar
        held, not what is shown now, so it goes (a new click lists them again)."""
        if not self._showing:
            self.behind.value = ""

    def target(self, iid: str, name: str) -> Target | None:
        """Instance ``iid``'s human reference (``name`` ``REFERENCE``) or setup ``name``'s ok
        continuation of it, as ``targets_for`` makes them (None: there is none); read at first use."""
        key = (iid, name)
        if key not in self._targets:
            inst, made = self.run.instance(iid), None
            if inst is not None:
                cont = None if name == REFERENCE else self.run.continuation(name, iid)
                made = next((t for t in targets_for([inst], {name: [cont]} if cont else {}) if t.name == name), None)
            self._targets[key] = made
        return self._targets[key]

    def _simulated(self, setup: str, iid: str) -> bool:
        status = self._status.get((iid, setup))  # the frames: ok, invalid or stale (an ok one may be stale)
        return status == "ok" or (status == "stale" and self.target(iid, setup) is not None)

    def _matches(self, inst_id: str) -> bool:
        if self.dataset.value != ALL and self.datasets[inst_id] != self.dataset.value:
            return False
        if self.behaviour.value == ALL:
            return True
        for target in [REFERENCE, *self.setups.value]:
            j = self.judgments.get((self.judge.value, inst_id, target))
            if j and any(self.behaviour.value in bs for bs, _ in j.labels.values()):
                return True
        return False

    @contextmanager
    def _batch(self) -> Iterator[None]:
        """Change several controls with one refilter at the end."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False
        self._refilter()

    def _refilter(self, *_: Any) -> None:
        if self._quiet:
            return
        ids = [i for i in sorted(self.datasets) if self._matches(i)]
        current = self.instance.value
        if current not in ids and ids:  # open on an instance the chosen setups simulated
            current = max(ids, key=lambda i: sum(self._simulated(s, i) for s in self.setups.value))
        self._quiet = True
        try:
            self.instance.options = ids
            self.instance.value = current if ids else None
        finally:
            self._quiet = False
        self.refresh()

    def _turn(self, t: Any, i: int, judgment: Verdict | None) -> str:
        tags = ""
        if judgment is not None:
            behaviours, evidence = judgment.labels.get(i, ([], {}))
            for b in behaviours:
                beh = self.names.get(b)
                colour = CATEGORY_COLOURS.get(beh.category if beh else "", "#666")
                tags += (
                    f'<span class="cc-tag" data-behaviour="{_e(b)}" title="{_e(evidence.get(b, ""))}" '
                    f'style="background:{colour};color:white;border-radius:3px;padding:0 4px;'
                    f'margin-left:4px;font-size:85%">{_e(beh.name if beh else b)}</span>'
                )
        hi = (
            ' style="background:#fff3cd"'
            if self.behaviour.value != ALL and f'data-behaviour="{self.behaviour.value}"' in tags
            else ""
        )
        return f"<div{hi}><b>{_e(t.speaker)}</b>: {_e(t.text)}{tags}</div>"

    def render(self) -> str:
        iid = self.instance.value
        if iid is None:
            return "<i>No instance matches the filters.</i>"
        inst = self.run.instance(iid)
        assert inst is not None  # an instance of the frames
        m = inst.metadata
        parts = [
            f"<h4>{_e(inst.id)} <small>({_e(inst.dataset)})</small></h4>",
            "<b>Goals</b><ul>" + "".join(f"<li>{_e(g)}</li>" for g in m.goals) + "</ul>",
            "<b>Participants</b>: "
            + ", ".join(
                _e(p.name)
                + (f" <i>({_e(', '.join(x for x in (p.role, p.stance) if x))})</i>" if p.role or p.stance else "")
                for p in m.participants
            ),
            f"<p><b>Summary</b> ({_e(m.method)}/{_e(inst.summary.method)}): {_e(inst.summary.text)}</p>",
            f"<p><small>M: {_e(m.method)}, S: {_e(inst.summary.method)}, turns: "
            f"{_e(inst.provenance.text_method)}</small></p>",
            f"<details><summary>History ({len(inst.history)} turns)</summary>"
            + "".join(f"<div><b>{_e(t.speaker)}</b>: {_e(t.text)}</div>" for t in inst.history)
            + "</details>",
        ]
        cols, missing = [], []
        for target in [REFERENCE, *self.setups.value]:
            t = self.target(iid, target)
            title = HUMAN if target == REFERENCE else target
            cont = None if target == REFERENCE else self.run.continuation(target, iid)
            if target != REFERENCE and cont is None:  # folded into one line below the columns
                missing.append(target)
                continue
            stale = self.run.stale_reason(target, cont) if cont is not None else None
            note = continuation_note("stale" if stale else cont.status, stale or cont.reason) if cont else None
            body = f'<div class="cc-note"><i>{_e(note)}</i></div>' if note else ""
            if t is not None:
                j = self.judgments.get((self.judge.value, iid, target))
                jn = None if j is None else judgment_note(j.status, j.reason)
                body += f'<div class="cc-note"><i>{_e(jn)}</i></div>' if jn else ""
                body += "".join(self._turn(x, i, j) for i, x in enumerate(t.turns)) + self.stats_html(t)
            cols.append(
                f'<td class="cc-col" data-target="{_e(target)}" style="vertical-align:top;padding:4px;'
                f'width:{100 // (1 + len(self.setups.value) - len(missing))}%">'
                f'<div class="cc-title" style="font-weight:bold;border-bottom:1px solid #ccc;'
                f'margin-bottom:4px">{_e(title)}</div>{body}</td>'
            )
        parts.append('<table style="width:100%;border-collapse:collapse"><tr>' + "".join(cols) + "</tr></table>")
        if fold := not_simulated_line(missing):
            parts.append(f'<div class="cc-fold"><i>{_e(fold)}</i></div>')
        return "\n".join(parts)

    def judge_free(self, target: Target) -> dict[str, Any]:
        """The judge-free statistics of one target (``convstats.conversation_stats``; None: undefined)."""
        inst = target.instance
        p = len({x.speaker for x in [*inst.history, *inst.reference]})
        return conversation_stats(
            target.turns, history=inst.history, goals=inst.metadata.goals, participants=p, scored=target.judged
        )

    def stats_html(self, target: Target) -> str:
        def fmt(k: str, v: Any) -> str:
            return "–" if v is None else str(v) if k in ("turns", "speakers") else f"{v:.2f}"

        rows = "".join(
            f'<tr><td>{_e(STATISTICS[k])}</td><td style="text-align:right">{fmt(k, v)}</td></tr>'
            for k, v in self.judge_free(target).items()
        )
        return (
            '<details class="cc-stats"><summary>judge-free statistics</summary>'
            f'<table style="font-size:85%">{rows}</table></details>'
        )

    def refresh(self) -> None:
        self.html.value = self.render()

    # ------------------------------------------------------------------ chart linking
    def bar(self, panel: str, series: str, behaviour: str, *, scope: str = "panel") -> Bar:
        """The turns behind one Figure-3 bar, counted as ``stats.figure3_means`` counts them: the
        simulated series of a panel is its setup's valid judgments; the human series is the
        reference on the same instances (``scope="all"``: on every instance, as for charts of
        plain ``mean_occurrences`` rows)."""
        judge = self.judge.value
        target = REFERENCE if series == HUMAN else panel

        def valid(tgt: str, iid: str) -> Verdict | None:
            j = self.judgments.get((judge, iid, tgt))
            return j if j is not None and j.valid else None

        ids = sorted(self.datasets)
        if scope == "panel" and panel in self.run.names("continuations"):
            ids = [i for i in ids if valid(panel, i)]
        out = Bar(panel, series, behaviour, target)
        for iid in ids:
            j = valid(target, iid)
            t = None if j is None else self.target(iid, target)
            if j is None or t is None:
                continue
            out.n += 1
            for turn, (behaviours, _) in j.labels.items():
                if behaviour in behaviours and 0 <= turn < len(t.turns):
                    out.rows.append((iid, turn, t.turns[turn].speaker, t.turns[turn].text))
        return out

    def turns_behind(self, target: str, behaviour: str, *, panel: str | None = None) -> list[tuple[str, int, str, str]]:
        """(instance, turn, speaker, text) of every turn of ``target`` the current judge labelled
        with ``behaviour`` (the reference within ``panel``'s instances when a panel is given)."""
        series = HUMAN if target == REFERENCE else "simulated"
        return self.bar(panel or target, series, behaviour, scope="panel" if panel else "all").rows

    def show_bar(self, panel: str, series: str, behaviour: str, *, scope: str = "panel") -> Bar:
        """List the turns behind a bar and show its behaviour, its setup and one instance that
        contributes to it."""
        self._showing = True
        try:
            return self._show_bar(panel, series, behaviour, scope)
        finally:
            self._showing = False

    def _show_bar(self, panel: str, series: str, behaviour: str, scope: str) -> Bar:
        b = self.bar(panel, series, behaviour, scope=scope)
        name = self.names[behaviour].name if behaviour in self.names else behaviour
        mean = "" if b.mean is None else f"; mean {b.mean:.2f} per conversation over n = {b.n}"
        self.behind.value = (
            f'<div class="cc-behind"><b>{len(b.rows)} turn(s) in {len(b.instances)} of {b.n} instance(s)</b>: '
            f"{_e(series)} in panel {_e(panel)}, labelled {_e(name)} by {_e(self.judge.value)}{mean}<ol>"
            + "".join(f"<li>{_e(i)} #{n + 1} <b>{_e(s)}</b>: {_e(x)}</li>" for i, n, s, x in b.rows)
            + "</ol></div>"
        )
        with self._batch():
            if behaviour in [v for _, v in self.behaviour.options]:
                self.behaviour.value = behaviour
            if panel in self.setups.options:
                self.setups.value = (panel,)
            pick = b.instances[0] if b.instances else None
            if pick is not None and self.dataset.value not in (ALL, self.datasets[pick]):
                self.dataset.value = ALL
        if pick is not None and pick in self.instance.options:
            self.instance.value = pick
        return b

    def on_selection(self, value: list[dict[str, Any]], *, scope: str = "panel") -> Bar | None:
        """Handle a Figure-3 bar selection ({panel, series, behaviour} fields)."""
        if not value:
            return None
        v = value[0]
        series = v.get("series", "simulated")
        panel = v.get("panel") or (HUMAN if series == HUMAN else REFERENCE)
        return self.show_bar(panel, series, v["behaviour"], scope=scope)

    def link(self, jchart: Any, param: str = "pick") -> None:
        """Clicking a bar of ``charts.behaviour_bars(..., selectable=True)`` shown as an
        ``alt.JupyterChart`` lists the turns behind it here."""
        scope = charts_scope(jchart.chart)
        jchart.selections.observe(lambda change: self.on_selection(change.new.value, scope=scope), [param])


def charts_scope(chart: Any) -> str:
    """How a Figure-3 chart counted its human series: 'panel' or 'all' (``charts.behaviour_bars``)."""
    meta = getattr(chart, "usermeta", None)
    meta = meta if isinstance(meta, dict) else {}
    return str(meta.get("cocoeval", {}).get("reference_scope", "panel"))
