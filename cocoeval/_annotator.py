"""The annotator widget: pick any target of a run, label its judged turns and the two Likert
scores, and Save rows in the annotation format (``cocoeval annotate-import`` reads them). Saving
is idempotent: a save replaces that annotator's earlier rows for that target in the file."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as w

from ._annotate_rows import FIELDS
from ._annotate_store import name_problem
from .errors import CocoevalError, InputError
from .frames import REFERENCE
from .jsonio import read_text, write_atomic
from .judge import Target
from .taxonomy import Taxonomy, load_taxonomy

WIDE = {"description_width": "initial"}


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _label(t: Target) -> str:
    return f"{t.instance.id} — {'human reference' if t.name == REFERENCE else t.name}"


class Annotator:
    """Label the turns and the two Likert scores of a target chosen from ``targets`` (one
    ``Target`` or a list, e.g. ``judge.targets_for(...)``); Save writes the rows to ``out_csv``,
    replacing the same annotator's earlier rows for that target. ``item_id`` (one target only)
    writes blind export ids instead of instance and target."""

    def __init__(self, targets: Target | Sequence[Target], out_csv: str | Path, *,
                 taxonomy: Taxonomy | None = None, item_id: str | None = None) -> None:
        self.targets = [targets] if isinstance(targets, Target) else list(targets)
        if not self.targets:
            raise InputError("nothing to annotate: no targets given", hint="pass judge.targets_for(instances, continuations)")
        if item_id and len(self.targets) != 1:
            raise InputError("item_id names one target; got several", hint="pass the one target of that item")
        self.out, self.item_id = Path(out_csv), item_id
        self.tax = taxonomy or load_taxonomy()
        self.annotator = w.Text(description="annotator", placeholder="your name or id", style=WIDE)
        self.choose = w.Dropdown(options=[(_label(t), k) for k, t in enumerate(self.targets)], value=0,
                                 description="target", style=WIDE, layout=w.Layout(width="auto", min_width="420px"))
        self.body = w.VBox()
        self.turns: dict[int, w.SelectMultiple] = {}
        self.consistency = w.IntSlider(value=5, min=1, max=10, description="consistency", style=WIDE)
        self.collaborativeness = w.IntSlider(value=5, min=1, max=10, description="collaborativeness", style=WIDE)
        self.save = w.Button(description="Save", button_style="primary")
        self.status = w.HTML()
        self.save.on_click(lambda _: self.write())
        self.choose.observe(lambda _: self._build(), "value")
        self._build()
        self.widget = w.VBox([w.HBox([self.annotator, self.choose]), self.body, self.consistency,
                              self.collaborativeness, self.save, self.status])

    @property
    def target(self) -> Target:
        return self.targets[self.choose.value]

    def _build(self) -> None:
        """One row per turn of the chosen target; judged turns get every behaviour to pick from."""
        options = [(b.name, b.id) for b in self.tax.behaviours]
        self.turns, rows = {}, []
        for i, t in enumerate(self.target.turns):
            label = w.HTML(f"<b>{i + 1}. {_e(t.speaker)}</b>: {_e(t.text)}")
            if i in self.target.judged:
                sel = w.SelectMultiple(options=options, rows=len(options), description=f"turn {i + 1}",
                                       style=WIDE, layout=w.Layout(width="auto", min_width="300px"))
                self.turns[i] = sel
                rows.append(w.VBox([label, sel]))
            else:
                rows.append(label)
        self.body.children = rows
        self.consistency.value = self.collaborativeness.value = 5
        self.status.value = ""

    def _ident(self) -> dict[str, str]:
        if self.item_id:
            return {"item_id": self.item_id}
        return {"instance_id": self.target.instance.id, "target": self.target.name}

    def rows(self) -> list[dict[str, Any]]:
        who = self.annotator.value.strip()
        ident = self._ident()
        out = [{"annotator": who, **ident, "turn": i + 1, "behaviours": ";".join(sel.value)}
               for i, sel in self.turns.items()]
        out.append({"annotator": who, **ident, "consistency": self.consistency.value,
                    "collaborativeness": self.collaborativeness.value})
        return out

    def _mine(self, r: dict[str, Any], who: str) -> bool:
        if (r.get("annotator") or "").strip() != who:
            return False
        return all((r.get(k) or "").strip() == v for k, v in self._ident().items())

    def write(self) -> bool:
        """Save; True when written. Problems are shown in ``status`` (nothing is written then)."""
        who = self.annotator.value.strip()
        problem = "Fill in the annotator name first." if not who else name_problem(who)
        kept: list[dict[str, Any]] = []
        replaced = 0
        if problem is None and self.out.exists():
            try:
                reader = csv.DictReader(io.StringIO(read_text(self.out)))
                if reader.fieldnames != FIELDS:
                    problem = (f"{self.out} has the columns {reader.fieldnames}, not the annotator's "
                               f"{FIELDS}; choose another file")
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
        self.status.value = (f'<span class="cc-saved">Saved {len(self.turns) + 1} rows for {_e(who)} on '
                             f"{_e(_label(self.target))} to {_e(self.out)}{again}.</span>")
        return True
