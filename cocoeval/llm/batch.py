"""Batch mode: calls sent through the providers' batch APIs, their answers written into the cache.

The runner hands this module the calls that missed the cache and may be batched (see
``LLMConfig.batch``). They are grouped by model, cut into chunks within the provider's limits
(OpenAI 50,000 requests / 200 MB, Anthropic 100,000 / 256 MB, or ``batch_max_requests``),
submitted with the cache key as ``custom_id``, polled every ``batch_poll_s`` seconds, and each
answer is written into the call cache the moment its batch is collected, so the rest of the
pipeline reads it as if it had been answered live.

Nothing paid for is lost and nothing is sent twice: every batch and the requests in it are
recorded in the cache's SQLite file (tables ``batches`` and ``batch_items``) before the batch is
created ("staged": for OpenAI once its input file is uploaded), and again with its id once it
exists. A process killed at any moment and run again polls the batches it had submitted instead
of submitting the requests again; for a staged record it first looks for the batch an earlier
attempt may have created (OpenAI: by its input file; Anthropic: by creation time and size) and
creates it only if there is none. Creating a batch is never retried blindly by the SDK, for the
same reason. An ended batch's answers are all written to the cache before it is marked
collected; if its results cannot be read, it stays recorded and the next run reads them.
Requests a batch failed (expired, errored, cancelled) are returned as failed calls with the
reason and are not cached, so a re-run sends just those again. A batch the provider does not
know any more (another project's key, deleted) fails its calls with ``batch_not_found``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .base import BatchInfo, CallError, GenerateRequest, GenerateResponse, Provider, canonical_json
from .cache import CallCache
from .errors import ConfigError, FatalLLMError

log = logging.getLogger("cocoeval.llm.batch")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS batches (
      ref TEXT PRIMARY KEY,   -- the provider's batch id; before it exists, 'upload:<file id>'
                              -- (OpenAI) or 'pending:<uuid>' (Anthropic)
      identity TEXT NOT NULL, -- provider identity (canonical JSON): provider, model, base URL
      model TEXT NOT NULL,    -- model spec
      state TEXT NOT NULL,    -- staged | submitted | collected
      status TEXT,            -- the provider's last word on it
      requests INTEGER NOT NULL,
      created REAL NOT NULL,
      updated REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS batch_items (
      ref TEXT NOT NULL, key TEXT NOT NULL, identity TEXT NOT NULL, request TEXT NOT NULL,
      dropped TEXT NOT NULL, PRIMARY KEY (ref, key))""",
)


