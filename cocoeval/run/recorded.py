"""The params as a run recorded them (``Manifest.params``), typed for reading back.

``cocoeval run`` writes ``ExperimentParams.model_dump(mode="json")`` into ``manifest.json``. Reading
a run must never fail because the params schema moved on since (an old run's setup may lack a key
today's setups require, a newer cocoeval may write keys this one does not know), so the recorded
params are not the strict ``ExperimentParams``: ``RecordedParams`` types only the fields cocoeval
reads back (the setups, the judges, the label, the benchmark, the instance selection, the stopping
rule), every one optional, and keeps every other key as it was (``extra="allow"``). A recorded
model dumps only the keys it was given (``_Recorded``), so a manifest read and written again has
the same bytes.

The field names are those of the params models (``Setup``, ``PluginSetup``, ``ImportedSetup``,
``JudgeConfig``, ``EnsembleConfig``, ``BuildSection``, ``InstanceSelection``, ``ExperimentParams``):
tests/run/test_recorded_params.py checks that each recorded field is a field of one of them, so
the two cannot drift apart unnoticed."""

from __future__ import annotations

from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

__all__ = ["RecordedBuild", "RecordedInstances", "RecordedJudge", "RecordedParams", "RecordedSetup"]


class _Recorded(BaseModel):
    """A record read back from a manifest: unknown keys kept, and dumped with exactly the keys it
    was given, in the order given (a field it was not given is not written back as null or a
    default; the report shows the params in their recorded order)."""

    model_config = ConfigDict(extra="allow")

    _order: tuple[str, ...] = PrivateAttr(default=())
    """The keys of the mapping it was read from, in their order."""

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        made = handler(data)
        if isinstance(data, dict):
            made._order = tuple(data)
        return made

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if not isinstance(out, dict):
            return out
        given = self.model_fields_set | set(self.model_extra or {})
        keys = [k for k in self._order if k in out] + [k for k in out if k not in self._order]
        return {k: out[k] for k in keys if k in given}


class RecordedSetup(_Recorded):
    """A setup of the recorded params (``cocoeval.simulate.setup``: ``Setup``, ``PluginSetup`` or
    ``ImportedSetup`` dumped): its name, what made its continuations and the settings the report
    shows. Fields a kind of setup lacks are None."""

    name: str
    """The setup's name: its continuations are ``continuations/<name>.jsonl``."""
    source: str | None = None
    """``simulated``, ``plugin`` or ``imported`` (recorded since the setups had kinds; absent in
    older manifests, where the keys ``simulator:`` and ``continuations:`` tell it)."""
    kind: str | None = None
    """``multiparty`` or ``human_ai`` (None: not recorded, read as multiparty)."""
    datasets: list[str] | None = None
    """Only instances of these datasets were simulated (None: every compatible instance)."""
    max_per_dataset: int | None = Field(None, strict=True)
    """Only the first N instances of each dataset were simulated (None: all)."""
    model: str | None = None
    """The simulator's model spec (a plugin's, or the system that wrote imported continuations)."""
    prompt: str | None = None
    """The simulation prompt (a simulated setup)."""
    turns_per_call: int | None = Field(None, strict=True)
    """k: turns generated per call (a simulated setup)."""
    max_tokens_per_turn: int | None = Field(None, strict=True)
    """The output budget per requested turn (a simulated setup; None: not recorded)."""
    n_copy: int | None = Field(None, strict=True)
    """copy_then_continue: how many recent turns the model copied first (None: not recorded)."""
    simulator: str | None = None
    """A plugin setup's simulator (e.g. ``agents``)."""
    options: dict[str, Any] | None = None
    """A plugin setup's options (with the plugin's defaults), e.g. the agents' ``policy``."""
    continuations: str | None = None
    """An imported setup's JSONL file, as the params named it."""
    description: str | None = None
    """What made an imported setup's continuations, as the params described it."""


class RecordedJudge(_Recorded):
    """A judge of the recorded params (``JudgeConfig`` or ``EnsembleConfig`` dumped)."""

    name: str
    """The judge's name: its judgments are ``judgments/<name>.jsonl``."""
    model: str | None = None
    """The judge's model spec (None: an ensemble, which calls no model)."""
    kind: list[str] | None = None
    """The judgments it makes (``overall``, ``fine_grained``); checked when its instances are
    selected (``rundir.Run.judge_configs``), not when the run is opened."""
    ensemble: list[str] | None = None
    """An ensemble's member judges."""
    datasets: list[str] | None = None
    """Only instances of these datasets were judged (None: every instance)."""
    max_per_dataset: int | None = Field(None, strict=True)
    """Only the first N instances of each dataset were judged (None: all)."""
    samples: int | None = Field(None, strict=True)
    """Answers asked per target (``JudgeConfig.samples``; None: one)."""


class RecordedBuild(_Recorded):
    """The ``build:`` section of the recorded params (``BuildSection`` dumped)."""

    demo_data: bool | None = None
    """Whether the benchmark includes cocoeval's demo data (its generated conversations are not
    human data: the report says so)."""
    sources: list[str] | None = None
    """The KIND:PATH[#DATASET] sources the benchmark was built from."""


class RecordedInstances(_Recorded):
    """The ``instances:`` selection of the recorded params (``InstanceSelection`` dumped)."""

    split: str | None = None
    """The split the run used (``eval`` or ``train``)."""
    per_dataset: int | None = Field(None, strict=True)
    """At most this many instances per dataset (None: all)."""
    datasets: list[str] | None = None
    """Only these datasets (None: all)."""
    ids: list[str] | None = None
    """Only these instance ids (None: all)."""


class RecordedParams(_Recorded):
    """``manifest.json``'s ``params``: the params a run was made with, as recorded. Only the fields
    cocoeval reads back are typed, each optional; every other key (``llm``, ``sft``,
    ``annotation``, ``probes``..., or a key of a newer cocoeval) is kept as it was."""

    name: str | None = None
    """The run's name."""
    label: str | None = None
    """``pipeline-check``: a tiny model, not results (``Manifest.pipeline_check``)."""
    bench: str | None = None
    """The benchmark folder the run read (None: built by ``build:``)."""
    build: RecordedBuild | None = None
    """How the benchmark was built into the run (None: it read ``bench:``)."""
    instances: RecordedInstances | None = None
    """Which instances of the benchmark the run selected."""
    setups: list[RecordedSetup] | None = None
    """The simulator setups, in the params' order (None: the params do not say, e.g. a Run built
    from parts; an empty list: none)."""
    judges: list[RecordedJudge] | None = None
    """The judges, in the params' order (None: the params do not say)."""
    stopping: dict[str, Any] | None = None
    """The ``stopping:`` section as recorded (None: every selected instance for every setup); read
    with ``run.stopping.StoppingSection`` where its rounds are needed."""
