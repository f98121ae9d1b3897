"""A run as Inspect AI eval logs (``cocoeval export RUN --format inspect --out DIR``), so that
``inspect view`` and every tool reading Inspect logs shows cocoeval's simulations and judgments.

Beyond the paper. One log (``DIR/<target>__<judge>.eval``) per target and LLM judge: each setup,
and the human reference, judged by one judge (a run without judgments: one log per target, without
scores). Each instance the target has a continuation of is one sample: its ``input`` is the
instance's context (ids, goals, participants, summary S, history x), its ``target`` the human
continuation r, its ``output`` the target's turns. Its scores are the judge's, read from the run's
frames (``frames.run_frames``, what every table counts): one per behaviour (occurrences in the
conversation, from a valid fine-grained judgment) and the Likert scores ``consistency`` and
``collaborativeness`` (from a valid overall judgment). An invalid judgment gives no score, never
a 0: the sample's metadata says ``invalid: <reason>`` for that kind; an invalid continuation is the
sample's ``error`` with its reason. The log's results are the mean of each score over the samples
that have it, with that count.

The logs are written with ``inspect_ai``'s own types and writer (``EvalLog``,
``write_eval_log``), so ``inspect_ai.log.read_eval_log`` reads them back. No absolute path of the
machine goes into them: the run is named by its folder's name and its content digest."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cocoeval.core.errors import ConfigError, InputError
from cocoeval.core.files import portable_spec
from cocoeval.core.targets import REFERENCE
from cocoeval.run import Run

from .frames import HUMAN, open_run_dir, run_frames

if TYPE_CHECKING:
    from cocoeval.core.schema import Instance, Turn

__all__ = ["BEYOND", "InspectExport", "InspectLogFile", "export_inspect"]

BEYOND = "beyond the paper: cocoeval's run as an Inspect AI eval log (scores from the run's frames)"
"""The label every log carries in its metadata (the paper has no such export)."""
REFERENCE_FILE = "human-reference"
"""The file-name part of the human reference's logs."""
SCORER = "cocoeval-judge"
"""The scorer name of every score in the logs' results."""
LIKERT = ("consistency", "collaborativeness")


@dataclass(frozen=True)
class InspectLogFile:
    """One log written: which target and judge, how many samples and how many of them scored."""

    file: str
    """Its file name inside the output folder."""
    target: str
    """The setup's name, or ``human reference``."""
    judge: str | None
    """The LLM judge whose scores it carries (None: the run has no LLM judgment)."""
    samples: int
    scored: int
    """Samples with at least one score (a valid judgment of this judge)."""


@dataclass(frozen=True)
class InspectExport:
    """What ``export_inspect`` wrote."""

    out: str
    logs: list[InspectLogFile]


def _lines(turns: list[Turn]) -> str:
    return "\n".join(f"{t.speaker}: {t.text}" for t in turns)


def _context(inst: Instance) -> str:
    """The sample's input: what the simulator was given, as readable text."""
    parts = ", ".join(
        p.name + (f" ({', '.join(x for x in (p.role, p.stance) if x)})" if p.role or p.stance else "")
        for p in inst.metadata.participants
    )
    return "\n".join(
        [
            f"Instance {inst.id} (dataset {inst.dataset}, conversation {inst.provenance.conversation_id}).",
            "Goals: " + ("; ".join(inst.metadata.goals) or "(none)"),
            "Participants: " + (parts or "(none listed)"),
            "Summary S: " + (inst.summary.text or "(no earlier turns)"),
            f"History x ({len(inst.history)} turns):",
            _lines(inst.history),
            f"Continue for {len(inst.reference)} turns.",
        ]
    )


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "unnamed"


