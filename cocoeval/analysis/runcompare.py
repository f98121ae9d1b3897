"""Setups of several runs compared with each other (``cocoeval compare RUN_A RUN_B ...``; beyond the
paper): a simulator last month and today, or two labs' runs of the same benchmark.

Each setup is labelled ``RUNLABEL/setup`` (``run_labels``: the run folder's name, made unique) and
every pair is compared with the paired tests of ``paired.compare_setups`` (per behaviour and for the
profile distance to the humans, clustered by source conversation) on the instances the runs SHARE:

- an instance is shared when every run has its id with the same content (``Instance.content_hash``:
  M, S, x and the human reference r), so a rebuilt benchmark that reuses an id for other text is
  never compared as the same instance; what each run leaves out, and why, is named
  (``Intersection.left_out``); no shared instance is an error;
- a judge is compared across runs only under the same judge id (the manifest's fine-grained id:
  model, prompt and taxonomy), never by its name alone: a name whose id differs between runs is
  refused with the ids named (``choose_judge``);
- the human reference of a shared instance is the same text in every run, so it is one baseline
  for the distances: its judgment is taken from the first run (in the order given) with a valid one
  (``RunComparisonAnswer.reference_from``); how many shared instances were judged differently in
  another run (the same judge id, so only the sampling of the judge can differ) is said.

``compare_runs`` returns a typed ``RunComparisonAnswer``; ``runcompare_report`` writes it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from cocoeval.core.errors import ConfigError
from cocoeval.core.files import portable_path, portable_text
from cocoeval.core.targets import REFERENCE

from . import inference
from .frames import Frames, judges_of, run_frames

if TYPE_CHECKING:
    from .paired import PairedComparison, PairRow
    from .store import RunLike

__all__ = [
    "ComparedRun",
    "Intersection",
    "JudgeDecision",
    "LeftOut",
    "RunComparisonAnswer",
    "choose_judge",
    "compare_runs",
    "compared_counts",
    "intersection",
    "run_labels",
]

CORRECTIONS = ("holm", "bh")
"""The corrections over the behaviours of a pair that ``compare_runs`` offers (Holm by default)."""
KIND = "fine_grained"
"""The judgments compared: the per-turn behaviour labels (their judge id is the one checked)."""


@dataclass(frozen=True)
class ComparedRun:
    """One run of the comparison."""

    label: str
    """Its name in the outputs (``run_labels``): setups are labelled ``label/setup``."""
    path: str
    """Its folder, relative to the working folder, else its name (``core.files.portable_path``)."""
    bench: str | None
    """The benchmark its params name (``bench:``, as the manifest records it: never an absolute
    path), or "built by its params"; None: not recorded."""
    instances: int
    """Instances the run holds (instances.jsonl)."""
    setups: tuple[str, ...]
    """Its setups compared (their names in the run)."""
    judge_id: str
    """The fine-grained judge id of the compared judge in this run's manifest."""
    pipeline_check: bool
    """The run is labelled ``label: pipeline-check`` (a tiny model: not results)."""


@dataclass(frozen=True)
class LeftOut:
    """An instance of a run that is not compared, and why."""

    run: str
    instance_id: str
    dataset: str
    why: str


@dataclass(frozen=True)
class Intersection:
    """The instances every run has with the same content: the only ones compared."""

    instance_ids: tuple[str, ...]
    conversations: int
    """Source conversations they were cut from (the unit the paired tests resample)."""
    datasets: tuple[tuple[str, int], ...]
    """(dataset, shared instances of it), by dataset."""
    left_out: tuple[LeftOut, ...]
    """Each run's instances that are not shared, with why: another run lacks the id, or has it
    with other content (a rebuilt benchmark reusing the id)."""

    def left_out_counts(self) -> dict[str, Counter[str]]:
        """{run label: {kind of reason: instances}} (``not in`` another run, ``other content``)."""
        out: dict[str, Counter[str]] = {}
        for x in self.left_out:
            out.setdefault(x.run, Counter())["other content" if "other content" in x.why else "not in"] += 1
        return out


