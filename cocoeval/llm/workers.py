"""Worker processes for live calls (``LLMConfig.processes`` > 1): the runner's side.

A provider SDK spends about a millisecond of CPU on each request (building it, its headers and
URL, parsing the answer). Against a fast server at high concurrency (vLLM or llama.cpp on a GPU,
a test server) one Python process then tops out at a few hundred requests per second, whatever
the concurrency. Worker processes spread that CPU over cores.

The runner keeps everything else: cache lookups, duplicate folding, the concurrency, RPM and TPM
limits, accounting and the progress bar. A worker (``_worker_main.py``) only sends: it takes
prepared requests, sends each through the same provider class (the SDK's own retries included),
writes a successful answer into the call cache the moment it arrives, then replies. Nothing paid
for is lost: a worker whose runner dies (even ``kill -9``) or is interrupted (Ctrl-C reaches
the runner only) finishes the calls it has, caches their answers and exits.

Workers start with the first live call and serve every later run of the same ``Runner`` until
``Runner.close()``; they are restarted when the runner's environment, import path or working
directory has changed since. Calls a stopped run left in flight are waited for (and accounted)
before the next run sends anything, so the limits hold across runs. Runs on one event loop may
share the workers; another event loop at the same time is refused.

Protocol: JSON lines (no pickle). To a worker: ``{"id", "op": "prepare", "model", "module"}``
once per model (import ``module``, so that providers registered outside cocoeval work too; make
the provider; ``Provider.start()``), answered ``{"id", "prepared": true}``; then ``{"id",
"model", "module", "key", "dropped", "identity", "request_json", "request"}`` per call, answered
``{"id", "key", "ok": response, "lost", "lost_tokens"}``, ``{"id", "key", "error": {"reason",
"detail"}, "lost", "lost_tokens"}`` (a failed call; ``lost``: HTTP attempts sent and never
answered, which the provider may have billed, and their estimated input tokens), ``{"id", "key",
"fatal": {"type", "message", "hint"}}`` (stop the run) or ``{"id", "key", "crash": text}`` (a bug).
Claims: the runner claims each call in the cache before it gives it to a worker and records the
workers' process ids with its claims, so that a claim stays live while a worker may still answer
it (even after the runner died); the worker's ``CallCache.put`` removes the claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from .base import GenerateRequest, Provider
from .cache import CallCache
from .errors import ConfigError, FatalLLMError, LLMError

log = logging.getLogger("cocoeval.llm.workers")
_ROOT = str(Path(__file__).resolve().parents[2])
_DRAIN_S = 30.0


class WorkerError(LLMError):
    """A worker process died or broke the protocol: the run stops; completed calls are cached."""


def worker_module(prov: Provider) -> str | None:
    """The module a worker imports to get ``prov``'s class, or None when its calls must stay in
    this process (``in_process`` True, or a class defined in ``__main__`` or a notebook)."""
    module = type(prov).__module__
    return module if not prov.in_process and module not in ("__main__", "builtins") else None


def raise_reply(reply: dict[str, Any], what: str) -> NoReturn:
    """Raise what a worker's fatal or crash reply says."""
    if "fatal" in reply:
        fatal = reply["fatal"]
        cls = ConfigError if fatal.get("type") == "ConfigError" else FatalLLMError
        raise cls(fatal["message"], hint=fatal["hint"])
    raise WorkerError(
        f"a worker process failed on {what}: {reply.get('crash')}",
        hint="this is a bug in cocoeval or the provider; set llm.processes: 1 to see it in this process",
    )


