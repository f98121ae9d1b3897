"""What an annotation export contains (used by ``cocoeval.annotate.exchange``): the draw of the
conversations as in the paper's Appendix B.1, and the annotators' instructions.

The draw, per task (overall scores, fine-grained labels): ``conversations`` conversations =
instances x targets (the human reference and each named setup), so ``conversations //
len(targets)`` instances, drawn at random and evenly over the source datasets present
(the paper: six datasets; 54 overall conversations = 18 instances x 3 targets, 36 fine-grained
conversations = 18 instances x 2 targets). Only instances where every target is available (an ok
continuation of each setup) can be drawn. Whatever keeps the draw from being exactly even (a
remainder, a dataset with too few instances, a count that is not a multiple of the targets) is
said in the notes, never silently changed.

The instructions are the judge's own: the system text of the judge prompt files
(``prompts/judge_overall.yaml``, ``prompts/judge_fine_grained.yaml``, loaded by name), rendered
with the run's taxonomy, followed by how to record the answers in the template.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from cocoeval.core.errors import ConfigError
from cocoeval.core.targets import REFERENCE, Target
from cocoeval.core.taxonomy import Taxonomy
from cocoeval.judge.config import PROMPTS
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import behaviours_block

TASKS = ("overall", "fine_grained")
PAPER_DATASETS = 6
PAPER_CONVERSATIONS = {"overall": 54, "fine_grained": 36}


@dataclass(frozen=True)
class Draw:
    """The instances ``draw`` chose for one task of Appendix B.1's export."""

    instances: list[str]
    """The instance ids drawn, each annotated with every target."""
    per_dataset: dict[str, int]
    """{dataset: instances drawn from it} (datasets with none left out): how even the draw is."""
    notes: list[str]
    """Where the draw departs from the paper's (a count that does not divide, a short dataset)."""

    def to_json(self) -> dict[str, Any]:
        """The form ``export.json`` keeps in its ``sample``: ``{instances, per_dataset, notes}``."""
        return {"instances": self.instances, "per_dataset": self.per_dataset, "notes": self.notes}


@dataclass(frozen=True)
class RandomDraw:
    """The conversations ``draw_random`` chose (beyond the paper), stratified by dataset."""

    targets: list[list[str]]
    """The conversations drawn, as [instance id, target] pairs."""
    per_stratum: dict[str, list[int]]
    """{"target|dataset": [drawn, of]}: each conversation's probability of being drawn, which the
    corrected rates weight by."""
    left_out: dict[str, int]
    """{target: conversations left out of its pool} (``exclude``: already annotated)."""
    notes: list[str]
    """What the export should say about the draw."""

    def to_json(self) -> dict[str, Any]:
        """The form ``export.json`` and the run's draw record keep: ``{targets, per_stratum, left_out, notes}``."""
        return {
            "targets": self.targets,
            "per_stratum": self.per_stratum,
            "left_out": self.left_out,
            "notes": self.notes,
        }