def _run_digest(d: Path) -> str:
    """SHA-256 of the run's records (their paths in the run and their bytes): names the run in
    the logs without its absolute path."""
    h = hashlib.sha256()
    files = [d / "manifest.json", d / "instances.jsonl", *sorted(d.glob("continuations/*.jsonl"))]
    for p in [*files, *sorted(d.glob("judgments/**/*.jsonl"))]:
        if p.is_file():
            h.update(p.relative_to(d).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _short_id(*parts: str) -> str:
    """A stable id of 22 characters (Inspect's ids are 22), from ``parts``."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:22]


def export_inspect(run_dir: str | Path, out_dir: str | Path) -> InspectExport:
    """Write the run in ``run_dir`` as Inspect eval logs into ``out_dir`` (module docstring)."""
    try:
        from inspect_ai.log import (
            EvalConfig,
            EvalDataset,
            EvalError,
            EvalLog,
            EvalMetric,
            EvalResults,
            EvalSample,
            EvalScore,
            EvalSpec,
            write_eval_log,
        )
        from inspect_ai.model import ModelOutput
        from inspect_ai.scorer import Score
    except ImportError as e:
        raise ConfigError(
            "--format inspect needs the inspect-ai package", hint="pip install 'cocoeval[interop]' (or inspect-ai)"
        ) from e
    from cocoeval import __version__

    src, out = Path(run_dir), Path(out_dir)
    f = run_frames(open_run_dir(src))
    run = Run.open(src)  # the texts: instances and continuations
    insts = {i.id: i for i in run.instances}
    order = [i.id for i in run.instances]
    man = run.manifest
    # model specs as shared: local/<file name>, not a path of this machine (an older manifest's too)
    models = {s.name: s.model and portable_spec(s.model) for s in man.params.setups or []}
    judge_models = {j.name: j.model and portable_spec(j.model) for j in man.params.judges or []}
    digest = _run_digest(src)
    created = man.finished or man.started or datetime.now(UTC).isoformat(timespec="seconds")
    judges = sorted(set(f.judgments.filter(~f.judgments["human"])["judge"].to_list()))

    counts: dict[tuple[str, str, str], dict[str, int]] = {}
    for r in f.counts.filter(~f.counts["human"]).iter_rows(named=True):
        counts.setdefault((r["judge"], r["target"], r["instance_id"]), {})[r["behaviour"]] = r["count"]
    likert: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in f.likert.filter(~f.likert["human"]).iter_rows(named=True):
        likert[(r["judge"], r["target"], r["instance_id"])] = {k: float(r[k]) for k in LIKERT}
    status: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in f.judgments.filter(~f.judgments["human"]).iter_rows(named=True):
        if r["status"] == "stale":
            continue
        note = r["status"] if r["status"] in ("ok", "repaired") else f"{r['status']}: {r['reason']}"
        status.setdefault((r["judge"], r["target"], r["instance_id"]), {})[r["kind"]] = note
    behaviours = [b.id for b in f.taxonomy.behaviours]

    # the targets: the human reference (every instance), then each setup's current continuations
    # (the frames say which: ok or invalid, never stale)
    targets: list[tuple[str, str, dict[str, Any]]] = [(REFERENCE, HUMAN, dict.fromkeys(order))]
    cur = f.continuations.filter(f.continuations["status"] != "stale")
    for name in sorted(set(cur["setup"].to_list())):
        ids = set(cur.filter(cur["setup"] == name)["instance_id"].to_list())
        conts = {c.instance_id: c for c in run.continuations.get(name, []) if c.instance_id in ids}
        targets.append((name, name, {i: conts[i] for i in order if i in conts}))

    out.mkdir(parents=True, exist_ok=True)
    written: list[InspectLogFile] = []
    taken: dict[str, str] = {}  # a log's file name, lower case (case-insensitive file systems): what it holds
    for key, label, conts in targets:
        for judge in judges or [None]:
            samples = []
            values: dict[str, list[float]] = {}  # each score's values over the samples that have it
            for iid, cont in conts.items():
                inst = insts[iid]
                k = (judge or "", key, iid)
                given: dict[str, float] = {**counts.get(k, {}), **likert.get(k, {})}
                for n, v in given.items():
                    values.setdefault(n, []).append(float(v))
                scores = {n: Score(value=v) for n, v in given.items()}
                error = None
                if key == REFERENCE:
                    output = ModelOutput.from_content(model="human", content=_lines(inst.reference))
                elif cont.status == "ok":
                    output = ModelOutput.from_content(model=models.get(key) or key, content=_lines(cont.turns))
                else:
                    output = ModelOutput.from_content(model=models.get(key) or key, content="")
                    error = EvalError(message=f"continuation invalid: {cont.reason}", traceback="", traceback_ansi="")
                judged = status.get(k, {})
                samples.append(
                    EvalSample(
                        id=iid,
                        epoch=1,
                        input=_context(inst),
                        target=_lines(inst.reference),
                        output=output,
                        scores=scores or None,
                        error=error,
                        metadata={
                            "dataset": inst.dataset,
                            "conversation": inst.provenance.conversation_id,
                            "judgments": {kind: judged.get(kind, "not judged") for kind in ("fine_grained", "overall")}
                            if judge
                            else {},
                        },
                    )
                )
            results = [
                EvalScore(
                    name=n,
                    scorer=SCORER,
                    scored_samples=len(values[n]),
                    metrics={"mean": EvalMetric(name="mean", value=sum(values[n]) / len(values[n]))},
                )
                for n in [*behaviours, *LIKERT]
                if n in values
            ]
            file = f"{_file_part(REFERENCE_FILE if key == REFERENCE else key)}__{_file_part(judge or 'unjudged')}.eval"
            if file.lower() in taken:  # a setup named like the reference's file, or two names one file name
                raise InputError(
                    f"two logs of {src} would be written to one file, {out / file} ({taken[file.lower()]} and "
                    f"{label} judged by {judge})",
                    hint="rename one of the setups (a setup may not be called human-reference in an Inspect export)",
                )
            taken[file.lower()] = f"{label} judged by {judge}"
            spec = EvalSpec(
                eval_id=_short_id(digest, key, judge or ""),
                run_id=_short_id(digest),
                task_id=_short_id(src.name, key),
                created=created,
                task=f"cocoeval/{man.params.name or src.name}",
                task_display_name=f"{label} judged by {judge}" if judge else label,
                dataset=EvalDataset(name=man.params.name or src.name, samples=len(samples), sample_ids=list(conts)),
                model="human" if key == REFERENCE else (models.get(key) or key),
                config=EvalConfig(),
                metadata={
                    "note": BEYOND,
                    "cocoeval_version": __version__,
                    "run": src.name,
                    "run_digest": digest,
                    "target": label,
                    "judge": judge,
                    "judge_model": judge_models.get(judge) if judge else None,
                    "pipeline_check": man.pipeline_check,
                },
            )
            log = EvalLog(
                status="success",
                eval=spec,
                results=EvalResults(
                    total_samples=len(samples),
                    completed_samples=sum(1 for s in samples if s.error is None),
                    scores=results,
                ),
                samples=samples,
            )
            write_eval_log(log, str(out / file))
            written.append(
                InspectLogFile(
                    file=file,
                    target=label,
                    judge=judge,
                    samples=len(samples),
                    scored=sum(1 for s in samples if s.scores),
                )
            )
    return InspectExport(out=str(out), logs=written)
