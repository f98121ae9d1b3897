"""Running the judge probes of a params file (``cocoeval probe PARAMS``; beyond the paper): which
targets each probe draws, the calls (through a ``Runner`` of the params' ``llm:`` settings, so the
run's call cache: a probe run killed and run again sends no completed call again; its usage is
added to the run's ``usage.json``), and their records, ``<run>/probes/<judge>.jsonl``
(``ProbeRecord``, one per probe item: its probe, the source target, what was changed, the
judgment), rewritten atomically after every round.

Names and stability draw ``targets`` targets among those the judge judged validly in the run
(its current judgments: the probe compares with them); planted draws ``targets`` human
references the judge judged (fine-grained) and plants each behaviour of ``behaviours`` once into
each. The construction is ``cocoeval.judge.probes``; the analysis ``cocoeval.analysis.probes``.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from cocoeval.core.jsonio import read_unique_models, write_jsonl
from cocoeval.core.names import child_path
from cocoeval.core.schema import Instance, Judgment
from cocoeval.core.targets import REFERENCE, Target, targets_for
from cocoeval.core.taxonomy import Taxonomy
from cocoeval.judge.config import JudgeConfig, Kind
from cocoeval.judge.engine import JudgeTask
from cocoeval.judge.probes import (
    ProbeKind,
    ProbeSection,
    anonymise,
    expected_behaviour,
    plant,
    templates_version,
)
from cocoeval.llm import Call, Runner

if TYPE_CHECKING:
    from .stages import Experiment

PROBES_DIR = "probes"
VALID = ("ok", "repaired")


class ProbeRecord(BaseModel):
    """One probe item of ``<run>/probes/<judge>.jsonl``: one probe of one target by one judge and kind."""

    model_config = ConfigDict(extra="forbid")

    probe: ProbeKind
    """names, planted or stability."""
    judge: str
    """The judge's name."""
    kind: Kind
    instance_id: str
    target: str
    """The source target's name: 'reference' or the setup's name."""
    target_id: str
    """'reference' or the setup id of the source continuation."""
    behaviour: str | None = None
    """planted: the planted behaviour (repetition, off_topic, persona_flip, contradiction)."""
    expects: str | None = None
    """planted: the taxonomy id the planted turn should be labelled with."""
    turn: int | None = None
    """planted: the planted turn, a 0-based index into the target's turns."""
    changed: dict[str, Any] = Field(default_factory=dict)
    """What was changed: names {"names": {name: letter}}; planted {turn, speaker, before, after,
    template}; stability {"sample": n}."""
    templates: str | None = None
    """planted: the template file's name@version."""
    seed: int = 0
    judgment: Judgment
    """The probe's judgment (its judge id is the judge's; ``instance_hash`` that of the altered
    instance for names)."""

    def key(self) -> tuple[str, str, str, str, str]:
        return self.probe, self.instance_id, self.target, self.kind, self.behaviour or ""


class ProbeTask:
    """One probe item's judge task and what its record says besides the judgment."""

    def __init__(
        self, task: JudgeTask, probe: ProbeKind, source: Target, seed: int, *, sample: int = 0, **meta: Any
    ) -> None:
        self.task, self.probe, self.source, self.sample, self.seed, self.meta = task, probe, source, sample, seed, meta

    def next_call(self) -> Call:
        call = self.task.next_call()
        req = call.request if not self.sample else call.request.model_copy(update={"sample": self.sample})
        return call.model_copy(
            update={
                "request": req,
                "stage": "probe",
                "tag": f"{call.tag}|probe:{self.probe}:{self.meta.get('behaviour') or ''}",
            }
        )

    def record(self) -> ProbeRecord | None:
        if self.task.result is None:
            return None
        return ProbeRecord(
            probe=self.probe,
            judge=self.task.judge.name,
            kind=self.task.kind,
            instance_id=self.source.instance.id,
            target=self.source.name,
            target_id=self.source.target_id,
            seed=self.seed,
            judgment=self.task.result,
            **self.meta,
        )


