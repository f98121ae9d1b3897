"""Simulator plugins: a simulator written as a class, named in a setup as ``simulator: NAME``
(docs/extending.md walks through one).

A plugin derives ``Simulator`` and implements one async method, ``next_turns(ctx)``: it receives
the instance, the turns written so far and the LLM layer (``ctx.llm``), and returns the next
turns. It is registered by the ``@simulator("name")`` decorator inside cocoeval, or by an entry
point of the group ``cocoeval.simulators`` in another package (``name = "module:Class"``).

Its LLM calls go through the run's ``Runner``: the call cache, usage, cost, batch mode and resume
apply as to every other call. cocoeval drives every continuation's ``next_turns`` in rounds: all
calls the continuations await in a round are sent together, then each coroutine gets its answer.
So a plugin awaits only ``ctx.llm.generate`` / ``ctx.llm.generate_many`` (use ``generate_many``
for calls in parallel; ``asyncio`` primitives are not available inside it), and it must be
deterministic given its inputs and answers (draw random numbers from ``ctx.rng``): a killed run
re-runs the same coroutines, and every call they make again is answered from the cache.
"""

from __future__ import annotations

import ctypes
import inspect
import random
import threading
import traceback
from collections.abc import Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cocoeval.core.errors import ConfigError
from cocoeval.core.registry import NotOfKind, Registry, Unloadable
from cocoeval.core.schema import CallRecord, Continuation, Instance, Turn, participant_names
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.llm import Call, CallResult, GenerateRequest, Message
from cocoeval.prompts.parse import over_budget

from .setupbase import SetupBase, setup_hash
from .validity import continuation

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from cocoeval.core.taxonomy import Taxonomy

__all__ = [
    "ENTRY_POINT_GROUP",
    "SIMULATORS",
    "STEP_TIME_LIMIT_S",
    "CallFailed",
    "InvalidContinuation",
    "NoOptions",
    "PluginSetup",
    "Reply",
    "SimContext",
    "Simulator",
    "available_simulators",
    "check_setup",
    "get_simulator",
    "new_plugin",
    "plugin_call",
    "simulator",
]

ENTRY_POINT_GROUP = "cocoeval.simulators"
"""Other packages add simulators under this entry-point group: ``name = "module:SimulatorClass"``."""


class CallFailed(Exception):
    """An LLM call of the plugin failed (after the SDK's retries) or gave an unusable answer. Not
    caught, it ends the continuation invalid with this reason."""


class InvalidContinuation(Exception):
    """Raised by a plugin to end the continuation invalid, with the reason given."""


class NoOptions(BaseModel):
    """A plugin without options: any key in ``options:`` is an error."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Reply:
    """An LLM answer as a plugin sees it."""

    text: str
    finish_reason: str | None = None

    @property
    def truncated(self) -> bool:
        """The answer stopped at max_tokens (its end may be cut)."""
        return self.finish_reason in ("length", "max_tokens")


class _Await:
    """What a plugin's coroutine yields to cocoeval's round loop: the calls it waits for."""

    def __init__(self, calls: list[Call]) -> None:
        self.calls = calls

    def __await__(self) -> Generator[_Await, list[CallResult], list[CallResult]]:
        results = yield self
        return results


class LLM:
    """The LLM layer as a plugin sees it (``ctx.llm``): requests go through the run's runner."""

    def __init__(self, task: PluginTask) -> None:
        self._task = task

    def request(
        self,
        messages: Sequence[Message] | Sequence[tuple[str, str]],
        *,
        max_tokens: int,
        temperature: float | None = None,
        presence_penalty: float | None = None,
        attempt: int = 0,
    ) -> GenerateRequest:
        """A request: ``messages`` as ``Message`` or (role, content) pairs; ``attempt`` asks again
        with a new sample (a re-ask after an unusable answer; 0 to 99)."""
        msgs = [m if isinstance(m, Message) else Message(role=m[0], content=m[1]) for m in messages]
        return GenerateRequest(
            messages=msgs,
            max_tokens=max_tokens,
            temperature=temperature,
            presence_penalty=presence_penalty,
            sample=self._task.setup.sample * 100 + attempt,
        )

    async def generate(self, request: GenerateRequest, *, model: str | None = None, tag: str = "") -> Reply:
        """One call (``model``: default the setup's); raises ``CallFailed`` when it failed."""
        [reply] = await self.generate_many([request], model=model, tag=tag)
        return reply

    async def generate_many(
        self, requests: Sequence[GenerateRequest], *, model: str | None = None, tag: str = ""
    ) -> list[Reply]:
        """Several calls sent in the same round; raises ``CallFailed`` when one failed."""
        model = model or self._task.setup.model
        if not model:
            raise InvalidContinuation(
                f"simulator {self._task.setup.simulator!r} makes LLM calls, but setup "
                f"{self._task.setup.name!r} gives no model: add model: PROVIDER/MODEL"
            )
        task = self._task
        base = f"{task.inst.id}|{task.setup.name}|turn {len(task.turns) + 1}"
        calls = [
            Call(model=model, stage="simulate", tag=f"{base}{'|' + tag if tag else ''}", request=r, dependent=True)
            for r in requests
        ]
        results = await _Await(calls)
        out = []
        for call, res in zip(calls, results, strict=True):
            r = res.response
            if res.status != "ok" or r is None:
                raise CallFailed(
                    f"call failed at turn {len(task.turns) + 1}: {res.reason}"
                    + (f" ({res.detail})" if res.detail else "")
                )
            if too_long := over_budget(r.text, call.request.max_tokens):
                raise CallFailed(f"unusable answer at turn {len(task.turns) + 1}: {too_long}")
            out.append(Reply(text=r.text, finish_reason=r.finish_reason))
        return out


