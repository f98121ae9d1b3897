"""The params file: its schema (``ExperimentParams``) and reading it (errors name the file, the
key and the fix). Relative paths in a params file are resolved against its folder (``Experiment``
in ``cocoeval.run.stages``)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

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
from cocoeval.core.errors import ConfigError, InputError
from cocoeval.core.jsonio import read_text
from cocoeval.core.names import check_name
from cocoeval.judge.config import AnyJudge, EnsembleConfig, JudgeConfig
from cocoeval.judge.probes import ProbeSection
from cocoeval.llm import LLMConfig, parse_model_spec
from cocoeval.simulate.plugins import PluginSetup, check_setup
from cocoeval.simulate.setup import AnySetup
from cocoeval.simulate.sft import SFTConfig

from .compose import SET_HINT, Composed, ParamsSource, compose
from .stopping import StoppingSection

__all__ = [
    "AnnotationDraw",
    "AnnotationSection",
    "BuildSection",
    "ExperimentParams",
    "InstanceSelection",
    "ParamsFile",
    "StoppingSection",
    "check_plugins",
    "read_params",
    "read_params_file",
]


class InstanceSelection(BaseModel):
    """Which instances of the benchmark the run uses."""

    model_config = ConfigDict(extra="forbid")

    split: Literal["eval", "train"] = "eval"
    per_dataset: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    """At most this many per dataset, in id order (None: all; at most 1,000,000)."""
    datasets: list[str] | None = None
    """Only these datasets (None: all)."""
    ids: list[str] | None = None
    """Only these instance ids."""


class AnnotationDraw(BaseModel):
    """One task's draw of conversations for blind human annotation (``cocoeval annotate-export
    PARAMS.yaml``; paper Appendix B.1). A conversation is one target of one instance: the human
    reference or a setup's continuation."""

    model_config = ConfigDict(extra="forbid")

    setups: list[str] = Field(min_length=1)
    """The setups whose continuations are annotated beside the human reference: each drawn instance
    is annotated once per target (the reference and each of these). B.1: overall, GPT-4.1 and
    GPT-4.1 SFT at 30 turns per call; fine-grained, GPT-4.1 at 30 turns per call. A name the run
    has no continuations of is an error at export, never skipped."""
    conversations: int = Field(ge=1, le=1_000_000, strict=True)
    """Conversations to annotate, instances x targets (B.1: 54 overall = 18 instances x 3 targets,
    36 fine-grained = 18 x 2); the instances drawn are this number divided by the targets."""
    even_over_datasets: bool = True
    """Draw the instances evenly over the source datasets present (B.1: "evenly sampled from
    instances created from the six source datasets"); false: at random over every instance that
    has every target. Whatever keeps a draw from being even is printed and kept in export.json."""
    seed: int | None = Field(None, strict=True)
    """Seed of this task's draw (None: the section's ``seed``)."""