@dataclass(frozen=True)
class JudgeDecision:
    """Which judge's labels are compared, under which id, and why."""

    judge: str
    judge_id: str
    why: str
    """"the judge asked for", or why it was chosen by default."""
    not_compared: tuple[str, ...]
    """The other judges the runs name, each with why it is not compared (a different id, or
    absent from a run)."""


@dataclass(frozen=True)
class RunComparisonAnswer:
    """What ``cocoeval compare`` answers: the runs, the shared instances, the judge and the paired
    comparison (``paired.PairedComparison``) of every pair of ``setups``."""

    runs: tuple[ComparedRun, ...]
    intersection: Intersection
    judge: JudgeDecision
    setups: tuple[str, ...]
    """The setups compared, as ``RUNLABEL/setup``."""
    not_compared: tuple[str, ...]
    """Setups of the runs left out, each with why (no valid judgment on the shared instances)."""
    reference_from: tuple[tuple[str, int], ...]
    """(run label, shared instances whose human-reference judgment comes from that run)."""
    reference_differs: int
    """Shared instances whose valid reference judgments differ between runs (the first one is used)."""
    comparison: PairedComparison
    counts: pl.DataFrame
    """The frame the comparison was computed from (target ``RUNLABEL/setup`` or ``REFERENCE``,
    instance_id, conversation, behaviour, count)."""
    behaviour_names: tuple[tuple[str, str], ...]
    """(behaviour id, its name in the taxonomy), in the taxonomy's order."""
    resamples: int
    seed: int
    min_n: int

    @property
    def pipeline_check(self) -> bool:
        return any(r.pipeline_check for r in self.runs)

    def held(self) -> list[PairRow]:
        """The differences that hold: rows with a significant verdict after the correction, the
        distance first."""
        from .paired import NO_DIFF

        rows = [r for r in self.comparison.rows if r.verdict not in (None, NO_DIFF)]
        return sorted(rows, key=lambda r: (r.behaviour != "distance", r.a, r.b, r.behaviour))

    def cross_run(self, row: PairRow) -> bool:
        """Whether a row compares setups of two different runs."""
        return row.a.split("/", 1)[0] != row.b.split("/", 1)[0]


def run_labels(paths: Sequence[str | Path | None]) -> list[str]:
    """Each run's label: its folder's name (``run`` for a run without one), a second use of a name
    numbered ``NAME-2``, ``NAME-3``... so that every label is unique."""
    out: list[str] = []
    for p in paths:
        base = (Path(p).resolve().name if p is not None else "") or "run"
        label, n = base, 1
        while label in out:
            n += 1
            label = f"{base}-{n}"
        out.append(label)
    return out


def fine_judge_id(run: RunLike, judge: str) -> str | None:
    """The fine-grained judge id the run's manifest records for ``judge`` (None: not recorded)."""
    return (run.manifest.judges.get(judge) or {}).get(KIND)


