"""The annotator widget: pick any target of a run, label its judged turns and the two Likert
scores, and Save rows in the annotation format (``cocoeval annotate-import`` reads them). Saving
is idempotent: a save replaces that annotator's earlier rows for that target in the file.

Nothing is assumed: the scores start *not rated* and every judged turn starts unmarked; a turn is
marked by choosing its behaviours or ticking its ``none`` box. Save stores nothing while a turn is
unmarked or a score not rated, and says which. Rows saved before load back into the widget when the
annotator's name and the target match."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as w

from cocoeval.annotate.rows import FIELDS, NONE
from cocoeval.core.errors import CocoevalError, InputError
from cocoeval.core.jsonio import read_text, write_atomic
from cocoeval.core.targets import REFERENCE, Target, TargetRef
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.judge.parse import map_behaviour
from cocoeval.run.humans import name_problem

WIDE = {"description_width": "initial"}
SCORES = [(str(k), k) for k in range(1, 11)]
"""The Likert choices; a score's dropdown starts at None (blank: not rated)."""


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _target_name(t: Target | TargetRef) -> str:
    return "human reference" if t.name == REFERENCE else t.name


def _instance_id(t: Target | TargetRef) -> str:
    return t.instance_id if isinstance(t, TargetRef) else t.instance.id


def _label(t: Target) -> str:
    return f"{t.instance.id} — {_target_name(t)}"


