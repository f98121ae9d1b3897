"""Params file -> run directory. Used by ``cocoeval run`` and by the notebooks.

A run directory holds: ``manifest.json`` (package version, git revision, params, taxonomy hash,
prompt versions, setup ids, status), ``instances.jsonl``, ``continuations/<setup>.jsonl``
(rewritten atomically after every simulation round) and ``usage.json``. Every LLM call goes
through the call cache, so re-running a finished run sends no request and a killed run resumes.
Relative paths in a params file are resolved against the folder of the params file.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from . import __version__
from .bench import BuildConfig, build, load_instances
from .errors import ConfigError, InputError, NotFoundError
from .jsonio import read_json, read_models, read_text, write_json, write_jsonl
from .judge import PROMPTS as JUDGE_PROMPTS
from .judge import JudgeConfig, judge
from .llm import LLMConfig, Runner
from .prompts import load_prompt
from .schema import Continuation, Instance, Judgment
from .simulate import CHATBOT_SYSTEM_PROMPT, Setup, simulate
from .taxonomy import load_taxonomy


class BuildSection(BaseModel):
    """Build the benchmark as part of the run (instead of ``bench:``)."""

    model_config = ConfigDict(extra="forbid")

    sources: list[str] = Field(default_factory=list)
    """KIND:PATH[#DATASET] sources, as for cocoeval build."""
    demo_data: bool = False
    """Also write and use the illustrative demo conversations (not human data)."""
    options: BuildConfig = Field(default_factory=BuildConfig)
    """Builder options (history_turns, per_dataset, seed...)."""


class InstanceSelection(BaseModel):
    """Which instances of the benchmark the run uses."""

    model_config = ConfigDict(extra="forbid")

    split: Literal["eval", "train"] = "eval"
    per_dataset: int | None = Field(None, ge=1)
    """At most this many per dataset, in id order (None: all)."""
    datasets: list[str] | None = None
    """Only these datasets (None: all)."""
    ids: list[str] | None = None
    """Only these instance ids."""


class ExperimentParams(BaseModel):
    """The shape of a params file (see params/demo.yaml and params/paper.yaml)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Run name; the run directory defaults to runs/<name> beside the params folder."""
    out: str | None = None
    """Run directory."""
    bench: str | None = None
    """A folder written by cocoeval build (or give build:)."""
    build: BuildSection | None = None
    """Build the benchmark into <run dir>/bench."""
    instances: InstanceSelection = Field(default_factory=InstanceSelection)
    setups: list[Setup] = Field(default_factory=list)
    """Simulator setups."""
    judges: list[JudgeConfig] = Field(default_factory=list)
    """Judges: {name, model, kind: [overall, fine_grained], ...}; each judges every reference
    and every ok continuation."""
    llm: LLMConfig = Field(default_factory=LLMConfig)
    """Runner, cache and price settings."""
    taxonomy: str | None = None
    """A taxonomy YAML (None: the default)."""

    @model_validator(mode="after")
    def _check(self) -> ExperimentParams:
        if (self.bench is None) == (self.build is None):
            raise ValueError("give exactly one of 'bench' (a built benchmark folder) or 'build'")
        for what, items in (("setup", self.setups), ("judge", self.judges)):
            names = Counter(s.name for s in items)
            dup = [n for n, c in names.items() if c > 1]
            if dup:
                raise ValueError(f"{what} names must be unique; repeated: {', '.join(dup)}")
        if any(s.name == "reference" for s in self.setups):
            raise ValueError("'reference' is the human reference; name the setup otherwise")
        return self


class Experiment:
    """A loaded params file with its paths resolved."""

    def __init__(self, params: ExperimentParams, base: Path, source: str | None = None) -> None:
        self.params = params
        self.base = base
        self.source = source
        self.run_dir = self.resolve(params.out) if params.out else base.parent / "runs" / params.name
        self.taxonomy = load_taxonomy(self.resolve(params.taxonomy) if params.taxonomy else None)

    def resolve(self, p: str) -> Path:
        q = Path(p).expanduser()
        return q if q.is_absolute() else (self.base / q).resolve()

    def llm_config(self) -> LLMConfig:
        cfg = self.params.llm
        upd: dict[str, Any] = {}
        if cfg.cache:
            upd["cache"] = str(self.resolve(cfg.cache))
        if cfg.prices:
            upd["prices"] = str(self.resolve(cfg.prices))
        return cfg.model_copy(update=upd)

    # ------------------------------------------------------------------ stages
    def bench_dir(self) -> Path:
        if self.params.bench:
            return self.resolve(self.params.bench)
        return self.run_dir / "bench"

    def prepare_instances(self, write: bool = True) -> list[Instance]:
        """The selected instances (building the benchmark first when the params say so);
        ``write`` also saves them as the run's instances.jsonl."""
        b = self.params.build
        if b is not None and (write or not (self.bench_dir() / "eval.jsonl").exists()):
            sources = [s if ":" not in s else self._resolve_source(s) for s in b.sources]
            if b.demo_data:
                from .demo import write_demo_data

                paths = write_demo_data(self.run_dir / "demo-data")
                sources += [f"{kind}:{p}" for kind, p in paths.items()]
            if not sources:
                raise ConfigError("build: needs sources or demo_data: true", hint="see params/demo.yaml")
            build(sources, self.bench_dir(), b.options)
        sel = self.params.instances
        insts = load_instances(self.bench_dir(), sel.split)
        if sel.datasets is not None:
            insts = [i for i in insts if i.dataset in sel.datasets]
        if sel.ids is not None:
            wanted = set(sel.ids)
            insts = [i for i in insts if i.id in wanted]
        if sel.per_dataset is not None:
            seen: Counter[str] = Counter()
            kept = []
            for i in sorted(insts, key=lambda i: i.id):
                if seen[i.dataset] < sel.per_dataset:
                    kept.append(i)
                    seen[i.dataset] += 1
            insts = kept
        if not insts:
            raise ConfigError(f"no instances selected from {self.bench_dir()}",
                              hint="check instances: (split, datasets, ids) against the benchmark's report.json")
        if write:
            write_jsonl(self.run_dir / "instances.jsonl", insts)
        return insts

    def _resolve_source(self, spec: str) -> str:
        kind, _, rest = spec.partition(":")
        path, sep, ds = rest.partition("#")
        return f"{kind}:{self.resolve(path)}{sep}{ds}"

    def manifest(self, **extra: Any) -> dict[str, Any]:
        prompts = {s.prompt for s in self.params.setups}
        if any(s.kind == "human_ai" for s in self.params.setups):
            prompts.add(CHATBOT_SYSTEM_PROMPT)
        prompts |= {JUDGE_PROMPTS[k] for j in self.params.judges for k in j.kind}
        return {
            "cocoeval_version": __version__,
            "git_revision": git_revision(),
            "params_file": self.source,
            "params": self.params.model_dump(mode="json"),
            "taxonomy": {"name": self.taxonomy.name, "hash": self.taxonomy.hash},
            "prompts": {p: load_prompt(p).ref for p in sorted(prompts)},
            "setups": {s.name: s.setup_id(self.taxonomy) for s in self.params.setups},
            "judges": {j.name: {k: j.judge_id(k, self.taxonomy) for k in j.kind} for j in self.params.judges},
            **extra,
        }

    def run(self, stages: tuple[str, ...] = ("simulate", "judge"), progress: bool | None = None,
            llm: dict[str, Any] | None = None) -> Path:
        """Run the stages; returns the run directory. ``llm`` overrides settings of the params
        file's ``llm:`` section for this run (e.g. ``{"batch": True}``)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        started = _now()
        cfg = self.llm_config()
        if progress is not None:
            cfg = cfg.model_copy(update={"progress": progress})
        if llm:
            try:
                cfg = LLMConfig.model_validate({**cfg.model_dump(), **llm})
            except ValidationError as e:
                raise ConfigError(f"bad llm setting: {e.errors()[0]['msg']}", hint="see LLMConfig") from None
        mode = {"batch": cfg.batch, "batch_dependent": cfg.batch_dependent, "processes": cfg.processes}
        write_json(self.run_dir / "manifest.json", self.manifest(status="running", started=started, llm_mode=mode))
        insts = self.prepare_instances()
        runner = Runner(cfg)
        summary: dict[str, Any] = {}
        try:
            if "simulate" in stages and self.params.setups:
                cdir = self.run_dir / "continuations"

                def save(_round: int, partial: dict[str, list[Continuation]]) -> None:
                    for name, conts in partial.items():
                        write_jsonl(cdir / f"{name}.jsonl", conts)

                result = simulate(insts, self.params.setups, runner, taxonomy=self.taxonomy, on_round=save)
                save(-1, result)
                summary["simulate"] = {
                    name: {"continuations": len(cs), "ok": sum(c.status == "ok" for c in cs),
                           "invalid": sum(c.status == "invalid" for c in cs)}
                    for name, cs in result.items()}
            if "judge" in stages and self.params.judges:
                conts = read_run(self.run_dir)["continuations"] if (self.run_dir / "continuations").exists() else {}
                conts = {k: v for k, v in conts.items() if k in {s.name for s in self.params.setups}}
                jdir = self.run_dir / "judgments"

                def save_j(_round: int, partial: dict[str, list[Judgment]]) -> None:
                    for name, js in partial.items():
                        write_jsonl(jdir / f"{name}.jsonl", js)

                jres = judge(insts, conts, self.params.judges, runner, taxonomy=self.taxonomy, on_round=save_j)
                save_j(-1, jres)
                summary["judge"] = {
                    name: {"judgments": len(js), "ok": sum(j.status == "ok" for j in js),
                           "repaired": sum(j.status == "repaired" for j in js),
                           "invalid": sum(j.status == "invalid" for j in js)}
                    for name, js in jres.items()}
        finally:
            write_json(self.run_dir / "usage.json", {"rows": runner.ledger.rows(),
                                                     "totals": runner.ledger.totals(),
                                                     "cache": runner.cache.stats(),
                                                     "requests_sent": runner.sent,
                                                     "requests_batched": runner.batched})
            runner.close()
        write_json(self.run_dir / "manifest.json",
                   self.manifest(status="complete", started=started, finished=_now(), llm_mode=mode,
                                 instances=len(insts), stages=list(stages), summary=summary))
        return self.run_dir


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def load_params(path: str | Path) -> Experiment:
    """Read and validate a params file; errors name the file, the key and the fix."""
    p = Path(path)
    text = read_text(p)  # missing, a folder, empty or not UTF-8: an InputError naming the file
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputError(f"not valid YAML: {e}", file=str(p), hint="fix the YAML syntax; see params/demo.yaml") from None
    except RecursionError:
        raise InputError("YAML nested too deeply to read", file=str(p), hint="see params/demo.yaml") from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping of settings", file=str(p), hint="see params/demo.yaml")
    try:
        params = ExperimentParams.model_validate(data)
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors()[:5])
        raise InputError(errs, file=str(p), hint="fix these keys; see params/demo.yaml for the shape; "
                                                 "fields are documented in cocoeval/experiment.py") from None
    return Experiment(params, p.resolve().parent, str(p))


def read_run(run_dir: str | Path) -> dict[str, Any]:
    """Load a run directory: manifest, instances and continuations by setup name."""
    d = Path(run_dir)
    if not d.is_dir():
        raise NotFoundError(f"no run directory at {d}" + (" (it is a file)" if d.exists() else ""),
                            hint="give a folder written by cocoeval run")
    conts = {p.stem: read_models(p, Continuation) for p in sorted((d / "continuations").glob("*.jsonl"))}
    judgments = {p.stem: read_models(p, Judgment) for p in sorted((d / "judgments").glob("*.jsonl"))}
    manifest = read_json(d / "manifest.json")
    if not isinstance(manifest, dict):
        raise InputError("expected a JSON object", file=str(d / "manifest.json"),
                         hint="the manifest is written by cocoeval run; run it again")
    return {"manifest": manifest, "instances": read_models(d / "instances.jsonl", Instance),
            "continuations": conts, "judgments": judgments}