def choose_judge(
    runs: Sequence[RunLike], labels: Sequence[str], frames: Sequence[Frames], judge: str | None
) -> JudgeDecision:
    """The judge compared across ``runs``: ``judge`` when given, else the first LLM judge of the first
    run that every run has under the same fine-grained judge id. A judge name with another id in
    some run (another model, prompt or taxonomy), or with no id recorded, is refused: its labels are
    not the same measurement."""
    have = [judges_of(f) for f in frames]
    ids = [{j: fine_judge_id(r, j) for j in js} for r, js in zip(runs, have, strict=True)]

    def problem(name: str) -> str | None:
        missing = [lab for lab, js in zip(labels, have, strict=True) if name not in js]
        if missing:
            return f"{name}: no fine-grained judgment in {', '.join(missing)}"
        seen = [(lab, i[name]) for lab, i in zip(labels, ids, strict=True)]
        if any(v is None for _, v in seen):
            return f"{name}: no judge id recorded in {', '.join(lab for lab, v in seen if v is None)}'s manifest"
        if len({v for _, v in seen}) > 1:
            return f"{name}: judge ids differ ({'; '.join(f'{lab}: {v}' for lab, v in seen)})"
        return None

    names = list(dict.fromkeys(j for js in have for j in js))
    if judge is not None:
        why = problem(judge)
        if why is not None:
            raise ConfigError(
                f"judge {why}: a judge is compared across runs only under the same judge id (its model, "
                "prompt and taxonomy), never by its name alone",
                hint="judge the runs with the same judge settings (the same judges: entry, then cocoeval run), "
                "or compare the setups within each run with cocoeval report; judges every run has under one id: "
                + (", ".join(n for n in names if problem(n) is None) or "(none)"),
            )
        chosen, reason = judge, "the judge asked for"
    else:
        ok = [n for n in names if problem(n) is None]
        if not ok:
            raise ConfigError(
                "no LLM judge has fine-grained judgments in every run under the same judge id: "
                + ("; ".join(str(problem(n)) for n in names) or "the runs have no fine-grained judgment"),
                hint="judge the runs with the same judge settings (the same judges: entry, then cocoeval run); "
                "a judge is never compared across runs by its name alone",
            )
        chosen, reason = ok[0], "the first LLM judge every run has under the same judge id"
    other = tuple(
        f"{n}: {problem(n) or 'the same id in every run; give --judge ' + n + ' to compare it'}"
        for n in names
        if n != chosen
    )
    return JudgeDecision(chosen, str(ids[0][chosen]), reason, other)


def intersection(runs: Sequence[RunLike], labels: Sequence[str]) -> Intersection:
    """The instances every run has with the same content (``Instance.content_hash``), and what
    each run leaves out and why."""
    hashes = [{i.id: i.content_hash() for i in r.instances} for r in runs]
    datasets = {i.id: i.dataset for r in runs for i in r.instances}
    conversation = {i.id: f"{i.dataset}/{i.provenance.conversation_id}" for i in runs[0].instances}
    shared = sorted(i for i, h in hashes[0].items() if all(hs.get(i) == h for hs in hashes[1:]))
    left: list[LeftOut] = []
    for lab, hs in zip(labels, hashes, strict=True):
        for iid in sorted(set(hs) - set(shared)):
            absent = [o for o, ohs in zip(labels, hashes, strict=True) if iid not in ohs]
            other = [o for o, ohs in zip(labels, hashes, strict=True) if iid in ohs and ohs[iid] != hs[iid]]
            why = []
            if absent:
                why.append(f"not in {', '.join(absent)}")
            if other:
                why.append(f"other content in {', '.join(other)} (the same id, another instance hash)")
            left.append(LeftOut(lab, iid, datasets[iid], "; ".join(why)))
    by_ds = Counter(datasets[i] for i in shared)
    return Intersection(
        instance_ids=tuple(shared),
        conversations=len({conversation[i] for i in shared}),
        datasets=tuple(sorted(by_ds.items())),
        left_out=tuple(left),
    )


