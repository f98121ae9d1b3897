"""The run directory, typed: ``Run.open(path)`` reads what ``cocoeval run`` wrote.

A run directory holds ``manifest.json`` (``Manifest``: package version, git revision, params,
taxonomy hash, prompt versions, setup and judge ids, status, summary), ``instances.jsonl``,
``continuations/<setup>.jsonl``, ``judgments/<judge>.jsonl``, the human annotators' stores
``judgments/human/<annotator>.jsonl`` and ``usage.json``. Every consumer (analyses, report,
notebooks, annotation, widgets) takes a ``Run``.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cocoeval.core.errors import InputError, NotFoundError
from cocoeval.core.jsonio import read_json, read_models, write_json
from cocoeval.core.schema import Continuation, Instance, Judgment
from cocoeval.judge.config import JudgeConfig
from cocoeval.simulate.setup import Setup

from .humans import read_human_stores

if TYPE_CHECKING:
    from cocoeval.llm import Runner

HUMAN_PREFIX = "human:"
PIPELINE_LABEL = "pipeline-check"


class Manifest(BaseModel):
    """``manifest.json``: what a run is (spec), which code made it (revision) and how it went
    (status, summary). Unknown keys are kept (a newer cocoeval may write more)."""

    model_config = ConfigDict(extra="allow")

    cocoeval_version: str | None = None
    git_revision: str | None = None
    params_file: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    """The params as loaded (``ExperimentParams`` dumped to JSON)."""
    taxonomy: dict[str, Any] = Field(default_factory=dict)
    """``{"name", "hash"}`` of the taxonomy the run used."""
    prompts: dict[str, Any] = Field(default_factory=dict)
    setups: dict[str, str] = Field(default_factory=dict)
    """{setup name: setup id}."""
    judges: dict[str, dict[str, str]] = Field(default_factory=dict)
    """{judge name: {kind: judge id}}."""
    status: str | None = None
    """``running`` or ``complete``."""
    started: str | None = None
    finished: str | None = None
    llm_mode: dict[str, Any] | None = None
    instances: int | None = None
    stages: list[str] | None = None
    summary: dict[str, Any] = Field(default_factory=dict)
    """Per stage what ended ok / invalid / failed, and ``warnings``."""

    @property
    def setup_params(self) -> list[dict[str, Any]]:
        """The ``setups:`` of the params, as written into the manifest."""
        return list(self.params.get("setups") or [])

    @property
    def pipeline_check(self) -> bool:
        """Whether the params say ``label: pipeline-check`` (a tiny model: not results)."""
        return self.params.get("label") == PIPELINE_LABEL

    def get(self, key: str, default: Any = None) -> Any:
        """Deprecated dict-style access (``manifest.get("params")``); use the attributes."""
        return self.model_dump().get(key, default)

    def __getitem__(self, key: str) -> Any:
        """Deprecated dict-style access (``manifest["params"]``); use the attributes."""
        data = self.model_dump()
        if key not in data:
            raise KeyError(key)
        return data[key]


class Run(BaseModel):
    """A run directory in memory: manifest, instances, continuations by setup, LLM judgments by
    judge and human annotations by annotator. ``Run.open(path)`` reads one; tests and notebooks
    may build one from parts (a ``judgments`` key ``human:<annotator>`` goes to ``human``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: Path | None = None
    manifest: Manifest = Field(default_factory=Manifest)
    instances: list[Instance] = Field(default_factory=list)
    continuations: dict[str, list[Continuation]] = Field(default_factory=dict)
    judgments: dict[str, list[Judgment]] = Field(default_factory=dict)
    """{LLM judge name: its judgments}."""
    human: dict[str, list[Judgment]] = Field(default_factory=dict)
    """{annotator: their judgments} (``judgments/human/<annotator>.jsonl``)."""

    @model_validator(mode="before")
    @classmethod
    def _split_human(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("judgments"), dict):
            js = data["judgments"]
            human = {k[len(HUMAN_PREFIX):]: v for k, v in js.items() if k.startswith(HUMAN_PREFIX)}
            if human:
                data = {**data, "judgments": {k: v for k, v in js.items() if not k.startswith(HUMAN_PREFIX)},
                        "human": {**(data.get("human") or {}), **human}}
        return data

    @classmethod
    def open(cls, path: str | Path) -> Run:
        """Read a run directory; a missing folder or a bad file is an error naming it."""
        d = Path(path)
        if not d.is_dir():
            raise NotFoundError(f"no run directory at {d}" + (" (it is a file)" if d.exists() else ""),
                                hint="give a folder written by cocoeval run")
        conts = {p.stem: read_models(p, Continuation) for p in sorted((d / "continuations").glob("*.jsonl"))}
        judgments = {p.stem: read_models(p, Judgment) for p in sorted((d / "judgments").glob("*.jsonl"))}
        human = {k[len(HUMAN_PREFIX):]: v for k, v in read_human_stores(d).items()}
        raw = read_json(d / "manifest.json")
        if not isinstance(raw, dict):
            raise InputError("expected a JSON object", file=str(d / "manifest.json"),
                             hint="the manifest is written by cocoeval run; run it again")
        try:
            manifest = Manifest.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            raise InputError(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}", file=str(d / "manifest.json"),
                             hint="the manifest is written by cocoeval run; run it again") from None
        return cls(path=d, manifest=manifest, instances=read_models(d / "instances.jsonl", Instance),
                   continuations=conts, judgments=judgments, human=human)

    def stale_reason(self, name: str, item: Continuation | Judgment) -> str | None:
        """Why a continuation of setup ``name`` or a judgment of LLM judge ``name`` is stale: it
        was made with other settings than the manifest's setup or judge id (the params changed
        after its stage ran: only the other stage was run again, or the run stopped before it
        rewrote the file). None when it is current or the manifest does not say."""
        if isinstance(item, Continuation):
            have, want, what = item.setup_id, self.manifest.setups.get(name), "simulated with other setup settings"
        else:
            have, what = item.judge_id, "made with other judge settings"
            want = (self.manifest.judges.get(name) or {}).get(item.kind)
        return None if want is None or have == want else f"{what} (id {have}; the run's params give {want})"

    def setup_configs(self) -> list[Setup] | None:
        """The setups of the manifest's params, read for what selects instances (name, kind,
        datasets, max_per_dataset); None when the params do not say (a Run built from parts)."""
        return _configs(self, "setups", Setup)

    def judge_configs(self) -> list[JudgeConfig] | None:
        """The judges of the manifest's params, read as ``setup_configs`` reads the setups."""
        return _configs(self, "judges", JudgeConfig)

    @property
    def current_continuations(self) -> dict[str, list[Continuation]]:
        """``continuations`` without the stale ones (``stale_reason``): what statistics count."""
        return {name: [c for c in cs if self.stale_reason(name, c) is None] for name, cs in self.continuations.items()}

    @property
    def all_judgments(self) -> dict[str, list[Judgment]]:
        """LLM judges by name, then every annotator as ``human:<annotator>`` (the judge name
        the frames and figures use)."""
        return {**self.judgments, **{f"{HUMAN_PREFIX}{a}": js for a, js in self.human.items()}}

    def __getitem__(self, key: str) -> Any:
        """Deprecated: the old ``read_run`` dict access (``run["judgments"]`` includes the
        ``human:<annotator>`` entries). Use the attributes; kept for external notebooks."""
        warnings.warn(f'run["{key}"] is deprecated; use run.{key if key != "judgments" else "all_judgments"}',
                      DeprecationWarning, stacklevel=2)
        if key == "judgments":
            return self.all_judgments
        if key in ("manifest", "instances", "continuations"):
            return getattr(self, key)
        raise KeyError(key)


