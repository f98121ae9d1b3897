"""Worker processes for live calls (``LLMConfig.processes`` > 1).

A provider SDK spends about a millisecond of CPU on each request (building it, its headers and
URL, parsing the answer). Against a fast server at high concurrency (vLLM or llama.cpp on a GPU,
a test server) one Python process then tops out at a few hundred requests per second, whatever
the concurrency. Worker processes spread that CPU over cores.

The runner keeps everything else: cache lookups, duplicate folding, the concurrency, RPM and TPM
limits, accounting and the progress bar. A worker only sends: it takes prepared requests as JSON
lines on its standard input, sends each through the same provider class (the SDK's own retries
included), writes a successful answer into the call cache itself the moment it arrives, and then
reports it on a private pipe. A worker whose parent dies (even ``kill -9``) reads end-of-file,
finishes the calls it has in flight, caches their answers and exits: nothing paid for is lost.

Workers start on the first live call and serve every later run of the same ``Runner`` until
``Runner.close()`` (or the parent's exit). They exchange JSON only (no pickle) and read API keys
from the environment they inherit, like the parent.

Protocol, one JSON object per line. To the worker: ``{"id", "model", "module", "key",
"dropped", "identity", "request_json", "request"}`` (``module``: the provider class's module,
imported first so that providers registered outside cocoeval work too). From it: ``{"id", "ok":
response}``, ``{"id", "error": {"reason", "detail"}}`` (a failed call), ``{"id", "fatal":
{"message", "hint"}}`` (stop the run) or ``{"id", "crash": text}`` (a bug).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..errors import CocoevalError, FatalLLMError
from .base import CallError, GenerateRequest, Provider, get_provider
from .cache import CallCache

_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerError(CocoevalError):
    """A worker process died or broke the protocol: the run stops; completed calls are cached."""


def worker_module(prov: Provider) -> str | None:
    """The module a worker imports to get ``prov``'s class, or None when its calls must stay in
    this process (``in_workers`` False, or a class defined in ``__main__`` or a notebook)."""
    module = type(prov).__module__
    return module if prov.in_workers and module not in ("__main__", "builtins") else None


class _Reader(asyncio.Protocol):
    def __init__(self, worker: _Worker) -> None:
        self.worker = worker

    def data_received(self, data: bytes) -> None:
        self.worker.received(data)

    def eof_received(self) -> bool:
        self.worker.died()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self.worker.died()


class _Worker:
    """One worker process and what this process awaits from it."""

    def __init__(self, config: dict[str, Any]) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from cocoeval.llm.workers import main; main()", json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.pending: dict[int, asyncio.Future] = {}
        self.buf = b""  # kept across runs: a line cut by the end of one run is finished in the next
        self.sent = 0
        """Calls this worker has been given."""
        self.dead = False
        self.transports: list[asyncio.BaseTransport] = []
        self.writer: asyncio.WriteTransport | None = None

    async def attach(self) -> None:
        """Connect the pipes to the running event loop (the fds stay open between runs)."""
        loop = asyncio.get_running_loop()
        assert self.proc.stdout is not None and self.proc.stdin is not None
        rt, _ = await loop.connect_read_pipe(
            lambda: _Reader(self), os.fdopen(self.proc.stdout.fileno(), "rb", buffering=0, closefd=False))
        wt, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(self.proc.stdin.fileno(), "wb", buffering=0, closefd=False))
        self.writer = wt  # type: ignore[assignment]
        self.transports = [rt, wt]

    def detach(self) -> None:
        for t in self.transports:
            t.close()
        self.transports, self.writer = [], None
        for fut in self.pending.values():  # a run stopped early: later answers are ignored (cached)
            fut.cancel()
        self.pending.clear()

    def received(self, data: bytes) -> None:
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            try:
                msg = json.loads(line)
                fut = self.pending.pop(msg["id"], None)
            except (ValueError, KeyError, TypeError):
                self.fail(f"worker {self.proc.pid} wrote a line that is not a reply: {line[:200]!r}")
                return
            if fut is not None and not fut.done():
                fut.set_result(msg)

    def died(self) -> None:
        if not self.dead:
            self.dead = True
            try:  # its output closes a moment before it can be reaped
                code: int | None = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            self.fail(f"worker process {self.proc.pid} exited" + (f" with code {code}" if code is not None else "")
                      + " (what it printed, if anything, is on standard error above)")

    def fail(self, why: str) -> None:
        err = WorkerError(why, hint="calls it completed are cached; re-run to send the rest "
                                    "(or set llm.processes: 1 to send from this process)")
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(err)
        self.pending.clear()
        self.dead = True

    def close(self, timeout_s: float) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()  # end-of-file: the worker finishes its calls and exits
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


class WorkerPool:
    """``n`` worker processes, started on first use; a call goes to the one with least in flight."""

    def __init__(self, n: int, *, cache: CallCache, max_retries: int, timeout_s: float) -> None:
        self.n = n
        self.config = {"cache": str(cache.path) if cache.path else None, "policy": cache.policy,
                       "max_retries": max_retries, "timeout_s": timeout_s}
        self.timeout_s = timeout_s
        self.workers: list[_Worker] = []
        self._ids = 0
        self._attached = False
        self._lock: asyncio.Lock | None = None  # one per run: a lock belongs to one event loop
        self._ready: set[str] = set()
        """Models every worker has prepared (the workers keep their providers between runs)."""
        self._preparing: dict[str, asyncio.Future] = {}

    async def attach(self) -> None:
        """Start the workers (first time) and connect them to this run's event loop."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self._attached:
                await self._attach()

    async def _attach(self) -> None:
        if not self.workers:
            self.workers = [_Worker(self.config) for _ in range(self.n)]
        dead = [w.proc.pid for w in self.workers if w.dead or w.proc.poll() is not None]
        if dead:
            raise WorkerError(f"worker process(es) {dead} are gone",
                              hint="create a new Runner (or set llm.processes: 1)")
        for w in self.workers:
            await w.attach()
        self._attached = True

    def detach(self) -> None:
        for w in self.workers:
            w.detach()
        self._attached = False
        self._lock = None
        self._preparing = {}

    def _send(self, worker: _Worker, fields: str) -> asyncio.Future:
        if worker.dead or worker.writer is None:
            raise WorkerError(f"worker process {worker.proc.pid} is gone",
                              hint="calls it completed are cached; re-run to send the rest")
        self._ids += 1
        fut = asyncio.get_running_loop().create_future()
        worker.pending[self._ids] = fut
        worker.writer.write(f'{{"id":{self._ids},{fields}}}\n'.encode())
        return fut

    async def prepare(self, model: str, module: str) -> None:
        """Have every worker ready to send ``model``'s calls (its SDK imported, its client made),
        so that the runner's rate limits are taken when a call can go out at once."""
        if not self._attached:
            await self.attach()
        if model in self._ready:
            return
        if model not in self._preparing:
            fields = f'"op":"prepare","model":{json.dumps(model)},"module":{json.dumps(module)}'
            self._preparing[model] = asyncio.ensure_future(
                asyncio.gather(*(self._send(w, fields) for w in self.workers)))
        for reply in await asyncio.shield(self._preparing[model]):
            if "prepared" not in reply:
                raise_reply(reply, model)
        self._ready.add(model)

    async def call(self, prov: Provider, module: str, prepared: GenerateRequest, dropped: list[str],
                   key: str, identity_json: str, request_json: str) -> dict[str, Any]:
        """Send one prepared request through the worker with least in flight; its reply (see the
        module docstring)."""
        model = str(prov.spec)
        await self.prepare(model, module)
        worker = min(self.workers, key=lambda w: len(w.pending))
        worker.sent += 1
        return await self._send(worker, (
            f'"model":{json.dumps(model)},"module":{json.dumps(module)},"key":"{key}",'
            f'"dropped":{json.dumps(dropped)},"identity":{json.dumps(identity_json)},'
            f'"request_json":{json.dumps(request_json)},"request":{prepared.model_dump_json()}'))

    def close(self) -> None:
        for w in self.workers:
            w.close(self.timeout_s + 5)
        self.workers = []