class AnnotationSection(BaseModel):
    """The ``annotation:`` section: the draws ``cocoeval annotate-export PARAMS.yaml`` makes, per
    task (the command's options override single fields). A task left out is not exported."""

    model_config = ConfigDict(extra="forbid")

    seed: int = Field(0, strict=True)
    """Seed of the draws (where a task gives none) and of the items' shuffled order."""
    overall: AnnotationDraw | None = None
    """The overall task: 1–10 consistency and collaborativeness per conversation (None: none)."""
    fine_grained: AnnotationDraw | None = None
    """The fine-grained task: the behaviours of every judged turn (None: none)."""

    @model_validator(mode="after")
    def _some_task(self) -> AnnotationSection:
        if self.overall is None and self.fine_grained is None:
            raise ValueError("give at least one task (overall, fine_grained), or leave annotation: out")
        return self


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
    setups: list[AnySetup] = Field(default_factory=list)
    """Simulator setups: the paper's (``model:``), a plugin's (``simulator:``) or imported
    continuations (``continuations:``); see ``cocoeval.simulate.setup``."""
    judges: list[AnyJudge] = Field(default_factory=list)
    """Judges: {name, model, kind: [overall, fine_grained], ...}; each judges every reference
    and every ok continuation. An ensemble (beyond the paper), {name, ensemble: [judge names],
    kind: [...]}, combines the judgments of other judges of this list (``EnsembleConfig``)."""
    llm: LLMConfig = Field(default_factory=LLMConfig)
    """Runner, cache and price settings."""
    sft: SFTConfig = Field(default_factory=SFTConfig)
    """The SFT training set and job (``cocoeval sft-export PARAMS.yaml``; A.4 defaults)."""
    taxonomy: str | None = None
    """A taxonomy YAML (None: the default)."""
    annotation: AnnotationSection | None = None
    """The draws of ``cocoeval annotate-export PARAMS.yaml`` (B.1: 54 overall, 36 fine-grained
    conversations); None: the command's options (the same numbers, every setup of the run)."""
    probes: ProbeSection | None = None
    """The judge probes ``cocoeval probe PARAMS`` sends and ``cocoeval estimate`` forecasts (beyond
    the paper; ``cocoeval.judge.probes.ProbeSection``); None: no probes."""
    stopping: StoppingSection | None = None
    """Stop each setup once its comparison with the humans is settled (beyond the paper;
    ``cocoeval.run.stopping``): instances in rounds of source conversations, an anytime-valid
    confidence sequence after each round; None: every selected instance for every setup."""

    @property
    def llm_judges(self) -> list[JudgeConfig]:
        """The judges that call a model (every judge but the ensembles)."""
        return [j for j in self.judges if isinstance(j, JudgeConfig)]

    @property
    def ensembles(self) -> list[EnsembleConfig]:
        """The judge ensembles, combined from their members' judgments with no call."""
        return [j for j in self.judges if isinstance(j, EnsembleConfig)]

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

    @model_validator(mode="after")
    def _model_specs(self) -> ExperimentParams:
        """Every model spec names a known provider and a model (PROVIDER/MODEL): a bad one is an
        error of the params file, found when it is read, not a problem of readiness. A plugin's
        setup names its models through the plugin, asked after the schema (``check_plugins``)."""
        specs = [
            (f"setups[{i}].{f}", m)
            for i, s in enumerate(self.setups)
            if not isinstance(s, PluginSetup)
            for f, m in s.model_specs().items()
        ]
        specs += [(f"judges[{i}].model", j.model) for i, j in enumerate(self.judges) if isinstance(j, JudgeConfig)]
        ctx = self.build.context if self.build else None
        specs += [(f"build.context.{f}", m) for f in ("metadata", "summary", "clean") if ctx and (m := getattr(ctx, f))]
        if problems := _spec_problems(specs):
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _ensembles_and_probes(self) -> ExperimentParams:
        """An ensemble's members are LLM judges of this file that make each of its kinds; the
        probes' judges are LLM judges of this file."""
        llm = {j.name: j for j in self.llm_judges}
        ens = {e.name for e in self.ensembles}
        problems = []
        for i, e in enumerate(self.judges):
            if not isinstance(e, EnsembleConfig):
                continue
            for m in e.ensemble:
                if m in ens:
                    problems.append(f"judges[{i}].ensemble: {m!r} is an ensemble; members are LLM judges")
                elif m not in llm:
                    problems.append(
                        f"judges[{i}].ensemble: no judge named {m!r} in judges (LLM judges: {', '.join(llm) or 'none'})"
                    )
                elif lack := [k for k in e.kind if k not in llm[m].kind]:
                    problems.append(
                        f"judges[{i}].ensemble: judge {m!r} does not make {', '.join(lack)} "
                        f"judgments (its kind: {', '.join(llm[m].kind)}); give the ensemble only "
                        "kinds every member makes"
                    )
        if self.probes is not None:
            for name in self.probes.judges or []:
                if name not in llm:
                    problems.append(
                        f"probes.judges: no LLM judge named {name!r} in judges "
                        f"({', '.join(llm) or 'none'}; ensembles make no call and are not probed)"
                    )
        if self.stopping is not None:
            fine = [j.name for j in self.llm_judges if "fine_grained" in j.kind]
            if self.stopping.judge is not None and self.stopping.judge not in fine:
                problems.append(
                    f"stopping.judge: no LLM judge named {self.stopping.judge!r} makes fine-grained judgments "
                    f"(those that do: {', '.join(fine) or 'none'})"
                )
            elif not fine:
                problems.append(
                    "stopping: the rule reads fine-grained judgments, and no LLM judge in judges makes them "
                    "(give a judge with kind: [fine_grained], or leave stopping: out)"
                )
            capped = [x.name for x in [*self.setups, *self.judges] if getattr(x, "max_per_dataset", None) is not None]
            if capped:
                problems.append(
                    f"stopping: max_per_dataset is set on {', '.join(capped)}; under stopping: the rounds choose the "
                    "instances (a cap per round would be another selection each round). Cap the selection with "
                    "instances: per_dataset: instead, or leave stopping: out"
                )
        if problems:
            raise ValueError("; ".join(problems))
        for e in self.ensembles:
            e.resolve([llm[m] for m in e.ensemble])
        return self