def _pick_setups(
    runs: Sequence[RunLike],
    labels: Sequence[str],
    frames: Sequence[Frames],
    judge: str,
    shared: set[str],
    wanted: Sequence[str] | None,
) -> tuple[list[tuple[int, str]], list[str]]:
    """(run index, setup name) of the setups compared (each run's in its manifest's order, then any
    other it has judgments of), and the ones left out with why. ``wanted``: ``setup`` (that setup
    of every run that has it) or ``RUNLABEL/setup`` items."""
    every = [
        (k, s)
        for k, (r, f) in enumerate(zip(runs, frames, strict=True))
        for s in dict.fromkeys(
            [
                *r.manifest.setups,
                *f.continuations["setup"].to_list(),
                *f.judgments.filter(pl.col("target") != REFERENCE)["target"],
            ]
        )
        if s is not None
    ]
    if wanted:
        known = {f"{labels[k]}/{s}" for k, s in every} | {s for _, s in every}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ConfigError(
                f"--setups names {', '.join(unknown)}, which no run has",
                hint="name a setup (every run's setup of that name) or RUNLABEL/setup; the runs have: "
                + ", ".join(sorted(f"{labels[k]}/{s}" for k, s in every)),
            )
        every = [(k, s) for k, s in every if s in wanted or f"{labels[k]}/{s}" in wanted]
    chosen, dropped = [], []
    for k, s in every:
        c = frames[k].counts
        if c.filter(
            (pl.col("judge") == judge)
            & ~pl.col("human")
            & (pl.col("target") == s)
            & pl.col("instance_id").is_in(shared)
        ).height:
            chosen.append((k, s))
        else:
            dropped.append(f"{labels[k]}/{s}: no valid fine-grained judgment by {judge} on the shared instances")
    return chosen, dropped


def compared_counts(
    labels: Sequence[str],
    frames: Sequence[Frames],
    judge: str,
    setups: Sequence[tuple[int, str]],
    shared: Sequence[str],
) -> tuple[pl.DataFrame, list[tuple[str, int]], int]:
    """The frame ``paired.compare_setups`` takes, from every run's frames: the valid fine-grained
    counts of ``judge`` for each setup (target ``RUNLABEL/setup``) and for the human reference
    (target ``REFERENCE``: per shared instance from the first run with a valid judgment of it), on
    the ``shared`` instances, with their source conversation. Also which run gave how many
    reference judgments, and on how many instances another run's valid reference judgment differs."""
    keep = pl.col("instance_id").is_in(list(shared))
    conv = frames[0].instances.filter(keep).select("instance_id", "conversation")
    parts = []
    for k, s in setups:
        c = frames[k].counts.filter((pl.col("judge") == judge) & ~pl.col("human") & (pl.col("target") == s) & keep)
        parts.append(c.select(pl.lit(f"{labels[k]}/{s}").alias("target"), "instance_id", "behaviour", "count"))
    refs = [
        f.counts.filter((pl.col("judge") == judge) & ~pl.col("human") & (pl.col("target") == REFERENCE) & keep).select(
            "instance_id", "behaviour", "count"
        )
        for f in frames
    ]
    taken: set[str] = set()
    source: list[tuple[str, int]] = []
    for lab, r in zip(labels, refs, strict=True):
        new = r.filter(~pl.col("instance_id").is_in(list(taken)))
        ids = set(new["instance_id"].to_list())
        if ids:
            parts.append(new.select(pl.lit(REFERENCE).alias("target"), "instance_id", "behaviour", "count"))
            source.append((lab, len(ids)))
            taken |= ids
    profiles = [
        {iid: tuple(sorted(zip(g["behaviour"], g["count"], strict=True))) for (iid,), g in r.group_by("instance_id")}
        for r in refs
    ]
    differs = sum(1 for iid in taken if len({p[iid] for p in profiles if iid in p}) > 1)
    schema = {"target": pl.Utf8, "instance_id": pl.Utf8, "behaviour": pl.Utf8, "count": pl.Int64}
    cast = [p.cast(schema) for p in parts]  # type: ignore[arg-type]  # polars accepts dtype classes
    counts = pl.concat(cast) if cast else pl.DataFrame(schema=schema)
    counts = counts.join(conv, on="instance_id", how="left").select(
        "target", "instance_id", "conversation", "behaviour", "count"
    )
    return counts.sort("target", "instance_id", "behaviour"), source, differs


def _bench_of(run: RunLike) -> str | None:
    """The benchmark a run's params name (``bench:``), or "built by its params" (``build:``); None
    when the manifest records neither."""
    params = run.manifest.params
    if params.bench:
        return portable_text(params.bench, Path.cwd())  # an older manifest's absolute path: its name
    return "built by its params (build:)" if params.build is not None else None