def _configs(run: Run, key: str, cls: type[BaseModel]) -> list[Any] | None:
    """The setups or judges of the manifest's params, read for what selects instances (name,
    kind, datasets, max_per_dataset); None when the params do not say (a Run built from parts)."""
    params, file = run.manifest.params, str(run.path / "manifest.json") if run.path else "manifest.json"
    items = params.get(key) if isinstance(params, dict) else None
    if items is None:
        return None
    out = []
    for i, d in enumerate(items if isinstance(items, list) else [items]):
        try:
            if not isinstance(d, dict):
                raise TypeError("not a mapping")
            keep = {k: d[k] for k in ("name", "kind", "datasets", "max_per_dataset") if k in d}
            out.append(cls.model_validate({"model": str(d.get("model", "?")), **keep}))
        except (TypeError, ValidationError) as e:
            why = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
            raise InputError(f"cannot tell which instances it selects: {why}", file=file,
                             record=f"params.{key}[{i}]",
                             hint="the manifest is written by cocoeval run; run the params file again") from None
    return out



def read_run(run_dir: str | Path) -> Run:
    """Deprecated name of ``Run.open``."""
    return Run.open(run_dir)


# ----------------------------------------------------------------------------- writing
def now() -> str:
    """The time stamps of the manifest: UTC, seconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def git_revision() -> str | None:
    """The git revision of the cocoeval checkout, when it is one."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    """``manifest.json``, atomically, with the keys that were given (a running run has no summary)."""
    write_json(run_dir / "manifest.json", manifest.model_dump(mode="json", exclude_unset=True))


PAID_FIELDS = ("cost_usd", "lost_cost_usd", "cost_unknown_calls", "failed", "input_tokens", "cached_input_tokens",
               "cache_write_tokens", "output_tokens", "reasoning_tokens", "lost_attempts", "lost_input_tokens")
"""The ledger totals that say what an invocation paid (summed over invocations in ``all_invocations``)."""


def write_usage(run_dir: Path, runner: Runner) -> None:
    """``usage.json``: this invocation's ledger rows and totals (what it paid; cached answers it
    re-used in ``reused_*``, not paid again), cache statistics and request counts, the totals of
    the earlier invocations on this run directory (``earlier_invocations``, from the usage.json it
    replaces) and what all of them paid together (``all_invocations``: an invocation killed
    before it could write usage.json is missing from it)."""
    path = run_dir / "usage.json"
    earlier: list[dict[str, Any]] = []
    try:
        prev = read_json(path) if path.exists() else None
    except Exception:  # an unreadable file from before: named, never a crash at the end of a run
        prev, earlier = None, [{"unreadable": str(path)}]
    if isinstance(prev, dict) and isinstance(prev.get("totals"), dict):
        earlier = [e for e in prev.get("earlier_invocations") or [] if isinstance(e, dict)]
        earlier.append({k: prev.get(k) for k in ("written", "totals", "requests_sent", "requests_batched")})
    totals = runner.ledger.totals()
    paid = [e for e in earlier if isinstance(e.get("totals"), dict)]
    everything = {k: totals[k] + sum(e["totals"].get(k, 0) for e in paid) for k in PAID_FIELDS}
    everything.update(invocations=len(paid) + 1, requests_sent=runner.sent + sum(e.get("requests_sent") or 0 for e in paid),
                      requests_batched=runner.batched + sum(e.get("requests_batched") or 0 for e in paid))
    write_json(path, {"rows": runner.ledger.rows(), "totals": totals, "cache": runner.cache.stats(),
                      "requests_sent": runner.sent, "requests_batched": runner.batched, "written": now(),
                      "earlier_invocations": earlier, "all_invocations": everything})
