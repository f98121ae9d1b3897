"""The params file: its schema (``ExperimentParams``) and reading it (errors name the file, the
key and the fix). Relative paths in a params file are resolved against its folder (``Experiment``
in ``cocoeval.run.stages``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from cocoeval.bench.config import BuildSection
from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import read_text
from cocoeval.core.names import check_name
from cocoeval.judge.config import JudgeConfig
from cocoeval.llm import LLMConfig
from cocoeval.simulate.setup import Setup
from cocoeval.simulate.sft import SFTConfig

__all__ = ["BuildSection", "ExperimentParams", "InstanceSelection", "read_params"]


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
    """Run name, a safe file name (``cocoeval.core.names``); the run directory defaults to runs/<name>
    beside the params folder."""
    out: str | None = None
    """Run directory."""
    label: Literal["pipeline-check"] | None = None
    """``pipeline-check``: the run only shows that the pipeline works (a tiny model, as in the demo);
    its judge-based figures, tables and notebook headers say "pipeline check — tiny model, not
    results" (carried into the manifest with the params)."""
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
    sft: SFTConfig = Field(default_factory=SFTConfig)
    """The SFT training set and job (``cocoeval sft-export PARAMS.yaml``; A.4 defaults)."""
    taxonomy: str | None = None
    """A taxonomy YAML (None: the default)."""

    @field_validator("name")
    @classmethod
    def _run_name(cls, v: str) -> str:
        problem = check_name(v, "run")
        if problem:
            raise ValueError(f"run name {problem} (without out:, the run directory is runs/<name>)")
        return v

    @field_validator("setups", "judges")
    @classmethod
    def _names(cls, items: list[Any], info: ValidationInfo) -> list[Any]:
        """Names become file names (continuations/<setup>.jsonl, judgments/<judge>.jsonl): each a
        safe file-name component, unique (ignoring case, as some file systems do)."""
        key, kind = str(info.field_name), str(info.field_name)[:-1]
        problems = [f"{key}[{i}].name: {p}" for i, s in enumerate(items) if (p := check_name(s.name, kind))]
        seen = Counter(s.name.lower() for s in items)
        dup = sorted({s.name for s in items if seen[s.name.lower()] > 1})
        if dup:
            problems.append(f"{kind} names must be unique (ignoring case); repeated: {', '.join(dup)}")
        if problems:
            raise ValueError("; ".join(problems))
        return items

    @model_validator(mode="after")
    def _check(self) -> ExperimentParams:
        if (self.bench is None) == (self.build is None):
            raise ValueError("give exactly one of 'bench' (a built benchmark folder) or 'build'")
        return self


def read_params(path: str | Path) -> ExperimentParams:
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
        errs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg'].removeprefix('Value error, ')}"
                         for err in e.errors()[:5])
        raise InputError(errs, file=str(p), hint="fix these keys; see params/demo.yaml for the shape; "
                                                 "fields are documented in cocoeval/run/params.py") from None
    return params