def _draw(items: Sequence[Target], n: int, seed: int, salt: str) -> list[Target]:
    """``n`` of ``items`` at random (seeded; all of them when there are fewer), in their order."""
    rng = random.Random(f"{seed}|{salt}")
    picked = set(rng.sample(range(len(items)), min(n, len(items))))
    return [t for i, t in enumerate(items) if i in picked]


def plan_probes(
    sec: ProbeSection,
    judges: Sequence[JudgeConfig],
    targets: Sequence[Target],
    tax: Taxonomy,
    valid: dict[str, set[tuple[str, str, str]]] | None = None,
    warn: Callable[[str], None] = lambda _m: None,
) -> dict[str, list[ProbeTask]]:
    """{judge name: its probe tasks}. ``targets``: every target of the run (``targets_for``);
    ``valid``: {judge: {(instance id, target name, kind)}} of its valid current judgments (what the
    probes draw from and compare with; None: every target the judge selects, for the forecast)."""
    per_instance = collections.Counter(t.instance.id for t in targets)
    out: dict[str, list[ProbeTask]] = {}
    for j in judges:
        instances = list({t.instance.id: t.instance for t in targets}.values())  # each once, in order
        chosen = {i.id for i in j.select(instances)}
        mine = [t for t in targets if t.instance.id in chosen and t.judged]
        out[j.name] = _plan_judge(
            sec, j, mine, None if valid is None else valid.get(j.name, set()), per_instance, tax, warn
        )
    return out


def _plan_judge(
    sec: ProbeSection,
    j: JudgeConfig,
    mine: list[Target],
    ok: set[tuple[str, str, str]] | None,
    per_instance: collections.Counter[str],
    tax: Taxonomy,
    warn: Callable[[str], None],
) -> list[ProbeTask]:
    """One judge's probe tasks (``plan_probes``): ``mine``, the targets it selects; ``ok``, its valid
    judgments (None: all)."""

    def judged(t: Target, kinds: Sequence[str]) -> bool:
        return ok is None or any((t.instance.id, t.name, k) in ok for k in kinds)

    tasks: list[ProbeTask] = []

    def add(
        probe: ProbeKind, source: Target, probed: Target, kinds: Sequence[Kind], sample: int = 0, **meta: Any
    ) -> None:
        for k in kinds:
            if ok is not None and (source.instance.id, source.name, k) not in ok and probe != "planted":
                continue  # nothing to compare the probe with
            jt = JudgeTask(j, k, probed, tax, shared=per_instance[source.instance.id] > 1)
            tasks.append(ProbeTask(jt, probe, source, sec.seed, sample=sample, **meta))

    pool = [t for t in mine if judged(t, j.kind)]
    if ok is not None and not pool:
        warn(
            f"judge {j.name}: no valid judgment in the run to probe against (run the judge stage first: "
            "cocoeval run PARAMS --stage judge)"
        )
        return []
    if "names" in sec.kinds:
        for t in _draw(pool, sec.targets, sec.seed, f"names|{j.name}"):
            probed, mapping = anonymise(t)
            if mapping:  # a chat has no names to replace
                add("names", t, probed, j.kind, changed={"names": mapping})
    if "stability" in sec.kinds:
        for t in _draw(pool, sec.targets, sec.seed, f"stability|{j.name}"):
            n = sec.sample + j.samples - 1  # past the run's own samples (samples: k asks 0 to k - 1)
            add("stability", t, t, j.kind, sample=n, changed={"sample": n})
    if "planted" in sec.kinds:
        if "fine_grained" not in j.kind:
            warn(f"judge {j.name}: makes no fine-grained judgment, so no planted behaviour is probed")
            return tasks
        refs = [t for t in mine if t.name == REFERENCE and judged(t, ["fine_grained"])]
        skipped: collections.Counter[str] = collections.Counter()
        for t in _draw(refs, sec.targets, sec.seed, f"planted|{j.name}"):
            for b in sec.behaviours:
                exp = expected_behaviour(b)
                if tax.get(exp) is None:
                    skipped[f"{b} (the taxonomy has no {exp!r})"] += 1
                    continue
                p = plant(t, b, random.Random(f"{sec.seed}|planted|{j.name}|{t.instance.id}|{b}"))
                if p is None:
                    skipped[f"{b} (no turn to plant it in)"] += 1
                    continue
                add(
                    "planted",
                    t,
                    p.target,
                    ["fine_grained"],
                    behaviour=b,
                    expects=exp,
                    turn=p.turn,
                    changed=p.changed,
                    templates=templates_version(),
                )
        for why, n in sorted(skipped.items()):
            warn(f"judge {j.name}: {n} planted cop(ies) not made: {why}")
    return tasks