class Annotator:
    """Label the turns and the two Likert scores of a target chosen from ``targets`` (one
    ``Target`` or a list, e.g. ``judge.targets_for(...)``, or ``TargetRef``s, each read when it is
    chosen: ``RunContext.annotator``'s); Save writes the rows to ``out_csv``,
    replacing the same annotator's earlier rows for that target, and only once every judged turn
    is marked (behaviours chosen or ``none`` ticked) and both scores are rated (``missing`` says
    what is left). ``item_id`` (one target only) writes blind export ids instead of instance and
    target."""

    def __init__(
        self,
        targets: Target | Sequence[Target | TargetRef],
        out_csv: str | Path,
        *,
        taxonomy: Taxonomy | None = None,
        item_id: str | None = None,
    ) -> None:
        self.targets = [targets] if isinstance(targets, Target) else list(targets)
        if not self.targets:
            raise InputError(
                "nothing to annotate: no targets given", hint="pass judge.targets_for(instances, continuations)"
            )
        if item_id and len(self.targets) != 1:
            raise InputError("item_id names one target; got several", hint="pass the one target of that item")
        self.out, self.item_id = Path(out_csv), item_id
        self.tax = taxonomy or load_taxonomy()
        self.annotator = w.Text(description="annotator", placeholder="your name or id", style=WIDE)
        self._of: dict[str, list[int]] = {}  # instance id -> its targets' positions in ``targets``
        for k, t in enumerate(self.targets):
            self._of.setdefault(_instance_id(t), []).append(k)
        # two menus, the instance then its target (a run's every instance x target in one menu was
        # thousands of entries, and carried whole in a saved notebook's widget state)
        self.instance = w.Dropdown(
            options=list(self._of),
            value=_instance_id(self.targets[0]),
            description="instance",
            style=WIDE,
            layout=w.Layout(width="auto", min_width="320px"),
        )
        self.choose = w.Dropdown(
            options=self._choices(),
            value=0,
            description="target",
            style=WIDE,
            layout=w.Layout(width="auto", min_width="260px"),
        )
        self.body = w.VBox()
        self.turns: dict[int, w.SelectMultiple] = {}
        self.none: dict[int, w.Checkbox] = {}
        """Per judged turn, the box that says it shows no behaviour."""
        self.consistency = w.Dropdown(options=SCORES, value=None, description="consistency (1-10)", style=WIDE)
        self.collaborativeness = w.Dropdown(
            options=SCORES, value=None, description="collaborativeness (1-10)", style=WIDE
        )
        self.save = w.Button(description="Save", button_style="primary")
        self.status = w.HTML()
        self._loaded_for: str | None = None
        self.save.on_click(lambda _: self.write())
        self.choose.observe(lambda _: self._build(), "value")
        self.instance.observe(lambda _: self._on_instance(), "value")
        self.annotator.observe(lambda _: self._on_name(), "value")
        self._build()
        self.widget = w.VBox(
            [
                w.HBox([self.annotator, self.instance, self.choose]),
                self.body,
                self.consistency,
                self.collaborativeness,
                self.save,
                self.status,
            ]
        )

    @property
    def target(self) -> Target:
        t = self.targets[self.choose.value]
        return t.target() if isinstance(t, TargetRef) else t

    def _choices(self) -> list[tuple[str, int]]:
        """The ``target`` menu: the chosen instance's targets, valued by their position in ``targets``."""
        return [(_target_name(self.targets[k]), k) for k in self._of[self.instance.value]]

    def _on_instance(self) -> None:
        """Another instance: its targets in the menu, its first one chosen (and built)."""
        self.choose.options = self._choices()  # sets the value to the first option: built by its observer

    def pick(self, k: int) -> None:
        """Choose ``targets[k]`` (its instance, then it), as picking them in the two menus does."""
        self.instance.value = _instance_id(self.targets[k])
        self.choose.value = k

    def _build(self) -> None:
        """One row per turn of the chosen target; judged turns get every behaviour to pick from."""
        options = [(b.name, b.id) for b in self.tax.behaviours]
        self.turns, self.none, rows = {}, {}, []
        for i, t in enumerate(self.target.turns):
            label = w.HTML(f"<b>{i + 1}. {_e(t.speaker)}</b>: {_e(t.text)}")
            if i in self.target.judged:
                sel = w.SelectMultiple(
                    options=options,
                    rows=len(options),
                    description=f"turn {i + 1}",
                    style=WIDE,
                    layout=w.Layout(width="auto", min_width="300px"),
                )
                box = w.Checkbox(value=False, description=f"turn {i + 1}: {NONE} (no behaviour)", indent=False)
                box.observe(lambda ch, sel=sel: self._ticked(sel, ch["new"]), "value")
                self.turns[i], self.none[i] = sel, box
                rows.append(w.VBox([label, sel, box]))
            else:
                rows.append(label)
        self.body.children = rows
        self.consistency.value = self.collaborativeness.value = None
        self.status.value = ""
        self._loaded_for = None
        self._load()

    @staticmethod
    def _ticked(sel: w.SelectMultiple, none: bool) -> None:
        """Ticking none clears the turn's behaviours and locks them; unticking unlocks them."""
        if none:
            sel.value = ()
        sel.disabled = none

    def _clear(self) -> None:
        for i, sel in self.turns.items():
            self.none[i].value = False
            sel.value = ()
        self.consistency.value = self.collaborativeness.value = None

    def _on_name(self) -> None:
        """A new name loads that annotator's saved rows; labels loaded for another name are cleared."""
        if not self._load() and self._loaded_for not in (None, self.annotator.value.strip()):
            self._clear()
            self._loaded_for = None
            self.status.value = ""

    def _saved_rows(self, who: str) -> list[dict[str, Any]]:
        """The rows of ``who`` for this target in the output file ([] when there are none or the
        file cannot be read: Save says why)."""
        if not who or name_problem(who) or not self.out.exists():
            return []
        try:
            reader = csv.DictReader(io.StringIO(read_text(self.out)))
            if reader.fieldnames != FIELDS:
                return []
            return [r for r in reader if self._mine(r, who)]
        except (CocoevalError, csv.Error):
            return []

    def _load(self) -> bool:
        """Fill the widget from the rows saved for this annotator and target; True if any."""
        who = self.annotator.value.strip()
        rows = self._saved_rows(who)
        if not rows:
            return False
        self._clear()
        unread = []
        for r in rows:
            turn = (r.get("turn") or "").strip()
            if not turn:
                for d, f in ((self.consistency, "consistency"), (self.collaborativeness, "collaborativeness")):
                    v = (r.get(f) or "").strip()
                    d.value = int(v) if v.isdigit() and 1 <= int(v) <= 10 else None
                    if v and d.value is None:
                        unread.append(f"{f} {v!r}")
                continue
            i = int(turn) - 1 if turn.isdigit() else -1
            raw = (r.get("behaviours") or "").strip()
            if i not in self.turns or not raw:
                continue
            if raw.lower() == NONE:
                self.none[i].value = True
                continue
            names = [x.strip() for x in raw.split(";") if x.strip()]
            ids = {map_behaviour(x, self.tax)[0] for x in names}
            unread += [f"turn {i + 1} {x!r}" for x in names if map_behaviour(x, self.tax)[0] is None]
            self.turns[i].value = tuple(b for _, b in self.turns[i].options if b in ids)
        self._loaded_for = who
        self.status.value = f"Loaded the labels {_e(who)} saved for this target in {_e(self.out)}." + (
            f" <span style='color:#c0392b'>Not understood, left out: {_e(', '.join(unread))}.</span>" if unread else ""
        )
        return True

    def missing(self) -> list[str]:
        """What must still be set before Save stores anything ([] when nothing)."""
        out = []
        unmarked = [i + 1 for i in sorted(self.turns) if not self.turns[i].value and not self.none[i].value]
        both = [i + 1 for i in sorted(self.turns) if self.turns[i].value and self.none[i].value]
        if unmarked:
            out.append(f"turn {', '.join(map(str, unmarked))} not marked (choose its behaviours or tick {NONE})")
        if both:
            out.append(f"turn {', '.join(map(str, both))} has behaviours and {NONE} ticked (keep one)")
        out += [
            f"{f} not rated"
            for f, d in (("consistency", self.consistency), ("collaborativeness", self.collaborativeness))
            if d.value is None
        ]
        return out

    def _ident(self) -> dict[str, str]:
        if self.item_id:
            return {"item_id": self.item_id}
        return {"instance_id": self.target.instance.id, "target": self.target.name}

    def rows(self) -> list[dict[str, Any]]:
        """The rows Save writes; InputError while something is missing (see ``missing``)."""
        if gaps := self.missing():
            raise InputError(
                f"not everything is rated: {'; '.join(gaps)}",
                record=_label(self.target),
                hint=f"mark every turn (its behaviours, or {NONE}) and rate both scores",
            )
        who = self.annotator.value.strip()
        ident = self._ident()
        out = [
            {"annotator": who, **ident, "turn": i + 1, "behaviours": ";".join(sel.value) or NONE}
            for i, sel in self.turns.items()
        ]
        out.append(
            {
                "annotator": who,
                **ident,
                "consistency": self.consistency.value,
                "collaborativeness": self.collaborativeness.value,
            }
        )
        return out

    def _mine(self, r: dict[str, Any], who: str) -> bool:
        if (r.get("annotator") or "").strip() != who:
            return False
        return all((r.get(k) or "").strip() == v for k, v in self._ident().items())

    def write(self) -> bool:
        """Save; True when written. Problems are shown in ``status`` (nothing is written then):
        a missing name, a turn not marked, a score not rated, a foreign file."""
        who = self.annotator.value.strip()
        problem = "Fill in the annotator name first." if not who else name_problem(who)
        if problem is None and (gaps := self.missing()):
            problem = f"Nothing saved: {'; '.join(gaps)}."
        kept: list[dict[str, Any]] = []
        replaced = 0
        if problem is None and self.out.exists():
            try:
                reader = csv.DictReader(io.StringIO(read_text(self.out)))
                if reader.fieldnames != FIELDS:
                    problem = (
                        f"{self.out} has the columns {reader.fieldnames}, not the annotator's "
                        f"{FIELDS}; choose another file"
                    )
                else:
                    for r in reader:
                        if self._mine(r, who):
                            replaced += 1
                        else:
                            kept.append(r)
            except CocoevalError as e:
                problem = str(e)
        if problem is not None:
            self.status.value = f"<span style='color:#c0392b'>{_e(problem)}</span>"
            return False
        buf = io.StringIO()
        wr = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
        wr.writeheader()
        wr.writerows(kept + self.rows())
        try:
            write_atomic(self.out, buf.getvalue())
        except CocoevalError as e:
            self.status.value = f"<span style='color:#c0392b'>{_e(e)}</span>"
            return False
        again = f", replacing the {replaced} saved before" if replaced else ""
        self.status.value = (
            f'<span class="cc-saved">Saved {len(self.turns) + 1} rows for {_e(who)} on '
            f"{_e(_label(self.target))} to {_e(self.out)}{again}.</span>"
        )
        return True