@dataclass
class SimContext:
    """What ``next_turns`` receives: the instance (M, S, x, the reference's length), the turns
    written so far, how many are still to write, the LLM layer, the plugin's options, a seeded
    random generator and a list of notes (kept with the continuation)."""

    instance: Instance
    turns: tuple[Turn, ...]
    remaining: int
    participants: list[str]
    """The participants' names: those of M, then any other speaker of the history."""
    llm: LLM
    options: Any
    rng: random.Random
    """Seeded by the setup's sample, the instance and the turn: the same on every re-run."""
    notes: list[str] = field(default_factory=list)

    @property
    def next_reference_speaker(self) -> str:
        """The speaker of the human reference's next turn (what an oracle turn-taking policy uses)."""
        return self.instance.reference[len(self.turns)].speaker


class Simulator:
    """The base class of a simulator plugin. Set ``Options`` to a pydantic model of the plugin's
    settings (``options:`` of the setup), ``version`` to a new value when the plugin's behaviour
    changes (it enters the setup id, so earlier continuations become stale), and implement
    ``next_turns``. ``prompt_refs`` names the prompt files that shape its calls (their versions
    enter the setup id too); ``forecast_reply`` is the answer ``cocoeval estimate`` stands in for
    a call (default: the reference's next turn as ``Speaker: text``)."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    Options: ClassVar[type[BaseModel]] = NoOptions
    needs_model: ClassVar[bool] = False
    """True: a setup of this plugin must give ``model:``."""

    def __init__(self, setup: PluginSetup, taxonomy: Taxonomy) -> None:
        self.setup = setup
        self.options: Any = self.Options.model_validate(setup.options)
        self.taxonomy = taxonomy

    @classmethod
    def check_options(cls, setup: PluginSetup) -> dict[str, Any]:
        """The setup's options checked against ``Options`` (defaults filled in: they enter the
        setup id); a ConfigError naming the bad keys."""
        if cls.needs_model and not setup.model:
            raise ConfigError(
                f"simulator {cls.name!r} calls a model: give model: PROVIDER/MODEL", hint="e.g. model: openai/gpt-4.1"
            )
        try:
            return cls.Options.model_validate(setup.options).model_dump(mode="json")
        except ValidationError as e:
            errs = "; ".join(
                f"options.{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors()[:5]
            )
            raise ConfigError(
                f"simulator {cls.name!r}: {errs}",
                hint=f"see the options of {cls.__module__}.{cls.__qualname__}.Options",
            ) from None

    @classmethod
    def prompt_refs(cls, setup: PluginSetup) -> dict[str, str]:
        """{prompt name: ``Prompt.ref``} of the prompt files the plugin's calls use (none by default)."""
        return {}

    @classmethod
    def model_specs(cls, setup: PluginSetup) -> dict[str, str]:
        """{key: model spec} of the models it calls, checked before a run (default: the setup's model)."""
        return {"model": setup.model} if setup.model else {}

    async def next_turns(self, ctx: SimContext) -> list[Turn]:
        raise NotImplementedError

    def forecast_reply(self, call: Call, ctx: SimContext) -> str:
        ref = ctx.instance.reference[len(ctx.turns)]
        return f"{ref.speaker}: {ref.text}"