def compare_runs(
    runs: Sequence[RunLike],
    labels: Sequence[str] | None = None,
    *,
    judge: str | None = None,
    setups: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    correction: str = "holm",
    min_n: int = inference.MIN_N,
) -> RunComparisonAnswer:
    """Compare the setups of ``runs`` (two or more; ``labels``: their names, default ``run_labels``
    of their folders) pair by pair on their shared instances under one judge id (module docstring).
    ``setups``: only these (``setup`` or ``RUNLABEL/setup``). A ConfigError (exit 2, with the fix)
    when they share no instance, no judge under one id, or fewer than two setups."""
    from .paired import compare_setups

    inference.check_params(resamples=resamples, min_n=min_n)
    if correction not in CORRECTIONS:
        raise ConfigError(f"unknown correction {correction!r}", hint=f"use one of {', '.join(CORRECTIONS)}")
    if len(runs) < 2:
        raise ConfigError(
            "compare needs two runs or more", hint="give RUN_A RUN_B (the same run twice compares it with itself)"
        )
    labels = list(labels) if labels is not None else run_labels([r.path for r in runs])
    if len(set(labels)) != len(labels) or len(labels) != len(runs):
        raise ConfigError(f"run labels must be one per run and unique, not {labels}", hint="use run_labels(paths)")
    frames = [run_frames(r) for r in runs]
    decision = choose_judge(runs, labels, frames, judge)
    inter = intersection(runs, labels)
    if not inter.instance_ids:
        sizes = {lab: len(r.instances) for lab, r in zip(labels, runs, strict=True)}
        raise ConfigError(
            "the runs share no instance (the same id with the same content): "
            + ", ".join(f"{lab} has {n}" for lab, n in sizes.items())
            + (
                f"; {len(inter.left_out)} left out, e.g. {inter.left_out[0].instance_id} ({inter.left_out[0].why})"
                if inter.left_out
                else ""
            ),
            hint="compare runs of the same benchmark (the same cocoeval build output, or an extract of it): "
            "an instance is compared only when every run has it with the same M, S, x and human reference",
        )
    chosen, dropped = _pick_setups(runs, labels, frames, decision.judge, set(inter.instance_ids), setups)
    if len(chosen) < 2:
        raise ConfigError(
            f"fewer than two setups to compare under judge {decision.judge} on the {len(inter.instance_ids)} shared "
            "instances" + (f" ({'; '.join(dropped)})" if dropped else ""),
            hint="compare runs whose setups were judged on the shared instances (cocoeval run), or name other --setups",
        )
    counts, source, differs = compared_counts(labels, frames, decision.judge, chosen, inter.instance_ids)
    names = [f"{labels[k]}/{s}" for k, s in chosen]
    result = compare_setups(
        counts,
        frames[0].taxonomy.ids,
        judge=decision.judge,
        setups=names,
        resamples=resamples,
        seed=seed,
        correction=correction,
        min_n=min_n,
    )
    compared = tuple(
        ComparedRun(
            label=lab,
            path=portable_path(r.path, Path.cwd()) if r.path is not None else "",  # as shared: no local folders
            bench=_bench_of(r),
            instances=len(r.instances),
            setups=tuple(s for k2, s in chosen if k2 == k),
            judge_id=str(fine_judge_id(r, decision.judge)),
            pipeline_check=r.manifest.pipeline_check,
        )
        for k, (lab, r) in enumerate(zip(labels, runs, strict=True))
    )
    return RunComparisonAnswer(
        runs=compared,
        intersection=inter,
        judge=decision,
        setups=tuple(names),
        not_compared=tuple(dropped),
        reference_from=tuple(source),
        reference_differs=differs,
        comparison=result,
        counts=counts,
        behaviour_names=tuple((b.id, b.name) for b in frames[0].taxonomy.behaviours),
        resamples=resamples,
        seed=seed,
        min_n=min_n,
    )