def _spec_problems(specs: list[tuple[str, str]]) -> list[str]:
    """What is wrong with each (params key, model spec), as ``key: problem (fix)``."""
    problems = []
    for where, spec in specs:
        try:
            parse_model_spec(spec)
        except ConfigError as e:
            problems.append(f"{where}: {e.message}" + (f" ({e.hint})" if e.hint else ""))
    return problems


def check_plugins(params: ExperimentParams) -> list[str]:
    """What is wrong with the plugin setups of ``params``, as ``key: problem (fix)`` (empty: none),
    each setup's options filled with its plugin's defaults (``plugins.check_setup``: they enter its
    id). The plugins' code runs here, bounded in time, after the schema is validated and never
    inside it: an unknown simulator, a plugin that cannot be loaded or breaks the contract, options
    it refuses and the models it names are errors of the params file all the same."""
    problems = []
    for i, s in enumerate(params.setups):
        if not isinstance(s, PluginSetup):
            continue
        try:
            check_setup(s)
            specs = [(f"setups[{i}].{f}", m) for f, m in s.model_specs().items()]
        except ConfigError as e:
            problems.append(f"setups.{i}: {e.message}" + (f" ({e.hint})" if e.hint else ""))
            continue
        problems += _spec_problems(specs)
    return problems


def _loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """An error's location without the setup kind pydantic puts in (setups.0.simulated.model)."""
    if len(loc) > 2 and loc[0] == "setups" and loc[2] in ("simulated", "plugin", "imported"):
        return loc[:2] + loc[3:]
    if len(loc) > 2 and loc[0] == "judges" and loc[2] in ("llm", "ensemble"):
        return loc[:2] + loc[3:]
    return loc


_FIX = "fix these keys; see params/demo.yaml for the shape; fields are documented in cocoeval/run/params.py"


@dataclass(frozen=True)
class ParamsFile:
    """A params file as read: its validated ``params`` and what made them, the ``files`` read (the
    one named first, then each it ``extends:``, with their SHA-256) and the ``--set`` overrides
    (``sets``), which the run's manifest records."""

    params: ExperimentParams
    files: tuple[ParamsSource, ...]
    sets: tuple[str, ...] = ()


def read_params(path: str | Path, sets: tuple[str, ...] | list[str] = ()) -> ExperimentParams:
    """Read and validate a params file (the files it extends merged under it, ``sets``, the
    ``--set KEY=VALUE`` overrides, on top: ``cocoeval.run.compose``); errors name the file or the
    flag, the key and the fix."""
    return read_params_file(path, sets).params


def read_params_file(
    path: str | Path, sets: tuple[str, ...] | list[str] = (), *, text: str | None = None
) -> ParamsFile:
    """``read_params`` with the files read and the overrides (``ParamsFile``); ``text``: the
    named file's text, when given (an edit not yet written)."""
    p = Path(path)
    composed = compose(p, tuple(sets), text=text)
    try:
        params = ExperimentParams.model_validate(composed.data)
    except ValidationError as e:
        raise _invalid(e, composed) from None
    if problems := check_plugins(params):
        raise InputError("; ".join(problems[:5]), file=str(p), hint=_FIX)
    return ParamsFile(params, composed.files, composed.sets)


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation may hold (through lists, unions, Annotated)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for a in get_args(tp) for m in _models_in(a)]


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the schema accepts beside the last key of ``loc`` (for "did you mean")."""
    models: list[type[BaseModel]] = [ExperimentParams]
    for step in loc[:-1]:
        if isinstance(step, str):
            models = [m for c in models if (f := c.model_fields.get(step)) for m in _models_in(f.annotation)]
    return sorted({k for m in models for k in m.model_fields})


def _invalid(e: ValidationError, composed: Composed) -> InputError:
    """The schema's errors (the first five) as one InputError naming where each key was written:
    the file named on the command line, a file it extends or a ``--set`` flag; an unknown key
    with the known keys it is closest to."""
    import difflib

    rows = []
    for err in e.errors()[:5]:
        loc = _loc(err["loc"])
        msg = f"{'.'.join(str(x) for x in loc) or '(top)'}: {err['msg'].removeprefix('Value error, ')}"
        if (
            err["type"] == "extra_forbidden"
            and loc
            and isinstance(loc[-1], str)
            and (near := difflib.get_close_matches(loc[-1], _keys_at(loc), n=3))
        ):
            msg += f" (did you mean {' or '.join(near)}?)"
        rows.append((composed.origin(loc), msg))
    top = str(composed.files[0].path)
    sources = list(dict.fromkeys(src for src, _ in rows))
    file = sources[0] if len(sources) == 1 else top
    text = "; ".join(m if src == file else f"{m} (written by {src})" for src, m in rows)
    hint = _FIX
    if file.startswith("--set "):
        hint = "fix the key or the value after --set; " + SET_HINT
    elif file != top:
        file = f"{file} (extended by {top})"
    elif len(composed.files) > 1:
        file = f"{top} (extending {', '.join(str(f.path) for f in composed.files[1:])})"
    return InputError(text, file=file, hint=hint)


def _relative_continuations(entry: dict[str, Any], params_path: Path) -> dict[str, Any]:
    """``entry`` with an absolute ``continuations:`` path (an imported setup) written relative to
    the params file's folder, where relative paths are read from, so that the params file and its
    import file can be moved or shared together; kept absolute when the two have nothing but the
    file system's root in common (another drive, or a path climbing out of every folder)."""
    c = entry.get("continuations")
    if not isinstance(c, str) or not Path(c).is_absolute():
        return entry
    base = params_path.resolve().parent
    try:
        common = Path(os.path.commonpath([Path(c), base]))
        rel = os.path.relpath(c, base)
    except ValueError:  # another drive
        return entry
    if common == common.parent:  # only the root in common
        return entry
    return {**entry, "continuations": Path(rel).as_posix()}