def probe_path(run_dir: Path, judge: str) -> Path:
    return child_path(run_dir / PROBES_DIR, judge, kind="judge")


def read_probes(run_dir: str | Path, judge: str) -> list[ProbeRecord]:
    """The probe records of ``judge`` in a run directory (empty when it was not probed); one
    that holds a probe item twice is refused (InputError naming both lines)."""
    p = Path(run_dir) / PROBES_DIR / f"{judge}.jsonl"
    if not p.exists():
        return []
    return read_unique_models(
        p,
        ProbeRecord,
        ProbeRecord.key,
        lambda r: f"probe {r.probe} of {r.instance_id!r}, {r.target}, {r.kind}",
        "cocoeval probe writes each probe item once: remove the extra line, or run "
        "cocoeval probe again to rewrite the file",
    )


def run_probe_tasks(
    tasks: dict[str, list[ProbeTask]],
    runner: Runner,
    on_round: Callable[[dict[str, list[ProbeRecord]]], None] | None = None,
) -> dict[str, list[ProbeRecord]]:
    """Send the probe calls (re-asks and larger budgets as the judge stage does) until every item
    has its judgment; {judge: records}. ``on_round`` gets the finished records after each round."""

    def collect() -> dict[str, list[ProbeRecord]]:
        return {n: [r for t in ts if (r := t.record()) is not None] for n, ts in tasks.items()}

    while pending := [t for ts in tasks.values() for t in ts if t.task.result is None]:
        for t, r in zip(pending, runner.run([t.next_call() for t in pending]), strict=True):
            t.task.apply(r)
        if on_round is not None:
            on_round(collect())
    return collect()


def valid_judgments(run: Any, judges: Sequence[str]) -> dict[str, set[tuple[str, str, str]]]:
    """{judge: {(instance id, target name, kind)}} of its valid, current judgments in ``run``."""
    current = {
        (name, c.instance_id): c.setup_id
        for name, cs in run.current_continuations.items()
        for c in cs
        if c.status == "ok"
    }
    out: dict[str, set[tuple[str, str, str]]] = {}
    for name in judges:
        keep = set()
        for j in run.judgments.get(name, []):
            target = j.target_name or j.target
            if j.status not in VALID or run.stale_reason(name, j) is not None:
                continue
            if j.target != REFERENCE and current.get((target, j.instance_id)) != j.target:
                continue
            keep.add((j.instance_id, target, j.kind))
        out[name] = keep
    return out


def judge_id_changes(exp: Experiment, run: Any, judges: Sequence[JudgeConfig]) -> list[str]:
    """Why ``judges`` as the params now give them are not the judges of ``run``'s judgments, one
    line per judge and kind whose judge id differs (empty: the same judges). The run's id is the
    manifest's (the probe tables read only probe records of that id), else the ids of the
    judge's judgments in the run."""
    from cocoeval.judge.config import judge_ids

    now = judge_ids(exp.params.judges, exp.taxonomy)
    out = []
    for j in judges:
        for k in j.kind:
            want = now[j.name][k]
            was = (run.manifest.judges.get(j.name) or {}).get(k)
            if was is None:
                made = sorted({x.judge_id for x in run.judgments.get(j.name, []) if x.kind == k})
                if not made or want in made:
                    continue
                was = ", ".join(made)
            if was != want:
                out.append(f"judge {j.name}, {k}: judge id {want} in the params, {was} in the run")
    return out