def draw(
    targets: Sequence[Target], names: list[str], conversations: int, rng: random.Random, *, even: bool = True
) -> Draw:
    """Instances for one task, ``conversations // len(names)`` of them, each with every target;
    ``even=False`` draws at random over every instance with every target, datasets ignored."""
    by_inst: dict[str, dict[str, Target]] = {}
    dataset: dict[str, str] = {}
    for t in targets:
        by_inst.setdefault(t.instance.id, {})[t.name] = t
        dataset[t.instance.id] = t.instance.dataset
    eligible: dict[str, list[str]] = {}
    for iid, ts in sorted(by_inst.items()):
        if all(n in ts for n in names):
            eligible.setdefault(dataset[iid], []).append(iid)
    notes = []
    k = conversations // len(names)
    if conversations % len(names):
        notes.append(
            f"{conversations} conversations is not a multiple of the {len(names)} targets: "
            f"{k} instances x {len(names)} targets = {k * len(names)} conversations"
        )
    datasets = sorted(eligible)
    if not datasets or k == 0:
        if k and not datasets:
            notes.append("no instance has every target (" + ", ".join(names) + "): nothing to draw")
        return Draw(instances=[], per_dataset={}, notes=notes)
    if not even:
        pool = [i for d in datasets for i in eligible[d]]
        if len(pool) < k:
            notes.append(f"the run has {len(pool)} instances with every target, not {k}: all of them are used")
        chosen = sorted(rng.sample(pool, min(k, len(pool))))
        per = {d: sum(dataset[i] == d for i in chosen) for d in datasets}
        notes.append("drawn at random over every dataset, not evenly (even_over_datasets: false)")
        return Draw(instances=chosen, per_dataset={d: n for d, n in per.items() if n}, notes=notes)
    if len(datasets) != PAPER_DATASETS:
        notes.append(
            f"the paper drew evenly over {PAPER_DATASETS} datasets; this run has {len(datasets)} with "
            "every target: " + ", ".join(datasets)
        )
    quota = dict.fromkeys(datasets, k // len(datasets))
    if k % len(datasets):
        extra = sorted(rng.sample(datasets, k % len(datasets)))
        for d in extra:
            quota[d] += 1
        notes.append(
            f"{k} instances do not divide evenly over {len(datasets)} datasets: one more from "
            + ", ".join(extra)
            + " (drawn at random)"
        )
    short = {d: quota[d] - len(eligible[d]) for d in datasets if quota[d] > len(eligible[d])}
    for d, s in short.items():
        quota[d] = len(eligible[d])
        notes.append(f"{d} has only {len(eligible[d])} instance(s) with every target ({s} fewer than its share)")
    missing = sum(short.values())
    spare = [d for d in datasets if quota[d] < len(eligible[d])]
    rng.shuffle(spare)
    moved: dict[str, int] = {}
    while missing and spare:
        for d in list(spare):
            if not missing:
                break
            quota[d] += 1
            moved[d] = moved.get(d, 0) + 1
            missing -= 1
            if quota[d] == len(eligible[d]):
                spare.remove(d)
    if moved:
        notes.append("taken instead from " + ", ".join(f"{d} (+{m})" for d, m in sorted(moved.items())))
    if missing:
        notes.append(f"the run has {k - missing} instances with every target, not {k}: all of them are used")
    chosen = [i for d in datasets for i in sorted(rng.sample(eligible[d], quota[d]))]
    return Draw(instances=chosen, per_dataset={d: quota[d] for d in datasets if quota[d]}, notes=notes)


def draw_random(
    targets: Sequence[Target],
    names: list[str],
    per_target: int,
    rng: random.Random,
    *,
    exclude: Collection[tuple[str, str]] = (),
) -> RandomDraw:
    """Conversations for corrected rates (beyond the paper; ``analysis.judge_check``): for each
    target name (the reference and each setup), ``per_target`` of its conversations drawn at random,
    allocated over the datasets in proportion to how many it has there (largest remainder), so the
    draw is a random sample of that target's conversations stratified by dataset (``RandomDraw``).
    ``exclude`` ((instance id, target) pairs, e.g. the
    conversations already annotated) are left out of the pools (``left_out`` counts them).

    A target with fewer than ``per_target`` conversations to draw from is a ConfigError naming
    each such target and the most that can be asked for; nothing is drawn."""
    pools: dict[str, dict[str, list[str]]] = {}
    left_out: dict[str, int] = {}
    skip = set(map(tuple, exclude))
    for name in names:
        pool = pools.setdefault(name, {})
        left_out[name] = 0
        for t in targets:
            if t.name != name:
                continue
            if (t.instance.id, name) in skip:
                left_out[name] += 1
            else:
                pool.setdefault(t.instance.dataset, []).append(t.instance.id)
    totals = {name: sum(len(v) for v in pools[name].values()) for name in names}
    if short := {name: n for name, n in totals.items() if n < per_target}:
        most = min(totals.values())
        raise ConfigError(
            f"{per_target} conversations of each target asked for, but fewer to draw from"
            + (" (not yet annotated)" if skip else "")
            + ": "
            + ", ".join(
                f"{name} {n}" + (f" ({left_out[name]} more already annotated)" if left_out[name] else "")
                for name, n in short.items()
            ),
            hint=(
                f"ask for at most {most} (--random {most})"
                if most
                else "nothing is left to draw for " + ", ".join(n for n, v in short.items() if not v)
            )
            + ("; or leave those setups out (--setup NAME, repeatable)" if REFERENCE not in short else ""),
        )
    notes: list[str] = []
    out: list[list[str]] = []
    per_stratum: dict[str, list[int]] = {}
    for name in names:
        pool, total = pools[name], totals[name]
        exact = {d: per_target * len(v) / total for d, v in sorted(pool.items())}
        quota = {d: int(x) for d, x in exact.items()}
        for d in sorted(exact, key=lambda d: (-(exact[d] - quota[d]), d))[: per_target - sum(quota.values())]:
            quota[d] += 1
        for d, ids in sorted(pool.items()):
            chosen = sorted(rng.sample(sorted(ids), quota[d]))
            out += [[i, name] for i in chosen]
            per_stratum[f"{name}|{d}"] = [quota[d], len(ids)]
    if any(left_out.values()):
        notes.append(
            "left out as already annotated by a human: " + ", ".join(f"{name} {n}" for name, n in left_out.items())
        )
    return RandomDraw(targets=out, per_stratum=per_stratum, left_out=left_out, notes=notes)


def check_setups(requested: list[str] | None, available: list[str], what: str) -> list[str]:
    """The setups of a task (default: every setup of the run); an unknown name is an error."""
    if requested is None:
        return available
    unknown = [s for s in requested if s not in available]
    if unknown:
        raise ConfigError(
            f"{what}: unknown setup {', '.join(map(repr, unknown))}",
            hint="use the setup names of the run: " + (", ".join(available) or "(none)"),
        )
    return list(dict.fromkeys(requested))


HOW_TO = {
    "overall": (
        "Each item marked `overall` has one row in `template.csv` with the turn column empty: give "
        "`consistency` and `collaborativeness` as whole numbers from 1 to 10, following the rubric above "
        "(ignore its last paragraph about JSON). A row with both scores empty counts as not annotated "
        "(it is skipped). N is the number of turns of the continuation."
    ),
    "fine_grained": (
        "Each item marked `fine_grained` has one row per numbered turn in `template.csv`: list in "
        "`behaviours` every behaviour above that the turn shows, by name, separated by `;`, or `none` "
        "when it shows none of them. An empty cell means *not annotated* (the row is skipped, never "
        "counted as no behaviour), so write `none` explicitly. If a turn shows an inconsistent or "
        "uncollaborative behaviour that none of these names covers, describe it in `not_in_taxonomy` (otherwise leave it empty). N is the "
        "number of numbered turns of the item; turns without a number are context only. Ignore the "
        "paragraph about JSON."
    ),
}


def instructions(tax: Taxonomy, tasks: list[str]) -> tuple[str, dict[str, str]]:
    """The annotators' instructions as Markdown, and the prompt refs they come from."""
    parts = [
        "# Instructions for annotators\n",
        "You see conversations: metadata, a summary, the recent history and a continuation. You are not told "
        "who wrote a continuation; please do not guess. Put your name or id in the `annotator` column of "
        "every row you fill.\n",
    ]
    refs = {}
    for task in tasks:
        p = load_prompt(PROMPTS[task])
        refs[task] = p.ref
        system, _ = p.render(
            n_turns="N", behaviours=behaviours_block(tax), only_some="", metadata="", summary="", history="", target=""
        )
        title = "Overall evaluation" if task == "overall" else "Fine-grained evaluation"
        parts += [
            f"## {title} (items marked `{task}`)\n",
            f"The instructions the LLM judge receives (prompt {p.ref}):\n",
            "\n".join("> " + line if line else ">" for line in system.splitlines()),
            "",
            f"**How to record your answers.** {HOW_TO[task]}\n",
        ]
    return "\n".join(parts), refs