# ---------------------------------------------------------------- plugin code, bounded

STEP_TIME_LIMIT_S = 60.0
"""Default of ``step_timeout_s`` (a plugin setup's key): the longest one piece of a plugin's own
code may run without returning or awaiting ``ctx.llm`` (a step of ``next_turns``, ``__init__``,
``forecast_reply``, the class's option, prompt and model hooks). The LLM calls themselves are
made by cocoeval between steps and are not counted: a step is the plugin's own computation, which
takes milliseconds, so a minute means it blocks (a synchronous request, ``input()``, a lock)."""


class PluginStopped(BaseException):
    """Raised inside a plugin's thread when its step ran past the time limit, to stop it."""


class _Outcome:
    """What a piece of plugin code ended with: its value, or the exception it raised (any, even
    ``SystemExit`` or ``KeyboardInterrupt``), or neither when it ran past the limit."""

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None


def run_bounded(fn: Callable[[], Any], limit_s: float) -> _Outcome:
    """``fn()`` in a thread of its own, waited for at most ``limit_s`` seconds. Whatever it raises
    is caught there, so no exception of the plugin's (``sys.exit``, ``KeyboardInterrupt``,
    ``BaseException``) reaches the run; a real Ctrl-C reaches this (the main) thread while it
    waits. A thread still running at the limit is asked to stop (``PluginStopped`` raised in it
    at its next Python instruction) and left behind as a daemon: it cannot hold the run."""
    out = _Outcome()

    def target() -> None:
        try:
            out.value = fn()
        except BaseException as e:  # the plugin's, whatever it is: reported, never re-raised here
            out.error = e
        out.done = True

    th = threading.Thread(target=target, name="cocoeval-plugin", daemon=True)
    th.start()
    th.join(limit_s)
    if th.is_alive() and th.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(th.ident), ctypes.py_object(PluginStopped))
    return out