class BatchStore:
    """The batches submitted from this cache, and the requests in each, in the cache's file."""

    def __init__(self, cache: CallCache) -> None:
        if not cache.writes_enabled:
            raise ConfigError(
                "batch mode writes the batches' answers into the call cache, which is "
                f"{'off' if cache.path is None or cache.policy == 'off' else cache.policy}",
                hint="set llm.cache to a file and llm.cache_policy to read_write (or refresh)",
            )
        self.cache = cache
        for sql in _SCHEMA:
            cache.execute(sql)

    def add(self, ref: str, identity: str, model: str, state: str, items: list[Pending]) -> None:
        now = time.time()
        self.cache.execute_many(
            [
                (
                    "INSERT INTO batches VALUES (?,?,?,?,?,?,?,?)",
                    (ref, identity, model, state, None, len(items), now, now),
                ),
                *[
                    (
                        "INSERT OR REPLACE INTO batch_items VALUES (?,?,?,?,?)",
                        (
                            ref,
                            p.key,
                            identity,
                            canonical_json(p.prepared.model_dump(mode="json")),
                            json.dumps(p.dropped),
                        ),
                    )
                    for p in items
                ],
            ]
        )

    def submitted(self, staged: str, batch_id: str) -> None:
        """The staged record ``staged`` became batch ``batch_id``."""
        now = time.time()
        if self.cache.execute("SELECT 1 FROM batches WHERE ref=?", (batch_id,)):  # another process
            self.cache.execute_many(
                [
                    ("DELETE FROM batches WHERE ref=?", (staged,)),  # recorded it first
                    ("DELETE FROM batch_items WHERE ref=?", (staged,)),
                ]
            )
            return
        self.cache.execute_many(
            [
                ("UPDATE batches SET ref=?, state='submitted', updated=? WHERE ref=?", (batch_id, now, staged)),
                ("UPDATE batch_items SET ref=? WHERE ref=?", (batch_id, staged)),
            ]
        )

    def mark(self, ref: str, state: str, status: str | None) -> None:
        self.cache.execute_many(
            [("UPDATE batches SET state=?, status=?, updated=? WHERE ref=?", (state, status, time.time(), ref))]
            + ([("DELETE FROM batch_items WHERE ref=?", (ref,))] if state == "collected" else [])
        )

    def open_batches(self, identity: str) -> list[tuple[str, str, list[str], float]]:
        """(ref, state, keys, created) of the batches of this provider identity not yet collected."""
        rows = self.cache.execute(
            "SELECT ref, state, created FROM batches WHERE identity=? AND state != 'collected' ORDER BY created",
            (identity,),
        )
        return [
            (ref, state, [k for (k,) in self.cache.execute("SELECT key FROM batch_items WHERE ref=?", (ref,))], created)
            for ref, state, created in rows
        ]

    def requests(self, ref: str) -> list[tuple[str, GenerateRequest]]:
        """The prepared requests of a recorded batch, to create it when resuming."""
        return [
            (k, GenerateRequest.model_validate_json(r))
            for k, r in self.cache.execute("SELECT key, request FROM batch_items WHERE ref=? ORDER BY rowid", (ref,))
        ]

    def items(self, ref: str) -> dict[str, tuple[dict, str, list[str]]]:
        """key -> (identity, request JSON, dropped parameters) of the requests in a batch."""
        return {
            k: (json.loads(i), r, json.loads(d))
            for k, i, r, d in self.cache.execute(
                "SELECT key, identity, request, dropped FROM batch_items WHERE ref=?", (ref,)
            )
        }

    def all(self) -> list[dict[str, Any]]:
        cols = ("ref", "model", "state", "status", "requests", "created", "updated")
        return [
            dict(zip(cols, r, strict=True))
            for r in self.cache.execute(f"SELECT {', '.join(cols)} FROM batches ORDER BY created")
        ]


def cancel_batch(provider: Provider, batch_id: str) -> str:
    """Cancel one batch (``cocoeval batches --cancel``); returns the provider's status."""

    async def go() -> str:
        try:
            return await provider.batch_cancel(batch_id)
        finally:
            await provider.aclose()

    return asyncio.run(go())


@dataclass
class Pending:
    """One distinct request waiting for a batch (several calls of a run may share it)."""

    key: str
    provider: Provider
    prepared: GenerateRequest
    dropped: list[str]
    identity: dict[str, Any]
    waiters: list[Any] = field(default_factory=list)
    """The runner's handles for the calls this answers."""


Finish = Callable[[Pending, "GenerateResponse | CallError"], None]


def chunks(items: list[Pending], max_requests: int, max_bytes: int) -> list[list[Pending]]:
    """Cut into batches of at most ``max_requests`` requests and (roughly, with 10% room for the
    provider's own framing) ``max_bytes`` bytes."""
    out: list[list[Pending]] = [[]]
    size = 0
    for p in items:
        n = len(canonical_json(p.prepared.model_dump(mode="json")).encode()) + 200
        if out[-1] and (len(out[-1]) >= max_requests or size + n > 0.9 * max_bytes):
            out.append([])
            size = 0
        out[-1].append(p)
        size += n
    return [c for c in out if c]


TRANSIENT = ("server_error", "rate_limited", "timeout", "connection_error")
"""CallError reasons worth another attempt."""
RESULT_ATTEMPTS = 5
"""Polls at which an ended batch's results are read before its calls are failed for this run
(the batch stays recorded: the next run reads them again)."""


class _Group:
    """The batches of one provider identity in one run."""

    def __init__(self, ident: str, pending: list[Pending], store: BatchStore, finish: Finish) -> None:
        self.ident, self.store, self._finish = ident, store, finish
        self.prov = pending[0].provider
        self.model = str(self.prov.spec)
        self.by_key = {p.key: p for p in pending}
        self.settled: set[str] = set()
        self.tracked: dict[str, list[str]] = {}  # batch id -> keys
        self.count = 0
        """Requests in the batches this run submitted or resumed."""

    def finish(self, key: str, answer: GenerateResponse | CallError) -> None:
        if key in self.by_key and key not in self.settled:  # once, even if two batches hold it
            self.settled.add(key)
            self._finish(self.by_key[key], answer)

    async def submit(
        self, ref: str, items: list[tuple[str, GenerateRequest]], since: float, resume: bool, retries: int
    ) -> str:
        """Create the batch of a staged reference exactly once: before a retry (or when resuming)
        look for a batch an earlier attempt created, since its answer may have been lost. This
        loop stands in for the SDK's own retries, which cannot know that."""
        delay = 1.0
        for attempt in range(retries + 1):
            if attempt or resume:
                known = {r["ref"] for r in self.store.all()}
                found = await self.prov.batch_find(ref, since=since, requests=len(items), exclude=known)
                if found:
                    return found
            try:
                return await self.prov.batch_start(ref, items)
            except CallError as e:
                if e.reason not in TRANSIENT or attempt == retries:
                    raise
                log.warning("creating a batch from %s failed (%s); checking, then trying again", ref, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 60)
        raise AssertionError("unreachable")

    async def resume(self) -> None:
        """Batches an earlier or killed run recorded that hold some of these requests."""
        for ref, state, keys, created in self.store.open_batches(self.ident):
            if not self.by_key.keys() & set(keys):
                continue
            if state == "staged":  # recorded, but the batch may or may not have been created
                items = self.store.requests(ref)
                try:
                    batch_id = await self.submit(ref, items, created, resume=True, retries=self.prov.max_retries)
                except CallError as e:
                    if e.reason in TRANSIENT:  # keep the record: the next run tries again
                        self.fail_keys(keys, CallError(f"batch_{e.reason}", f"resuming {ref} failed: {e.detail}"))
                        continue
                    log.warning("could not create a batch from %s (%s); sending its requests anew", ref, e)
                    self.store.mark(ref, "collected", f"abandoned: {e}"[:500])
                    continue
                self.store.submitted(ref, batch_id)
                ref = batch_id
            log.info("resuming batch %s (%d requests) for %s", ref, len(keys), self.model)
            self.tracked[ref] = keys
            self.count += len(keys)

    def fail_keys(self, keys: list[str], why: CallError) -> None:
        for k in keys:
            self.finish(k, why)

    async def submit_new(self, max_requests: int | None) -> None:
        held = {k for ks in self.tracked.values() for k in ks}
        waiting = [p for k, p in self.by_key.items() if k not in held and k not in self.settled]
        limit_n, limit_bytes = self.prov.batch_limits or (50_000, 200 * 1024 * 1024)
        for chunk in chunks(waiting, min(limit_n, max_requests or limit_n), limit_bytes):
            items = [(p.key, p.prepared) for p in chunk]
            keys = [p.key for p in chunk]
            try:
                ref = await self.prov.batch_stage(items)
            except CallError as e:
                self.fail_keys(keys, CallError(f"batch_{e.reason}", f"preparing the batch failed: {e.detail}"))
                continue
            since = time.time()
            self.store.add(ref, self.ident, self.model, "staged", chunk)  # before the batch exists
            try:
                batch_id = await self.submit(ref, items, since, resume=False, retries=self.prov.max_retries)
            except CallError as e:  # the record stays: the next run finds or creates this batch
                self.fail_keys(keys, CallError(f"batch_{e.reason}", f"creating the batch failed: {e.detail}"))
                continue
            self.store.submitted(ref, batch_id)
            log.info("submitted batch %s (%d requests) for %s", batch_id, len(chunk), self.model)
            self.tracked[batch_id] = keys
            self.count += len(keys)

    async def poll(self, poll_s: float, status: Callable[[str], None] | None) -> None:
        infos: dict[str, BatchInfo] = {}
        unread: dict[str, int] = {}
        while self.tracked:
            for batch_id in list(self.tracked):
                try:
                    info = await self.prov.batch_get(batch_id)
                except CallError as e:
                    if e.reason == "batch_not_found":
                        self.lost(batch_id, e)
                    else:  # transient (the SDK's retries exhausted): poll again later
                        log.warning("polling batch %s failed (%s); will poll again", batch_id, e)
                    continue
                infos[batch_id] = info
                if not info.ended:
                    continue
                try:
                    await self.collect(info)
                except CallError as e:
                    if e.reason == "batch_not_found":
                        self.lost(batch_id, e)
                        continue
                    unread[batch_id] = unread.get(batch_id, 0) + 1
                    log.warning("reading the results of batch %s failed (%s)", batch_id, e)
                    if unread[batch_id] >= RESULT_ATTEMPTS:  # leave it recorded for the next run
                        self.fail_keys(
                            self.tracked.pop(batch_id),
                            CallError(
                                "batch_results_unavailable",
                                f"could not read the results of batch {batch_id}: {e}; the next run reads them again",
                            ),
                        )
                    continue
                del self.tracked[batch_id]
            if status is not None:
                status(
                    ", ".join(f"{i.id} {i.status} {i.done}/{i.total}" for b, i in infos.items() if b in self.tracked)
                )
            if self.tracked:
                await asyncio.sleep(poll_s)

    def lost(self, batch_id: str, e: CallError) -> None:
        log.warning("the provider does not know batch %s (%s): its requests will be sent again", batch_id, e)
        self.store.mark(batch_id, "collected", "not_found")
        self.fail_keys(
            self.tracked.pop(batch_id),
            CallError(
                "batch_not_found",
                f"{self.model} does not know batch {batch_id} (a key of another project or "
                "workspace? deleted?); the next run sends these requests again",
            ),
        )

    async def collect(self, info: BatchInfo) -> None:
        """Write every answer of an ended batch into the cache (answers to requests of another run
        that shared it too), mark it collected, then settle this run's requests. A fatal answer
        (e.g. no credit) stops the run once the others are stored."""
        results: dict[str, GenerateResponse | Exception] = {}
        if info.error is None:
            results = await self.prov.batch_results(info.id)  # CallError: not collected, read again
        stored = self.store.items(info.id)
        fatal: FatalLLMError | None = None
        for key, res in results.items():
            if isinstance(res, GenerateResponse):
                if key in self.by_key:
                    p = self.by_key[key]
                    identity, request, dropped = p.identity, p.prepared.model_dump(mode="json"), p.dropped
                elif key in stored:
                    identity, request, dropped = stored[key][0], json.loads(stored[key][1]), stored[key][2]
                else:
                    continue  # not a request of ours
                res.batch_id, res.dropped_params = info.id, dropped
                self.store.cache.put(key, identity, request, res.model_dump(mode="json"))
            elif isinstance(res, FatalLLMError):
                fatal = fatal or res
        self.store.mark(info.id, "collected", info.status)
        keys = self.tracked[info.id]
        ok = sum(isinstance(results.get(k), GenerateResponse) for k in keys)
        log.info("batch %s %s: %d answered, %d failed", info.id, info.status, ok, len(keys) - ok)
        if fatal is not None:
            raise fatal
        why = info.error or "the batch gave no result for it"
        for key in keys:
            got = results.get(key)
            self.finish(
                key,
                got
                if isinstance(got, GenerateResponse | CallError)
                else CallError(f"batch_{info.status}", f"batch {info.id} ended {info.status}: {why}"),
            )


async def run_batches(
    pending: list[Pending],
    store: BatchStore,
    *,
    poll_s: float,
    max_requests: int | None,
    finish: Finish,
    status: Callable[[str], None] | None = None,
) -> int:
    """Submit (or resume) and collect batches for ``pending``; ``finish`` is called once per
    pending request with its answer (already in the cache) or the reason it failed. Returns the
    number of requests in the batches submitted or resumed."""
    groups: dict[str, list[Pending]] = {}
    for p in pending:
        groups.setdefault(canonical_json(p.identity), []).append(p)
    runs = [_Group(ident, ps, store, finish) for ident, ps in groups.items()]

    async def one(g: _Group) -> None:
        await g.resume()
        await g.submit_new(max_requests)
        await g.poll(poll_s, status)
        for key in g.by_key.keys() - g.settled:  # never a call left without a result
            g.finish(key, CallError("batch_lost", "no batch answered this request; the next run sends it again"))

    async with asyncio.TaskGroup() as tg:  # a fatal error in one group cancels the others' polling
        for g in runs:
            tg.create_task(one(g))
    return sum(g.count for g in runs)