def probe_targets(instances: Sequence[Instance], run: Any) -> list[Target]:
    """Every target of the run: the references and the setups' current ok continuations."""
    return targets_for(instances, run.current_continuations)


def write_probe_records(run_dir: Path, judge: str, records: list[ProbeRecord], final: bool = False) -> None:
    """Write a judge's probe file (as the stages write theirs: never an empty file)."""
    path = probe_path(run_dir, judge)
    if records:
        write_jsonl(path, records)
    elif final:
        path.unlink(missing_ok=True)


def run_probes(
    exp: Experiment, *, progress: bool | None = None, warn: Callable[[str], None] | None = None
) -> dict[str, dict[str, int]]:
    """Send the probes of ``exp``'s ``probes:`` section (every probe, target count and judge it
    names) against the run directory's judgments; write ``probes/<judge>.jsonl`` and add this
    invocation's usage to ``usage.json``. {judge: {probe: items judged}}. One run at a time on a
    run directory (the run's lock)."""
    import logging

    from cocoeval.core.errors import ConfigError, Interrupted, NotFoundError

    from .lock import run_dir_lock
    from .rundir import USAGE_JOURNAL, Run, spent_outside_journal, write_usage

    sec = exp.params.probes
    if sec is None:
        raise ConfigError(
            f"{exp.source or 'the params'} has no probes: section",
            hint="add one (e.g. probes: {targets: 20}); docs/judging.md lists its fields",
        )
    if not (exp.run_dir / "manifest.json").exists():
        raise NotFoundError(f"no run at {exp.run_dir}", hint=f"run it first: cocoeval run {exp.source or 'PARAMS'}")
    say = warn or (lambda m: logging.getLogger("cocoeval").warning("warning: %s", m))
    judges = [j for j in exp.params.llm_judges if sec.judges is None or j.name in sec.judges]
    for j in judges:
        probe_path(exp.run_dir, j.name)  # refuses an unsafe name before anything is sent
    cfg = exp.llm_config(progress=progress)
    with run_dir_lock(exp.run_dir):
        run = Run.open(exp.run_dir)
        if changed := judge_id_changes(exp, run, judges):
            raise ConfigError(
                f"{exp.source or 'the params'}: the judge settings changed since the run's judge stage "
                f"({'; '.join(changed)}): a probe is compared with the run's judgments made by the same "
                "judge, so the probes would be paid for and not counted; nothing was sent",
                hint=f"judge the run with these params first (cocoeval run {exp.source or 'PARAMS'} --stage judge: "
                "cached calls are not paid again), or put the judge's settings back as they were",
            )
        targets = probe_targets(run.instances, run)
        tasks = plan_probes(sec, judges, targets, exp.taxonomy, valid_judgments(run, [j.name for j in judges]), say)
        runner = Runner(cfg, journal=exp.run_dir / USAGE_JOURNAL, earlier=spent_outside_journal(exp.run_dir))

        def save(records: dict[str, list[ProbeRecord]], final: bool = False) -> None:
            for name, rs in records.items():
                write_probe_records(exp.run_dir, name, rs, final)

        try:
            records = run_probe_tasks(tasks, runner, on_round=save)
            save(records, final=True)
        except KeyboardInterrupt:  # Ctrl-C: one line says what was kept (the CLI exits 130)
            raise Interrupted(
                f"the probe items judged are kept in {exp.run_dir / PROBES_DIR} and every answered "
                f"call in the call cache; run cocoeval probe {exp.source or 'PARAMS'} again to go on: "
                "no completed call is sent again"
            ) from None
        finally:
            write_usage(exp.run_dir, runner)
            runner.close()
    return {name: dict(collections.Counter(r.probe for r in rs)) for name, rs in records.items()}