def _surroundings() -> tuple:
    """What a worker takes from this process when it starts (compared in memory, never stored)."""
    return tuple(sorted(os.environ.items())), tuple(sys.path), os.getcwd()


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

    def __init__(self, config: dict[str, Any], account: Callable[[dict, str, str], None]) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from cocoeval.llm._worker_main import main; main()", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        self.account = account
        self.pending: dict[int, tuple[asyncio.Future, str, str]] = {}
        """Calls of the current run: id -> (future, stage, model)."""
        self.orphans: dict[int, tuple[str, str]] = {}
        """Calls a stopped run left in flight: id -> (stage, model); accounted when they end."""
        self.buf = b""  # kept across runs
        self.sent = 0
        """Calls this worker has been given."""
        self.dead = False
        self.why = ""
        self.transports: list[asyncio.BaseTransport] = []
        self.writer: asyncio.WriteTransport | None = None
        self._reaper: asyncio.Task | None = None

    async def connect(self) -> None:
        """Connect the pipes to the running event loop (the fds stay open between runs)."""
        loop = asyncio.get_running_loop()
        assert self.proc.stdout is not None and self.proc.stdin is not None
        rt, _ = await loop.connect_read_pipe(
            lambda: _Reader(self), os.fdopen(self.proc.stdout.fileno(), "rb", buffering=0, closefd=False)
        )
        wt, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(self.proc.stdin.fileno(), "wb", buffering=0, closefd=False)
        )
        self.writer = wt
        self.transports = [rt, wt]

    def unsent(self) -> int:
        """Bytes written for it that have not gone into its pipe yet."""
        return self.writer.get_write_buffer_size() if self.writer is not None else 0

    def disconnect(self) -> None:
        """After a run: its unanswered calls become orphans (the worker goes on with them)."""
        for n, (fut, stage, model) in self.pending.items():
            fut.cancel()
            self.orphans[n] = (stage, model)
        self.pending.clear()
        if self.writer is not None and not self.writer.is_closing():
            self.writer.abort()  # at once (the fds stay open): nothing is written after the run
        for t in self.transports:
            t.close()
        self.transports, self.writer = [], None

    def received(self, data: bytes) -> None:
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            try:
                msg = json.loads(line)
                n = msg["id"]
            except (ValueError, KeyError, TypeError):
                self.fail(f"worker process {self.proc.pid} wrote a line that is not a reply: {line[:200]!r}")
                return
            if n in self.pending:
                fut, stage, model = self.pending.pop(n)
                if fut.done():  # its caller was cancelled: still paid for, and cached
                    self.account(msg, stage, model)
                else:
                    fut.set_result(msg)
            elif n in self.orphans:
                self.account(msg, *self.orphans.pop(n))

    def died(self) -> None:
        if not self.dead:
            self.dead = True
            self.orphans.clear()  # nothing more can come after end-of-file
            self._reaper = asyncio.get_running_loop().create_task(self._report_death())

    async def _report_death(self) -> None:
        for _ in range(100):  # its output closes a moment before it can be reaped
            if self.proc.poll() is not None:
                break
            await asyncio.sleep(0.02)
        code = self.proc.poll()
        self.fail(
            f"worker process {self.proc.pid} exited"
            + (f" with code {code}" if code is not None else "")
            + " (its error output, if any, went to this process's standard error)"
        )

    def fail(self, why: str) -> None:
        self.dead = True
        self.why = why
        err = WorkerError(
            why,
            hint="calls it completed are cached; re-run to send the rest "
            "(or set llm.processes: 1 to send from this process)",
        )
        for fut, _, _ in self.pending.values():
            if not fut.done():
                fut.set_exception(err)
        self.pending.clear()
        self.orphans.clear()

    def send(self, n: int, fields: str, stage: str, model: str) -> asyncio.Future:
        if self.dead or self.writer is None:
            raise WorkerError(
                f"worker process {self.proc.pid} is gone",
                hint="calls it completed are cached; re-run to send the rest (a new worker replaces it)",
            )
        fut = asyncio.get_running_loop().create_future()
        self.pending[n] = (fut, stage, model)
        self.writer.write(f'{{"id":{n},{fields}}}\n'.encode())
        return fut

    def end_input(self) -> None:
        """Close its input and our end of its output: it finishes its calls, caches them, exits."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if pipe:
                    pipe.close()


class WorkerPool:
    """``n`` worker processes, started on first use; a call goes to the one with least in flight."""

    def __init__(
        self, n: int, *, cache: CallCache, max_retries: int, timeout_s: float, account: Callable[[dict, str, str], None]
    ) -> None:
        self.n = n
        self.cache = cache
        self.max_retries, self.timeout_s = max_retries, timeout_s
        self.account = account
        """Called with (reply, stage, model) for each answer of a call a stopped run left behind."""
        self.workers: list[_Worker] = []
        self._started_in: tuple = ()
        self._config: dict[str, Any] = {}
        self._ids = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._users = 0
        self._connected = False
        self._lock: asyncio.Lock | None = None
        self._ready: set[str] = set()
        """Models every worker has prepared (the workers keep their providers between runs)."""
        self._preparing: dict[str, asyncio.Future] = {}

    # -- runs -------------------------------------------------------------------------------
    async def enter(self) -> None:
        """A run starts on the running event loop: it waits for calls a stopped run left in the
        workers (nothing is started until its first call)."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            raise WorkerError(
                "this Runner's worker processes are serving a run on another event loop "
                "(or an interrupted run is still finishing)",
                hint="use one Runner per thread, or wait for the other run to end",
            )
        self._loop = loop
        self._users += 1
        if self._lock is None:
            self._lock = asyncio.Lock()
        if any(w.orphans for w in self.workers):  # before any lookup: their answers may be asked for
            try:
                await self._connect()
            except BaseException:
                await self.leave()
                raise

    async def leave(self) -> None:
        """A run ends; the last one hands its unsent input over and lets go of the pipes."""
        try:
            if self._users == 1:
                deadline = time.monotonic() + _DRAIN_S
                for w in self.workers:  # never leave half a request in a pipe
                    while w.unsent() and not w.dead and time.monotonic() < deadline:
                        await asyncio.sleep(0.01)
        finally:  # even when cancelled while waiting: the next run must find a clean state
            self._users -= 1
            if self._users == 0:
                for w in self.workers:
                    if w.unsent():  # its input would end in a cut line: it gets no more
                        w.fail(f"worker process {w.proc.pid} did not read its input in time")
                        w.disconnect()
                        w.end_input()
                    else:
                        w.disconnect()
                self._connected = False
                self._loop = self._lock = None
                self._preparing = {}

    async def _connect(self) -> None:
        assert self._lock is not None
        async with self._lock:
            if self._connected:
                return
            if self.workers and self._started_in != _surroundings():
                await self._connect_pipes()
                await self._wait_for_orphans()
                for w in self.workers:
                    w.disconnect()
                    w.end_input()
                log.info(
                    "restarting the worker processes: the environment, import path or working directory has changed"
                )
                self.workers = []
            if not self.workers:
                self._started_in = _surroundings()
                self._config = {
                    "cache": str(self.cache.path) if self.cache.path else None,
                    "policy": self.cache.policy,
                    "max_retries": self.max_retries,
                    "timeout_s": self.timeout_s,
                    "sys_path": [p for p in sys.path if p],
                }
                self.workers, self._ready = [self._start() for _ in range(self.n)], set()
            await self._connect_pipes()
            await self._wait_for_orphans()
            for i, w in enumerate(self.workers):  # one that died or failed is replaced
                if w.dead or w.proc.poll() is not None:
                    log.warning(
                        "worker process %d had stopped (%s); starting another",
                        w.proc.pid,
                        w.why or f"exit code {w.proc.poll()}",
                    )
                    w.disconnect()
                    w.end_input()
                    self.workers[i], self._ready = self._start(), set()
            await self._connect_pipes()
            self._connected = True

    def _start(self) -> _Worker:
        return _Worker(self._config, self.account)

    async def _connect_pipes(self) -> None:
        for w in self.workers:
            if w.writer is None and not w.dead:
                await w.connect()

    async def _wait_for_orphans(self) -> None:
        """Wait for the calls a stopped run left (at most as long as the SDK may retry them)."""
        left = sum(len(w.orphans) for w in self.workers)
        if not left:
            return
        log.info("waiting for %d call(s) a stopped run left in the worker processes", left)
        deadline = time.monotonic() + self.timeout_s * (self.max_retries + 1) + 30
        while any(w.orphans for w in self.workers if not w.dead):
            if time.monotonic() > deadline:
                for w in self.workers:
                    if w.orphans:
                        log.warning(
                            "worker process %d did not finish %d call(s) in time: replaced", w.proc.pid, len(w.orphans)
                        )
                        w.fail("it did not finish the calls of a stopped run in time")
                break
            await asyncio.sleep(0.02)

    # -- calls ------------------------------------------------------------------------------
    def _send(self, worker: _Worker, fields: str, stage: str, model: str) -> asyncio.Future:
        self._ids += 1
        return worker.send(self._ids, fields, stage, model)

    async def prepare(self, model: str, module: str) -> None:
        """Have every worker ready to send ``model``'s calls (its SDK imported, its client made),
        so that the runner's rate limits are taken when a call can go out at once."""
        if not self._connected:
            await self._connect()
        if model in self._ready:
            return
        if model not in self._preparing:
            fields = f'"op":"prepare","model":{json.dumps(model)},"module":{json.dumps(module)}'
            futs = [self._send(w, fields, "prepare", model) for w in self.workers]
            gathered = asyncio.gather(*futs)
            gathered.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved
            self._preparing[model] = gathered
        for reply in await asyncio.shield(self._preparing[model]):
            if "prepared" not in reply:
                raise_reply(reply, model)
        self._ready.add(model)

    async def call(
        self,
        prov: Provider,
        module: str,
        stage: str,
        prepared: GenerateRequest,
        dropped: list[str],
        key: str,
        identity_json: str,
        request_json: str,
    ) -> dict[str, Any]:
        """Send one prepared request through the worker with least in flight; its reply (see the
        module docstring)."""
        model = str(prov.spec)
        await self.prepare(model, module)
        worker = min(self.workers, key=lambda w: len(w.pending))
        worker.sent += 1
        fut = self._send(
            worker,
            (
                f'"model":{json.dumps(model)},"module":{json.dumps(module)},"key":"{key}",'
                f'"dropped":{json.dumps(dropped)},"identity":{json.dumps(identity_json)},'
                f'"request_json":{json.dumps(request_json)},"request":{prepared.model_dump_json()}'
            ),
            stage,
            model,
        )
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.account(fut.result(), stage, model)  # it arrived just before the cancel
            raise

    def pids(self) -> list[int]:
        """Process ids of the workers (they may answer this process's claims in the cache)."""
        return [w.proc.pid for w in self.workers]

    def close(self, wait_s: float = 10.0) -> list[int]:
        """End the workers' input and wait up to ``wait_s`` for them to exit; one still busy then
        finishes its calls (caching their answers) and exits by itself: none is killed. Returns
        the process ids of those still busy."""
        if self._users:
            log.warning("a run still uses the worker processes: they are left to end with this process")
            return self.pids()
        for w in self.workers:
            w.end_input()
        deadline = time.monotonic() + wait_s
        busy = []
        for w in self.workers:
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                busy.append(w.proc.pid)
        if busy:
            log.info(
                "worker process(es) %s are finishing their calls in the background; their answers go to the cache", busy
            )
        self.workers = []
        return busy