def raise_reply(reply: dict[str, Any], what: str) -> None:
    """Raise what a worker's fatal or crash reply says."""
    if "fatal" in reply:
        raise FatalLLMError(reply["fatal"]["message"], hint=reply["fatal"]["hint"])
    raise WorkerError(f"a worker process failed on {what}: {reply.get('crash')}",
                      hint="this is a bug in cocoeval or the provider; set llm.processes: 1 to see it "
                           "in this process")


# ---------------------------------------------------------------------- the worker process


async def _serve(config: dict[str, Any], out: Any) -> None:
    cache = CallCache(config["cache"], config["policy"])
    providers: dict[str, Provider] = {}
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)

    def reply(msg: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):  # the parent is gone: the answer is cached anyway
            out.write(json.dumps(msg).encode() + b"\n")

    async def handle(msg: dict[str, Any]) -> None:
        n = msg["id"]
        try:
            prov = providers.get(msg["model"])
            if prov is None:
                importlib.import_module(msg["module"])
                prov = providers[msg["model"]] = get_provider(
                    msg["model"], max_retries=config["max_retries"], timeout_s=config["timeout_s"])
                await prov.start()
            if msg.get("op") == "prepare":
                return reply({"id": n, "prepared": True})
            resp = await prov.generate(GenerateRequest.model_validate(msg["request"]))
            resp.dropped_params = msg["dropped"]
            answer = resp.model_dump(mode="json")
            cache.put(msg["key"], msg["identity"], msg["request_json"], answer)  # before the reply
            reply({"id": n, "ok": answer})
        except CallError as e:
            reply({"id": n, "error": {"reason": e.reason, "detail": e.detail}})
        except FatalLLMError as e:
            reply({"id": n, "fatal": {"message": e.message, "hint": e.hint}})
        except Exception as e:  # a bug: the parent stops the run with it
            reply({"id": n, "crash": f"{type(e).__name__}: {e}"})

    tasks: set[asyncio.Task] = set()
    while line := await reader.readline():
        task = asyncio.create_task(handle(json.loads(line)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:  # end of input (closed, or the parent died): finish and cache what is in flight
        await asyncio.gather(*tasks, return_exceptions=True)
    for prov in providers.values():
        with contextlib.suppress(Exception):
            await prov.aclose()
    cache.close()


def main() -> None:
    from . import providers as _providers  # noqa: F401  (registers the built-in providers)
    from .secrets import install_log_redaction

    install_log_redaction()
    out = os.fdopen(os.dup(1), "wb", buffering=0)  # replies on a private copy of stdout ...
    os.dup2(2, 1)  # ... so that anything a library prints goes to stderr, not into the protocol
    asyncio.run(_serve(json.loads(sys.argv[1]), out))