def add_setup(path: str | Path, entry: dict[str, Any]) -> ExperimentParams:
    """Add the setup ``entry`` to the ``setups:`` of the params file at ``path``, keeping the rest
    of the file (its comments and layout) as it is: one line is inserted after the last item of
    the top-level block list (``setups:`` is appended when the file has none). An absolute
    ``continuations:`` path is written relative to the file's folder where it can be
    (``_relative_continuations``). A file that ``extends:`` another gets the setup in its own
    ``setups:``, never in the file it extends; it is appended after the merged setups (a name the
    extended file has would replace that setup, and is refused). The new text must read back as
    the old params plus exactly this setup, else nothing is written (an InputError with the line
    to add by hand)."""
    import re

    from cocoeval.core.jsonio import write_atomic

    p = Path(path)
    old = read_params(p)
    entry = _relative_continuations(entry, p)
    line = yaml.safe_dump(entry, default_flow_style=True, width=10**9, sort_keys=False).strip()
    by_hand = InputError(
        "cannot add the setup to this file's setups: by itself",
        file=str(p),
        hint=f"add this item to setups: by hand: - {line}",
    )
    text = read_text(p)
    lines = text.splitlines(keepends=True)
    head = [i for i, x in enumerate(lines) if re.match(r"setups:\s*(#.*)?$", x.rstrip("\n"))]
    if len(head) > 1:
        raise by_hand
    if head:
        end, indent = head[0], None
        for i in range(head[0] + 1, len(lines)):
            x = lines[i].rstrip("\n")
            if not x.strip() or x.lstrip().startswith("#"):
                continue
            if not x[0].isspace() and not x.startswith("-"):
                break
            if indent is None and (m := re.match(r"(\s*)- ", x)):
                indent = m.group(1)
            end = i
        lines.insert(end + 1, f"{'  ' if indent is None else indent}- {line}\n")
        if not lines[end].endswith("\n"):
            lines[end] += "\n"
        new = "".join(lines)
    elif re.search(r"^setups:", text, flags=re.M):  # setups: [] or another flow form
        if not re.search(r"^setups:\s*\[\s*\]\s*(#.*)?$", text, flags=re.M):
            raise by_hand
        new = re.sub(r"^setups:\s*\[\s*\]", f"setups:\n  - {line}", text, count=1, flags=re.M)
    else:
        new = text + ("" if text.endswith("\n") else "\n") + f"setups:\n  - {line}\n"
    try:
        data = compose(p, text=new).data  # with the files it extends: the setup joins this file's own
        params = ExperimentParams.model_validate(data)
        alone = ExperimentParams.model_validate({**data, "setups": [entry]})
    except (yaml.YAMLError, ValidationError, InputError) as e:
        raise InputError(
            f"the setup does not fit this file: {e}", file=str(p), hint=f"add this item to setups: by hand: - {line}"
        ) from None
    if problems := check_plugins(params) + check_plugins(alone):
        raise InputError(
            f"the setup does not fit this file: {'; '.join(problems[:5])}",
            file=str(p),
            hint=f"add this item to setups: by hand: - {line}",
        )
    want = [*old.model_dump(mode="json")["setups"], alone.model_dump(mode="json")["setups"][0]]
    if params.model_dump(mode="json")["setups"] != want or (
        params.model_dump(mode="json", exclude={"setups"}) != old.model_dump(mode="json", exclude={"setups"})
    ):
        raise by_hand
    write_atomic(p, new)
    return params
