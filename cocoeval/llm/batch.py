"""Batch mode: calls sent through the providers' batch APIs, their answers written into the cache.

The runner hands this module the calls that missed the cache and may be batched (see
``LLMConfig.batch``). They are grouped by model, cut into chunks within the provider's limits
(OpenAI 50,000 requests / 200 MB, Anthropic 100,000 / 256 MB, or ``batch_max_requests``),
submitted with the cache key as ``custom_id``, polled every ``batch_poll_s`` seconds, and each
answer is written into the call cache the moment its batch is collected, so the rest of the
pipeline reads it as if it had been answered live.

Nothing paid for is lost and nothing is sent twice: every submitted batch and the requests in it
are recorded in the cache's SQLite file (tables ``batches`` and ``batch_items``) before anything
else happens; a process killed at any moment and run again polls the batches it had submitted
instead of submitting the requests again. OpenAI's two steps (upload the input file, create the
batch) are recorded apart: after a kill between them, the batch is found by its input file, or
created from the uploaded file. (Anthropic creates a batch in one request; a kill in the
milliseconds between its answer and the record would submit that chunk again.) Requests a batch
failed (expired, errored, cancelled) are returned as failed calls with the reason and are not
cached, so a re-run sends just those again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, FatalLLMError
from .base import BatchInfo, CallError, GenerateRequest, GenerateResponse, Provider, canonical_json
from .cache import CallCache

log = logging.getLogger("cocoeval.llm.batch")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS batches (
      ref TEXT PRIMARY KEY,   -- the provider's batch id, or 'upload:<file id>' before it exists
      identity TEXT NOT NULL, -- provider identity (canonical JSON): provider, model, base URL
      model TEXT NOT NULL,    -- model spec
      state TEXT NOT NULL,    -- uploaded | submitted | collected
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
            raise ConfigError("batch mode writes the batches' answers into the call cache, which is "
                              f"{'off' if cache.path is None or cache.policy == 'off' else cache.policy}",
                              hint="set llm.cache to a file and llm.cache_policy to read_write (or refresh)")
        self.cache = cache
        for sql in _SCHEMA:
            cache.execute(sql)

    def add(self, ref: str, identity: str, model: str, state: str, items: list[Pending]) -> None:
        now = time.time()
        self.cache.execute_many([
            ("INSERT INTO batches VALUES (?,?,?,?,?,?,?,?)", (ref, identity, model, state, None, len(items), now, now)),
            *[("INSERT OR REPLACE INTO batch_items VALUES (?,?,?,?,?)",
               (ref, p.key, identity, canonical_json(p.prepared.model_dump(mode="json")), json.dumps(p.dropped)))
              for p in items]])

    def submitted(self, upload_ref: str, batch_id: str) -> None:
        """An uploaded input file became batch ``batch_id``."""
        now = time.time()
        self.cache.execute_many([
            ("UPDATE batches SET ref=?, state='submitted', updated=? WHERE ref=?", (batch_id, now, upload_ref)),
            ("UPDATE batch_items SET ref=? WHERE ref=?", (batch_id, upload_ref))])

    def mark(self, ref: str, state: str, status: str | None) -> None:
        self.cache.execute_many([("UPDATE batches SET state=?, status=?, updated=? WHERE ref=?",
                                  (state, status, time.time(), ref))]
                                + ([("DELETE FROM batch_items WHERE ref=?", (ref,))] if state == "collected" else []))

    def open_batches(self, identity: str) -> list[tuple[str, str, list[str]]]:
        """(ref, state, keys) of the batches of this provider identity not yet collected."""
        rows = self.cache.execute("SELECT ref, state FROM batches WHERE identity=? AND state != 'collected' "
                                  "ORDER BY created", (identity,))
        return [(ref, state, [k for (k,) in self.cache.execute("SELECT key FROM batch_items WHERE ref=?", (ref,))])
                for ref, state in rows]

    def items(self, ref: str) -> dict[str, tuple[dict, str, list[str]]]:
        """key -> (identity, request JSON, dropped parameters) of the requests in a batch."""
        return {k: (json.loads(i), r, json.loads(d)) for k, i, r, d in self.cache.execute(
            "SELECT key, identity, request, dropped FROM batch_items WHERE ref=?", (ref,))}

    def all(self) -> list[dict[str, Any]]:
        cols = ("ref", "model", "state", "status", "requests", "created", "updated")
        return [dict(zip(cols, r, strict=True)) for r in self.cache.execute(
            f"SELECT {', '.join(cols)} FROM batches ORDER BY created")]


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


async def run_batches(pending: list[Pending], store: BatchStore, *, poll_s: float, max_requests: int | None,
                      finish: Finish, status: Callable[[str], None] | None = None) -> None:
    """Submit (or resume) and collect batches for ``pending``; ``finish`` is called once per
    pending request with its answer (already in the cache) or the reason it failed."""
    groups: dict[str, list[Pending]] = {}
    for p in pending:
        groups.setdefault(canonical_json(p.identity), []).append(p)
    fatal: list[FatalLLMError] = []
    async with asyncio.TaskGroup() as tg:  # one model's failure cancels the others' polling
        for ident, ps in groups.items():
            tg.create_task(_run_group(ident, ps, store, poll_s, max_requests, finish, status, fatal))
    if fatal:
        raise fatal[0]


async def _run_group(ident: str, pending: list[Pending], store: BatchStore, poll_s: float,
                     max_requests: int | None, finish: Finish, status: Callable[[str], None] | None,
                     fatal: list[FatalLLMError]) -> None:
    prov = pending[0].provider
    model = str(prov.spec)
    by_key = {p.key: p for p in pending}
    tracked: dict[str, list[str]] = {}  # batch id -> keys
    # 1. batches already submitted (by a killed or earlier run) that hold some of these requests
    for ref, state, keys in store.open_batches(ident):
        if not by_key.keys() & set(keys):
            continue
        if state == "uploaded":
            try:
                batch_id = await prov.batch_adopt(ref.removeprefix("upload:"))
            except CallError as e:  # e.g. the file is gone: give it up and submit its requests anew
                log.warning("could not create a batch from %s (%s); submitting its requests again", ref, e)
                store.mark(ref, "collected", f"abandoned: {e}"[:500])
                continue
            store.submitted(ref, batch_id)
            ref = batch_id
        log.info("resuming batch %s (%d requests) for %s", ref, len(keys), model)
        tracked[ref] = keys
    waiting = [p for p in pending if not any(p.key in ks for ks in tracked.values())]
    # 2. new batches for the rest
    limit_n, limit_bytes = prov.batch_limits or (50_000, 200 * 1024 * 1024)
    for chunk in chunks(waiting, min(limit_n, max_requests or limit_n), limit_bytes):
        uploaded: list[str] = []

        def on_upload(file_id: str, chunk: list[Pending] = chunk, uploaded: list[str] = uploaded) -> None:
            store.add(f"upload:{file_id}", ident, model, "uploaded", chunk)
            uploaded.append(f"upload:{file_id}")

        try:
            batch_id = await prov.batch_create([(p.key, p.prepared) for p in chunk], on_upload)
        except CallError as e:
            for p in chunk:
                finish(p, CallError(f"batch_{e.reason}", f"submitting the batch failed: {e.detail}"))
            continue
        if uploaded:
            store.submitted(uploaded[0], batch_id)
        else:
            store.add(batch_id, ident, model, "submitted", chunk)
        log.info("submitted batch %s (%d requests) for %s", batch_id, len(chunk), model)
        tracked[batch_id] = [p.key for p in chunk]
    # 3. poll until every batch has ended, collecting each as it ends
    infos: dict[str, BatchInfo] = {}
    while tracked:
        for batch_id in list(tracked):
            try:
                info = await prov.batch_get(batch_id)
            except CallError as e:  # transient (the SDK's retries exhausted): poll again later
                log.warning("polling batch %s failed (%s); will poll again", batch_id, e)
                continue
            infos[batch_id] = info
            if info.ended:
                await _collect(prov, info, store, by_key, finish, fatal)
                del tracked[batch_id]
        if status is not None:
            status(", ".join(f"{i.id} {i.status} {i.done}/{i.total}" for b, i in infos.items() if b in tracked))
        if tracked:
            await asyncio.sleep(poll_s)


async def _collect(prov: Provider, info: BatchInfo, store: BatchStore, by_key: dict[str, Pending],
                   finish: Finish, fatal: list[FatalLLMError]) -> None:
    """Write every answer of an ended batch into the cache (also answers to requests of another
    run that shared this batch), then settle this run's requests."""
    results: dict[str, GenerateResponse | Exception] = {}
    if info.error is None:
        try:
            results = await prov.batch_results(info.id)
        except CallError as e:
            info = info.model_copy(update={"error": f"reading its results failed: {e}"})
    items = store.items(info.id)
    for key, (identity, request, dropped) in items.items():
        res = results.get(key)
        if isinstance(res, GenerateResponse):
            res.batch_id, res.dropped_params = info.id, dropped
            store.cache.put(key, identity, json.loads(request), res.model_dump(mode="json"))
        elif isinstance(res, FatalLLMError):
            fatal.append(res)
        elif res is None:
            why = info.error or "the batch gave no result for it"
            results[key] = CallError(f"batch_{info.status}", f"batch {info.id} ended {info.status}: {why}")
    store.mark(info.id, "collected", info.status)
    ok = sum(isinstance(r, GenerateResponse) for r in results.values())
    log.info("batch %s %s: %d answered, %d failed", info.id, info.status, ok, len(items) - ok)
    for key in items:
        p = by_key.get(key)
        res = results.get(key)
        if p is not None and not isinstance(res, FatalLLMError):
            finish(p, res if isinstance(res, GenerateResponse | CallError)
                   else CallError("malformed_response", f"unexpected batch result {res!r}"))