def _where(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    return f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""


def _described(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}{_where(e)}" if str(e) else f"{type(e).__name__}{_where(e)}"


def label(cls: type) -> str:
    """How messages name a plugin class: its registered name and where it is defined."""
    return f"simulator plugin {getattr(cls, 'name', '') or cls.__name__!r} ({cls.__module__}.{cls.__qualname__})"


def plugin_call(name: str, what: str, fn: Callable[[], Any], limit_s: float = STEP_TIME_LIMIT_S) -> Any:
    """The value of a piece of plugin code run at load or plan time (``name``: the plugin, as
    ``label`` gives it; ``what``: e.g. "__init__", "check_options"), bounded by ``run_bounded``;
    a ConfigError naming the plugin when it raised or ran past the limit (a ConfigError of its
    own passes through)."""
    out = run_bounded(fn, limit_s)
    if isinstance(out.error, ConfigError):
        raise out.error
    if out.error is not None:
        raise ConfigError(
            f"{name}: {what} raised {_described(out.error)}",
            hint="a bug in the plugin: fix it, or remove the setups that use it",
        ) from None
    if not out.done:
        raise ConfigError(
            f"{name}: {what} ran for more than {limit_s:g} s and was stopped",
            hint="a plugin's code must not block; cocoeval makes its LLM calls (ctx.llm)",
        )
    return out.value


def contract_problem(cls: type[Simulator]) -> str | None:
    """What of the plugin contract a simulator class breaks (None: nothing), checked before it is
    used: ``next_turns`` implemented as ``async def``, ``Options`` a pydantic model class,
    ``version`` a short printable string (it enters the setup id, which is JSON),
    ``needs_model`` a bool."""
    opts = getattr(cls, "Options", None)
    if not (isinstance(opts, type) and issubclass(opts, BaseModel)):
        return f"Options is a {type(opts).__name__}, not a pydantic model class (class Options(BaseModel): ...)"
    nt = getattr(cls, "next_turns", None)
    if nt is Simulator.next_turns:
        return "next_turns is not implemented"
    if not inspect.iscoroutinefunction(nt):
        return "next_turns is not a coroutine function: write it as async def next_turns(self, ctx)"
    v = getattr(cls, "version", None)
    if not (isinstance(v, str) and 0 < len(v) <= 100 and v.isprintable()):
        return (
            f"version is a {type(v).__name__}"
            if not isinstance(v, str)
            else "version is an empty, long or unprintable string"
        ) + ': set a short string, e.g. version = "2"'
    if not isinstance(getattr(cls, "needs_model", False), bool):
        return "needs_model is not a bool"
    return None


def _simulator_entry(name: str, cls: Any) -> type[Simulator]:
    """A simulator class, given the name it is registered under (``Simulator.name``)."""
    if not (isinstance(cls, type) and issubclass(cls, Simulator)):
        raise NotOfKind(
            "is not a Simulator subclass", "the entry point must name a class deriving cocoeval.simulate.Simulator"
        )
    cls.name = name
    return cls


def _keeps_the_contract(name: str, cls: type[Simulator]) -> None:
    if problem := contract_problem(cls):
        raise ConfigError(
            f"{label(cls)} breaks the plugin contract: {problem}", hint="see docs/extending.md, 'A simulator'"
        )


def _load_bounded(ep: EntryPoint) -> Any:
    """An entry point's object, imported in a thread bounded by ``STEP_TIME_LIMIT_S``: importing
    a plugin runs its code, which may raise anything or block."""
    loaded = run_bounded(ep.load, STEP_TIME_LIMIT_S)
    if loaded.error is not None:
        raise Unloadable(_described(loaded.error))
    if not loaded.done:
        raise Unloadable(f"importing it ran for more than {STEP_TIME_LIMIT_S:g} s and was stopped")
    return loaded.value


SIMULATORS: Registry[type[Simulator]] = Registry(
    "simulator",
    group=ENTRY_POINT_GROUP,
    builtins="cocoeval.simulate.agents",
    make=_simulator_entry,
    check=_keeps_the_contract,
    load=_load_bounded,
    unknown=(
        "unknown simulator {name!r}; known: {known}",
        "install the package that offers it (entry point group {group}), "
        "or register one with @cocoeval.simulate.simulator",
    ),
)
"""The simulator plugins by name: the built-in ones (``agents``, imported at the first look-up)
and installed packages' ``cocoeval.simulators`` entry points (imported bounded in time). Every
look-up checks the class against the contract (``contract_problem``)."""


def simulator(name: str) -> Callable[[type[Simulator]], type[Simulator]]:
    """Class decorator registering a simulator plugin under ``name``."""
    return SIMULATORS.register(name)


def available_simulators() -> list[str]:
    """Built-in simulators and those installed packages offer (entry points, not loaded)."""
    return sorted(SIMULATORS.names())


def get_simulator(name: str) -> type[Simulator]:
    """The simulator class registered as ``name`` (built in or an entry point, loaded at first
    use, in a thread bounded by ``STEP_TIME_LIMIT_S``); a ConfigError naming the known ones, or
    naming the plugin when it cannot be loaded or breaks the contract (``contract_problem``)."""
    return SIMULATORS.get(name)


# ---------------------------------------------------------------- the setup of a plugin


class PluginSetup(SetupBase):
    """A setup of a simulator plugin (``simulator: NAME``), e.g. the built-in ``agents``. Its id
    hashes the plugin's name and version, the model, the options (with the plugin's defaults),
    the plugin's prompt files and the replicate index. A plain record: the plugin is looked up
    when the params are read (``check_setup``) and when its id or hooks are asked for, never while
    the params file's schema is validated."""

    source: Literal["plugin"] = "plugin"
    simulator: str
    """The plugin's registered name: built in (``agents``) or an installed package's
    ``cocoeval.simulators`` entry point."""
    model: str | None = None
    """The model the plugin calls (PROVIDER/MODEL), if it calls one; some plugins need one."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The plugin's own settings, checked against its ``Options`` (and its defaults filled in) when
    the params are read (``check_setup``)."""
    sample: int = Field(0, ge=0, le=1_000_000, strict=True)
    """Replicate index: the same setup sampled again gets new calls (0 to 1,000,000)."""
    step_timeout_s: float = Field(60.0, gt=0, le=86_400)
    """The longest a piece of the plugin's own code may run without returning or awaiting
    ``ctx.llm`` (LLM calls are not counted), in seconds; past it the continuation is invalid and
    the plugin is stopped (``plugins.STEP_TIME_LIMIT_S``). Not part of the setup id."""

    def _hook(self, name: str) -> dict[str, Any]:
        """A class hook of the plugin (check_options, model_specs, prompt_refs) called on a copy of
        this setup, bounded and checked (``plugins.plugin_call``): it must return a JSON object,
        and for the specs and refs, one of text to text."""
        import json

        cls = get_simulator(self.simulator)  # an unknown name: the known ones are named
        own = self.model_copy(deep=True)
        got = plugin_call(label(cls), name, lambda: getattr(cls, name)(own), self.step_timeout_s)
        try:
            ok = (
                isinstance(got, dict)
                and bool(json.dumps(got, allow_nan=False))
                and (name == "check_options" or all(isinstance(k, str) and isinstance(v, str) for k, v in got.items()))
            )
        except (TypeError, ValueError, RecursionError):
            ok = False
        if not ok:
            raise ConfigError(
                f"{label(cls)}: {name} returned a {type(got).__name__} that is not "
                + ("a JSON object" if name == "check_options" else "a mapping of text to text"),
                hint="see the hook in cocoeval.simulate.plugins.Simulator",
            )
        return got

    def model_specs(self) -> dict[str, str]:
        return dict(self._hook("model_specs"))

    def prompt_names(self) -> list[str]:
        return list(self._hook("prompt_refs"))

    def setup_id(self, taxonomy: Taxonomy | None = None) -> str:
        cls = get_simulator(self.simulator)
        data = {
            "simulator": self.simulator,
            "version": cls.version,
            "model": self.model,
            "options": self._hook("check_options"),
            "sample": self.sample,
            "kind": self.kind,
            "prompts": self._hook("prompt_refs"),
            "taxonomy": (taxonomy or load_taxonomy()).hash,
        }
        return setup_hash(data)


def check_setup(setup: PluginSetup) -> PluginSetup:
    """``setup`` with its options checked by the plugin and its defaults filled in (they enter
    the setup id and are written with the params into the manifest); a ConfigError naming the
    known simulators when its plugin is unknown, naming the plugin when it cannot be loaded,
    breaks the contract or refuses the options (``Simulator.check_options``)."""
    setup.options = setup._hook("check_options")
    return setup


def new_plugin(setup: PluginSetup, taxonomy: Taxonomy) -> Simulator:
    """The setup's plugin object, made from copies of the setup and the taxonomy (what it changes
    stays its own); a ConfigError naming the plugin when its ``__init__`` raises or blocks."""
    cls = get_simulator(setup.simulator)
    own_setup, own_tax = setup.model_copy(deep=True), taxonomy.model_copy(deep=True)
    plugin = plugin_call(label(cls), "__init__", lambda: cls(own_setup, own_tax), setup.step_timeout_s)
    if not isinstance(plugin, Simulator):
        raise ConfigError(
            f"{label(cls)}: constructing it gave a {type(plugin).__name__}, not the plugin",
            hint="a plugin's __new__ must return an instance of the class",
        )
    return plugin


def check_simulators() -> list[tuple[str, type[Simulator] | None, str | None]]:
    """(name, class or None, why it cannot be used or None) of every simulator, built in or
    installed, for ``cocoeval simulators``: one that fails to load or breaks the contract is
    listed with why, not left out."""
    out: list[tuple[str, type[Simulator] | None, str | None]] = []
    for name in available_simulators():
        try:
            out.append((name, get_simulator(name), None))
        except ConfigError as e:
            out.append((name, None, e.message))
    return out


# ---------------------------------------------------------------- driving a plugin in rounds


class PluginTask:
    """One continuation written by a plugin, driven in rounds like ``SimTask``: ``next_calls``
    runs the plugin's coroutine until it waits for calls (returned) or returns turns (taken, and
    the next ``next_turns`` started), ``apply_results`` hands it the answers, ``result`` is the
    continuation. The forecast drives it with ``forecast_reply`` standing in for the answers."""

    MAX_EMPTY = 3
    """``next_turns`` returning no turn this many times in a row ends the continuation invalid."""

    def __init__(self, setup: PluginSetup, setup_id: str, inst: Instance, plugin: Simulator) -> None:
        self.setup, self.setup_id, self.inst, self.plugin = setup, setup_id, inst, plugin
        self.participants = participant_names(inst)
        self.target = len(inst.reference)
        self.turns: list[Turn] = []
        self.calls: list[CallRecord] = []
        self.notes: list[str] = []
        self.unknown: list[str] = []
        self.invalid: str | None = None
        self._empty = 0
        self._coro: Coroutine[Any, Any, list[Turn]] | None = None
        self._ctx: SimContext | None = None
        self._waiting: list[Call] = []

    @property
    def done(self) -> bool:
        return self.invalid is not None or len(self.turns) >= self.target

    def context(self) -> SimContext:
        n = len(self.turns)
        seed = f"{self.setup.sample}|{self.inst.id}|{n}"
        # copies: what the plugin changes in them reaches neither the reference that is judged nor
        # the turns already taken (nor another setup's plugin)
        return SimContext(
            instance=self.inst.model_copy(deep=True),
            turns=tuple(t.model_copy() for t in self.turns),
            remaining=self.target - n,
            participants=list(self.participants),
            llm=LLM(self),
            options=self.plugin.options,
            rng=random.Random(seed),
            notes=[],
        )

    def next_calls(self) -> list[Call]:
        """The calls the plugin waits for (empty when the continuation is done)."""
        while not self.done and not self._waiting:
            if self._coro is None:
                self._ctx = self.context()
                coro = self.plugin.next_turns(self._ctx)
                if not inspect.iscoroutine(coro):  # an async def that another decorator turned into a plain call
                    self._end(
                        f"simulator {self.setup.simulator!r}: next_turns returned a {type(coro).__name__}, "
                        "not a coroutine (write it as async def next_turns(self, ctx))"
                    )
                    break
                self._coro = coro
            self._step(None)
        return list(self._waiting)

    def apply_results(self, results: list[CallResult]) -> None:
        self.calls += [CallRecord.of(r, c.request.max_tokens) for c, r in zip(self._waiting, results, strict=True)]
        self._waiting = []
        self._step(results)

    def _step(self, value: list[CallResult] | None) -> None:
        """Runs the plugin's coroutine up to its next await of ``ctx.llm`` or its return, in a thread
        bounded by the setup's ``step_timeout_s`` (``run_bounded``): whatever it raises there, even
        ``SystemExit``, ends this continuation invalid with the reason, and the run goes on."""
        coro = self._coro
        assert coro is not None and self._ctx is not None
        at = len(self.turns) + 1
        step = run_bounded(lambda: coro.send(value), self.setup.step_timeout_s)
        e = step.error
        if not step.done:
            self._coro = None  # still running in its thread: it cannot be closed, only left behind
            self._end(
                f"simulator {self.setup.simulator!r} ran for more than {self.setup.step_timeout_s:g} s "
                f"without returning or awaiting ctx.llm at turn {at} and was stopped (a plugin must not block; "
                "step_timeout_s sets the limit)"
            )
        elif isinstance(e, StopIteration):
            self._coro = None
            self._keep_notes()
            self._take(e.value, at)
        elif isinstance(e, (CallFailed, InvalidContinuation)):
            self._end(str(e))
        elif e is not None:  # a bug of the plugin, or it broke the contract: this continuation is invalid
            self._end(
                f"simulator {self.setup.simulator!r} raised {_described(e)} at turn {at} "
                + (
                    "(a plugin may not exit or interrupt the run: raise InvalidContinuation)"
                    if not isinstance(e, Exception)
                    else "(a bug in the plugin?)"
                )
            )
        elif not isinstance(step.value, _Await) or not step.value.calls:
            self._end(
                f"simulator {self.setup.simulator!r} awaited {type(step.value).__name__}, not ctx.llm: a plugin "
                "may await only ctx.llm.generate or ctx.llm.generate_many (see cocoeval.simulate.plugins)"
            )
        else:
            self._waiting = step.value.calls

    def _keep_notes(self) -> None:
        """The notes the plugin wrote in ``ctx.notes`` during this ``next_turns``, kept whatever it
        ended with."""
        if self._ctx is not None:
            at = len(self.turns) + 1
            self.notes += [f"turn {at}: {n}" for n in self._ctx.notes if isinstance(n, str)]
            if bad := sum(not isinstance(n, str) for n in self._ctx.notes):
                self.notes.append(f"turn {at}: left out {bad} note(s) that were not text")
            self._ctx.notes = []

    def _end(self, reason: str) -> None:
        if self._coro is not None:
            try:
                self._coro.close()
            except BaseException as e:  # its finally: or except GeneratorExit: misbehaved
                self.notes.append(f"closing the simulator's coroutine raised {type(e).__name__}")
        self._coro = None
        self._keep_notes()
        self.invalid = reason

    def _take(self, new: Any, at: int) -> None:
        if not isinstance(new, list) or not all(isinstance(t, Turn) for t in new):
            self.invalid = (
                f"simulator {self.setup.simulator!r} returned {type(new).__name__} at turn {at}, not a list of Turn"
            )
            return
        try:  # validated again, and copies: a Turn made with model_construct, or changed later, is not taken as is
            new = [Turn.model_validate(t.model_dump()) for t in new]
        except ValidationError as e:
            self.invalid = (
                f"simulator {self.setup.simulator!r} returned a Turn that is not valid at turn {at}: "
                f"{e.errors()[0]['msg']} ({'.'.join(map(str, e.errors()[0]['loc']))})"
            )
            return
        good = [t for t in new if t.speaker.strip() and t.text.strip()]
        if len(good) < len(new):
            self.notes.append(f"turn {at}: dropped {len(new) - len(good)} turn(s) without a speaker or text")
        if not good:
            self._empty += 1
            self.notes.append(f"turn {at}: the simulator returned no turn ({self._empty} in a row)")
            if self._empty >= self.MAX_EMPTY:
                self.invalid = f"the simulator returned no turn {self._empty} times in a row at turn {at}"
            return
        self._empty = 0
        left = self.target - len(self.turns)
        if len(good) > left:
            self.notes.append(f"turn {at}: kept the first {left} of {len(good)} turns")
            good = good[:left]
        for t in good:
            if t.speaker not in self.participants and t.speaker not in self.unknown:
                self.unknown.append(t.speaker)
        self.turns += good

    def result(self) -> Continuation:
        ok = self.invalid is None and len(self.turns) >= self.target
        return continuation(
            self.inst,
            self.setup_id,
            self.setup.name,
            self.turns[: self.target],
            None if ok else (self.invalid or f"stopped with {len(self.turns)} of {self.target} turns"),
            calls=self.calls,
            notes=self.notes,
            unknown_speakers=self.unknown,
            instance_hash=self.inst.content_hash(),
        )

    def forecast_replies(self, calls: Sequence[Call]) -> list[str]:
        """The answers the forecast stands in for ``calls``: the plugin's ``forecast_reply``, cut to
        what the call's ``max_tokens`` lets a model write (``within_budget``). A long human turn
        standing in whole would be refused as over the budget (``over_budget``: the continuation
        ends, and the forecast counts too few calls) where a model keeps to it."""
        ctx, plugin = self._ctx, self.plugin
        assert ctx is not None
        out = []
        for c in calls:

            def reply(call: Call = c) -> str:
                return plugin.forecast_reply(call, ctx)

            text = plugin_call(label(type(plugin)), "forecast_reply", reply, self.setup.step_timeout_s)
            if not isinstance(text, str):
                raise ConfigError(
                    f"{label(type(plugin))}: forecast_reply returned a {type(text).__name__}, not the "
                    "text of an answer",
                    hint="return a str (the answer the forecast stands in)",
                )
            out.append(within_budget(text, c.request.max_tokens))
        return out


def within_budget(text: str, max_tokens: int | None) -> str:
    """``text``, or as much of its beginning (whole words) as ``max_tokens`` output tokens hold:
    what a model that keeps to the budget writes at most (never ``over_budget``)."""
    from cocoeval.llm.usage import count_tokens

    if not max_tokens or (count_tokens(text) <= max_tokens and not over_budget(text, max_tokens)):
        return text
    cut = " ".join(text.split())[: max_tokens * 4]  # ~4 characters per token in English prose
    while cut and count_tokens(cut) > max_tokens:
        cut = cut[: int(len(cut) * 0.9)]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut
