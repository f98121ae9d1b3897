"""The concurrent runner: cache lookups, rate limits, the SDKs' own retries, accounting.

Each completed call is written to the cache the moment it completes, so a run killed at any time
(even ``kill -9``) and re-run sends exactly the calls that had not completed. Fatal provider
errors stop the run with a message that says what to fix; per-call failures (context length,
content filter, malformed answer, retries exhausted) are returned as failed results with their
reason and are not cached, so a re-run tries them again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiolimiter import AsyncLimiter
from pydantic import ValidationError
from tqdm.auto import tqdm

from . import providers as _providers  # noqa: F401  (registers the built-in providers)
from ._attempts import track
from ._claims import Claims
from ._config import Call, CallResult, LLMConfig
from ._groups import FirstOfGroup
from ._sync import run_sync
from .base import (
    CallError,
    GenerateRequest,
    GenerateResponse,
    Provider,
    Usage,
    canonical_json,
    get_provider,
    keyed_request,
)
from .batch import BatchStore, Pending, run_batches
from .cache import CallCache
from .errors import ConfigError, CostCapReached, FatalLLMError
from .secrets import install_log_redaction
from .usage import Ledger, journal_totals, request_tokens
from .workers import WorkerPool, raise_reply, worker_module


class Runner:
    """Runs calls through providers, the cache and the limits. Reusable across runs."""

    def __init__(
        self,
        config: LLMConfig | None = None,
        *,
        cache: CallCache | None = None,
        journal: str | os.PathLike[str] | None = None,
        earlier: tuple[float, int] = (0.0, 0),
    ) -> None:
        """``journal``: a file each call that may have paid is appended to as it is counted
        (``Ledger.journal``), so that what a killed process paid is known afterwards; under a cost
        cap (``max_usd``) what earlier invocations paid by that journal counts against it.
        ``earlier``: what earlier invocations the journal does not count paid (USD at known prices,
        calls of unknown cost; a run directory's from before its journal was kept): counted too."""
        self.config = config or LLMConfig()
        self.cache = cache or CallCache(self.config.cache, self.config.cache_policy)
        self.ledger = Ledger(self.config.price_table(), journal=journal)
        self.spent_before = 0.0
        """What earlier invocations on ``journal`` paid (known prices): counted against ``max_usd``."""
        self.unknown_before = 0
        """Calls of unknown cost the earlier invocations on ``journal`` made: a cap is then refused
        (``_check_prices``), since what they paid cannot be counted against it."""
        if self.config.max_usd is not None and journal is not None:
            journaled = journal_totals(Path(journal)).values()
            self.spent_before = earlier[0] + sum(float(v.get("cost_usd") or 0.0) for v in journaled)
            self.unknown_before = earlier[1] + sum(int(v.get("cost_unknown_calls") or 0) for v in journaled)
        self.journal = Path(journal) if journal is not None else None
        self.sent = 0
        """Requests sent live."""
        self.batched = 0
        """Requests in the batches this runner submitted or resumed."""
        self.progress: dict[str, int] = {"calls": 0, "hits": 0, "failed": 0}
        """The last run's calls so far, and of them the cache hits and the failed ones (the
        progress bar's counts: calls, not attempts, and this run's only; ``ledger`` has all runs')."""
        self._paid: set[str] = set()  # answers it paid: a cache hit of one is no answer re-used from before
        self._pool: WorkerPool | None = None
        self._claims: Claims | None = None
        self._active = 0
        """Runs in progress (close() waits for none: it refuses while there are any)."""
        install_log_redaction()

    # ------------------------------------------------------------------ public
    def run(self, calls: Sequence[Call]) -> list[CallResult]:
        """Run calls and return results in order (works inside Jupyter's running loop too)."""
        return run_sync(lambda: self.arun(calls))

    async def arun(self, calls: Sequence[Call]) -> list[CallResult]:
        self._active += 1
        try:
            return await self._arun(calls)
        finally:
            self._active -= 1

    async def _arun(self, calls: Sequence[Call]) -> list[CallResult]:
        cfg = self.config
        self._check_prices(calls)
        not_sent: list[int] = []
        """Calls a cost cap kept from being sent (``CostCapReached`` once those in flight end)."""
        pool = self.workers() if cfg.processes > 1 else None
        if pool is not None:
            await pool.enter()  # the processes start with the first live call
        providers: dict[str, Provider] = {}
        ready: set[str] = set()
        results: list[CallResult | None] = [None] * len(calls)
        sem = asyncio.Semaphore(cfg.concurrency)
        rpm = AsyncLimiter(cfg.rpm, 60) if cfg.rpm else None
        tpm = AsyncLimiter(cfg.tpm, 60) if cfg.tpm else None
        bar = tqdm(total=len(calls), disable=not cfg.progress, unit="call", dynamic_ncols=True)
        inflight: dict[str, asyncio.Future] = {}
        claims = self.claims()
        held: set[str] = set()
        """Keys this run claimed whose answer or failure has not come yet."""
        at_worker: set[str] = set()
        """Keys a worker process is sending (a stopped run leaves their claims to the worker)."""
        parked: set[str] = set()
        """Keys another process has claimed: their calls wait in ``deferred`` for its answer."""
        deferred: collections.deque[tuple[int, Call, bool]] = collections.deque()

        def let_go(key: str, failed: bool) -> None:
            """The claim of ``key`` ends: answered (the cache dropped it) or failed (let go)."""
            if key in held:
                held.discard(key)
                if failed and claims is not None:
                    claims.release([key])

        def provider_for(model: str) -> Provider:
            if model not in providers:
                providers[model] = get_provider(model, max_retries=cfg.max_retries, timeout_s=cfg.timeout_s)
            return providers[model]

        before = self.ledger.totals()  # the ledger counts every run of this Runner; the bar, this one's calls
        counts = {"calls": 0, "hits": 0, "failed": 0}
        self.progress = dict(counts)

        def done(i: int, res: CallResult) -> None:
            was, results[i] = results[i], res
            for r, sign in ((was, -1), (res, 1)):  # each call counted once, however often it is told
                if r is not None:
                    counts["calls"] += sign
                    counts["hits"] += sign * int(r.cache_hit)
                    counts["failed"] += sign * int(r.status == "failed")
            self.progress = dict(counts)
            if bar.disable:
                return
            if was is None:
                bar.update(1)
            t = self.ledger.totals()
            bar.set_postfix(
                hits=counts["hits"],
                failed=counts["failed"],
                tok=f"{t['input_tokens'] - before['input_tokens']}/{t['output_tokens'] - before['output_tokens']}",
                usd=_usd_so_far(
                    t["cost_usd"] - before["cost_usd"], t["cost_unknown_calls"] - before["cost_unknown_calls"]
                ),
                refresh=False,
            )

        identities: dict[str, tuple[dict, str]] = {}

        def lookup(call: Call) -> tuple[Provider, GenerateRequest, list[str], tuple[dict, str, str], dict]:
            """Provider, prepared request, dropped parameters, (identity, its JSON, the request's
            JSON) and the result's base fields (key, model, stage, tag)."""
            prov = provider_for(call.model)
            prepared, dropped = prov.prepare(call.request)
            if call.model not in identities:
                identity = prov.cache_identity()
                identities[call.model] = (identity, canonical_json(identity))
            identity, identity_json = identities[call.model]
            key, request_json = keyed_request(identity_json, prepared)
            return (
                prov,
                prepared,
                dropped,
                (identity, identity_json, request_json),
                {"key": key, "model": call.model, "stage": call.stage, "tag": call.tag},
            )

        def from_cache(i: int, call: Call, base: dict) -> bool:
            stored = self.cache.get(base["key"])
            if stored is None:
                return False
            try:
                resp = GenerateResponse.model_validate(stored)
            except ValidationError as e:  # a row of an older format: sent again (cache.py)
                self.cache.unusable(base["key"], f"its stored answer is not a response ({e.errors()[0]['msg']})")
                return False
            res = CallResult(**base, status="ok", cache_hit=True, cost_usd=0.0, response=resp)
            # paid before (an earlier run, another process): re-used, at what it cost then
            self.ledger.add(
                call.stage,
                call.model,
                None if base["key"] in self._paid else resp.usage,
                cache_hit=True,
                batch=resp.batch_id is not None,
            )
            done(i, res)
            return True

        def make_ready(call: Call, prov: Provider) -> None:
            if call.model not in ready:
                prov.check_ready()  # a missing key stops the run before anything is sent
                ready.add(call.model)

        async def one(i: int, call: Call, again: bool = False) -> bool:
            """Run one call; False when another process holds its claim (it waits in
            ``deferred``). ``again``: the deferred first call of its key, tried again."""
            prov, prepared, dropped, identity, base = lookup(call)
            key = base["key"]
            if key in inflight and not again:  # the same request twice in one run: send it once
                if key in parked:  # never block on a parked key: its call may be queued behind us
                    deferred.append((i, call, False))
                    return False
                try:
                    res = await asyncio.shield(inflight[key])
                except _NotSent:  # its first was kept back by the cost cap
                    not_sent.append(i)
                    return True
                done(i, res.model_copy(update={**base, "cache_hit": True, "cost_usd": 0.0}))
                self.ledger.add(call.stage, call.model, None, cache_hit=True, failed=res.status == "failed")
                return True
            if again:
                fut = inflight[key]
            else:
                fut = inflight[key] = asyncio.get_running_loop().create_future()
            try:
                if not again and from_cache(i, call, base):
                    res = results[i]
                else:
                    state = claims.claim(key, look=again) if claims is not None else "mine"
                    if state == "held":  # another process is sending it: wait for its answer
                        parked.add(key)
                        deferred.append((i, call, True))
                        return False
                    if state == "answered" and from_cache(i, call, base):
                        res = results[i]
                    else:
                        if claims is not None:
                            held.add(key)
                        parked.discard(key)
                        make_ready(call, prov)
                        async with first_of_group(call.model, prepared.cache_group):
                            sent = await self._send(
                                prov, prepared, dropped, base, identity, call, sem, rpm, tpm, pool, at_worker
                            )
                        if sent is None:  # the cost cap: not sent; its claim is let go for a later run
                            let_go(key, True)
                            parked.discard(key)
                            not_sent.append(i)
                            fut.set_exception(_NotSent())
                            fut.exception()  # retrieved: a duplicate waiting on it is told by the exception
                            return True
                        res = sent
                        let_go(key, res.status == "failed")
                        done(i, res)
                parked.discard(key)
                fut.set_result(res)
            except BaseException as e:
                parked.discard(key)
                if key not in at_worker:  # a worker still sending it keeps the claim until it ends
                    let_go(key, True)
                if not fut.done():
                    fut.set_exception(e)
                    fut.exception()  # retrieved: other waiters re-raise it themselves
                raise
            return True

        first_of_group = FirstOfGroup().turn  # calls sharing a prompt prefix: the first alone

        pause = {"misses": 0, "sleep": 0.05}

        async def wait_for_others() -> None:
            """Calls other processes claimed: poll the cache (with backoff) until each is answered,
            or its claim is let go or taken over (then it is sent here)."""
            while deferred:
                i, call, again = deferred.popleft()
                if await one(i, call, again):
                    pause.update(misses=0, sleep=0.05)
                    continue
                pause["misses"] += 1
                if pause["misses"] >= len(deferred):  # a whole round without progress
                    pause["misses"] = 0
                    if not bar.disable:
                        bar.set_description_str(f"waiting for {len(parked)} call(s) of another process", refresh=True)
                    await asyncio.sleep(pause["sleep"])
                    pause["sleep"] = min(pause["sleep"] * 2, 2.0)
                else:
                    await asyncio.sleep(0)

        live: list[tuple[int, Call]] = list(enumerate(calls))
        batched: dict[str, Pending] = {}
        store: BatchStore | None = None

        def split_batchable() -> None:
            """Batch mode: look the batchable calls up now; the misses go to run_batches."""
            nonlocal live, store
            store = BatchStore(self.cache)  # before anything is sent: batch mode needs the cache
            live = []
            for i, call in enumerate(calls):
                prov = provider_for(call.model)
                if not prov.batch or (call.dependent and cfg.batch_dependent == "live"):
                    live.append((i, call))
                    continue
                _, prepared, dropped, (identity, _, _), base = lookup(call)
                key = base["key"]
                if key in batched:
                    batched[key].waiters.append((i, call, base))
                elif not from_cache(i, call, base):
                    state = claims.claim(key) if claims is not None else "mine"
                    if state != "mine":  # another process has it (or has just answered it)
                        live.append((i, call))
                        continue
                    if claims is not None:
                        held.add(key)
                    make_ready(call, prov)
                    batched[key] = Pending(key, prov, prepared, dropped, identity, [(i, call, base)])

        def settle(p: Pending, answer: GenerateResponse | CallError) -> None:
            let_go(p.key, isinstance(answer, CallError))
            for n, (i, call, base) in enumerate(p.waiters):
                if isinstance(answer, CallError):  # a refused request of a batch is billed once, at the batch price
                    cost = self.ledger.add(
                        call.stage,
                        call.model,
                        answer.usage if n == 0 else None,
                        cache_hit=False,
                        failed=True,
                        batch=True,
                    )
                    done(
                        i,
                        CallResult(
                            **base,
                            status="failed",
                            reason=answer.reason,
                            detail=answer.detail[:500],
                            cost_usd=cost,
                            failed_usage=answer.usage if n == 0 else None,
                        ),
                    )
                    continue
                self._paid.add(p.key)
                cost = self.ledger.add(
                    call.stage, call.model, answer.usage if n == 0 else None, cache_hit=n > 0, batch=True
                )
                done(i, CallResult(**base, status="ok", response=answer, cost_usd=cost, cache_hit=n > 0))

        def batch_status(text: str) -> None:
            if not bar.disable and text:
                bar.set_description_str(f"batches: {text}"[:80], refresh=True)

        try:
            if cfg.batch:
                split_batchable()
            pending = iter(live)

            async def worker() -> None:
                # a fixed pool pulling from one iterator: calls are prepared as they are sent,
                # not all at start (which would stall the loop before the first answers)
                for i, c in pending:
                    await one(i, c)
                await wait_for_others()

            batch_task = None
            async with asyncio.TaskGroup() as tg:
                if batched and store is not None:
                    batch_task = tg.create_task(
                        run_batches(
                            list(batched.values()),
                            store,
                            poll_s=cfg.batch_poll_s,
                            max_requests=cfg.batch_max_requests,
                            finish=settle,
                            status=batch_status,
                        )
                    )
                # twice the concurrency: calls waiting for the first of their prompt-cache group
                # hold a worker, not a sending slot (sends are limited to ``concurrency`` by sem)
                for _ in range(min(2 * cfg.concurrency, len(live))):
                    tg.create_task(worker())
            if batch_task is not None:
                self.batched += batch_task.result()
        except BaseExceptionGroup as eg:
            fatal = [e for e in _leaves(eg) if isinstance(e, FatalLLMError)]
            if fatal:
                raise fatal[0] from None
            others = [e for e in _leaves(eg) if not isinstance(e, asyncio.CancelledError)]
            raise (others[0] if others else eg) from None
        finally:
            bar.close()
            if claims is not None and held - at_worker:  # a stopped run: others may send these
                claims.release(held - at_worker)
            if pool is not None:
                await pool.leave()
            for p in providers.values():
                with contextlib.suppress(Exception):
                    await p.aclose()
        if not_sent:  # the calls in flight have ended (answered, cached, counted): the run stops here
            t = self.ledger.totals()
            raise CostCapReached(
                spent_usd=self.spent(),
                max_usd=float(cfg.max_usd or 0.0),
                not_sent=len(not_sent),
                unknown_calls=t["cost_unknown_calls"],
            )
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:  # never hand back a shorter list: results are matched to calls by position
            raise RuntimeError(f"internal error: {len(missing)} call(s) got no result (first: {calls[missing[0]].tag})")
        return results  # type: ignore[return-value]

    async def _send(
        self,
        prov: Provider,
        prepared: GenerateRequest,
        dropped: list[str],
        base: dict,
        identity: tuple[dict, str, str],
        call: Call,
        sem: asyncio.Semaphore,
        rpm: AsyncLimiter | None,
        tpm: AsyncLimiter | None,
        pool: WorkerPool | None,
        at_worker: set[str],
    ) -> CallResult | None:
        """Send one call and count it; None, sending nothing, when the cost cap (``max_usd``) has been
        reached by the time it may go out (after the concurrency slot and the rate limits)."""
        async with sem:
            if self._over_cap():
                return None
            module = worker_module(prov) if pool is not None else None
            if pool is not None and module is not None:  # limits are taken when a call can go out
                await pool.prepare(call.model, module)
                if self._claims is not None:  # its workers may answer this process's claims
                    self._claims.set_pids([os.getpid(), *pool.pids()])
            if rpm:
                await rpm.acquire()
            if tpm:
                need = request_tokens(prepared) + (prepared.max_tokens or 0)
                await tpm.acquire(min(need, tpm.max_rate))
            if self._over_cap():
                return None
            self.sent += 1
            if pool is not None and module is not None:
                at_worker.add(base["key"])
                reply = await pool.call(
                    prov, module, call.stage, prepared, dropped, base["key"], identity[1], identity[2]
                )
                at_worker.discard(base["key"])
                return self._from_worker(reply, base, call)
            with track() as attempts:
                try:
                    resp = await prov.generate(prepared)
                except CallError as e:  # what it billed (a refusal's usage, lost attempts) counts
                    lost = attempts.lost(e)
                    cost = self.ledger.add(
                        call.stage,
                        call.model,
                        e.usage,
                        cache_hit=False,
                        failed=True,
                        lost_attempts=lost,
                        lost_input_tokens=lost * request_tokens(prepared),
                    )
                    return CallResult(
                        **base,
                        status="failed",
                        reason=e.reason,
                        detail=e.detail[:500],
                        cost_usd=cost,
                        failed_usage=e.usage,
                    )
        resp.dropped_params = dropped
        # persisted the moment it completes
        self.cache.put(base["key"], identity[1], identity[2], resp.model_dump(mode="json"))
        self._paid.add(base["key"])
        lost = attempts.lost()
        cost = self.ledger.add(
            call.stage,
            call.model,
            resp.usage,
            cache_hit=False,
            lost_attempts=lost,
            lost_input_tokens=lost * request_tokens(prepared),
        )
        return CallResult(**base, status="ok", response=resp, cost_usd=cost)

    def spent(self) -> float:
        """What counts against ``max_usd``: what earlier invocations on the journal paid and what
        every run of this Runner paid (known prices; lost attempts included)."""
        return self.spent_before + self.ledger.totals()["cost_usd"]

    def _over_cap(self) -> bool:
        """Whether ``max_usd`` forbids sending: the spend reached it, or a call's cost is unknown
        (its usage was not reported), so the spend can no longer be held to it."""
        cap = self.config.max_usd
        if cap is None:
            return False
        return self.ledger.totals()["cost_unknown_calls"] > 0 or self.spent() >= cap

    def _check_prices(self, calls: Sequence[Call]) -> None:
        """Under a cost cap every model must have a known price: refused before anything is sent."""
        if self.config.max_usd is None:
            return
        if self.unknown_before:
            raise unknown_spend_refusal(self.config.max_usd, self.journal, self.unknown_before)
        unknown = sorted({c.model for c in calls if self.ledger.prices.price_for(c.model) is None})
        if unknown:
            raise ConfigError(
                f"a cost cap (max_usd ${self.config.max_usd:g}) is set and the price of {', '.join(unknown)} is "
                "unknown: its spend could not be counted against the cap; nothing was sent",
                hint="give its price, USD per 1M tokens, in the llm: section: price: {MODEL_SPEC: {input: X, "
                "cached_input: Y, output: Z}} (docs/cost.md), or leave the cap out",
            )

    def claims(self) -> Claims | None:
        """This Runner's claims in the cache (read_write only: see ``_claims.py``)."""
        if self._claims is None and self.cache.policy == "read_write" and self.cache.writes_enabled:
            self._claims = Claims(self.cache)
        return self._claims

    def workers(self) -> WorkerPool:
        """The worker processes (``processes`` > 1); they start with the first live call."""
        if self._pool is None:
            method = weakref.WeakMethod(self._account)  # the pool must not keep this Runner alive

            def account(reply: dict[str, Any], stage: str, model: str) -> None:
                if (bound := method()) is not None:
                    bound(reply, stage, model)

            self._pool = WorkerPool(
                self.config.processes,
                cache=self.cache,
                max_retries=self.config.max_retries,
                timeout_s=self.config.timeout_s,
                account=account,
            )
            weakref.finalize(self, self._pool.close, 5.0)  # workers end with a Runner nobody holds
        return self._pool

    def _account(self, reply: dict[str, Any], stage: str, model: str) -> tuple[GenerateResponse | None, float | None]:
        """Count a worker's answer (which it cached itself): (response, cost), or (None, a failure's cost)."""
        lost = {"lost_attempts": reply.get("lost", 0), "lost_input_tokens": reply.get("lost_tokens", 0)}
        if "ok" in reply:
            resp = GenerateResponse.model_validate(reply["ok"])
            if reply.get("key"):
                self._paid.add(reply["key"])
            if self.cache.writes_enabled:
                self.cache.writes += 1
            return resp, self.ledger.add(stage, model, resp.usage, cache_hit=False, **lost)
        cost = None
        if "error" in reply:  # what the failed call billed (a refusal's usage, lost attempts) counts
            usage = Usage.model_validate(reply["usage"]) if reply.get("usage") else None
            cost = self.ledger.add(stage, model, usage, cache_hit=False, failed=True, **lost)
        if self._claims is not None and reply.get("key"):
            self._claims.release([reply["key"]])  # a failed call of a stopped run: others may retry it
        return None, cost

    def _from_worker(self, reply: dict[str, Any], base: dict, call: Call) -> CallResult:
        """A worker's reply as this process's result."""
        resp, cost = self._account(reply, call.stage, call.model)
        if resp is not None:
            return CallResult(**base, status="ok", response=resp, cost_usd=cost)
        if "error" in reply:
            return CallResult(
                **base,
                status="failed",
                reason=reply["error"]["reason"],
                detail=str(reply["error"]["detail"])[:500],
                cost_usd=cost,
                failed_usage=Usage.model_validate(reply["usage"]) if reply.get("usage") else None,
            )
        raise_reply(reply, f"{call.model} ({call.tag})")

    def close(self) -> None:
        """Close the cache and end the worker processes; refused (with a warning) while a run is
        in progress, whose answers still have to be cached."""
        if self._active:
            logging.getLogger(__name__).warning(
                "Runner.close() while %d run(s) are in progress: left open; close it after they end", self._active
            )
            return
        busy: list[int] = []
        if self._pool is not None:
            busy = self._pool.close()
            self._pool = None
        if self._claims is not None:  # busy workers keep their calls' claims until they exit
            self._claims.close(keep=bool(busy))
            self._claims = None
        self.cache.close()


def unknown_spend_refusal(max_usd: float, journal: Path | None, unknown: int) -> ConfigError:
    """The refusal of a cost cap on a usage journal that counts ``unknown`` calls of unknown cost:
    what they paid cannot be counted against the cap (never as $0)."""
    return ConfigError(
        f"a cost cap (max_usd ${max_usd:g}) is set and the earlier invocations on this run directory (its usage "
        f"journal {journal}, its usage.json) made {unknown} call(s) of unknown cost (sent to a model without a "
        "price): what they paid cannot be counted against the cap; nothing was sent",
        hint="give every model a price in the llm: section (price: {MODEL_SPEC: {input: X, cached_input: Y, "
        "output: Z}}, docs/cost.md) and use the cap on a new run directory (another out:), or leave the cap out "
        "for this one",
    )


def _usd_so_far(usd: float, unknown: int) -> str:
    """The progress bar's cost: "unknown" when no call's price is known, never 0.0000."""
    if not unknown:
        return f"{usd:.4f}"
    return "unknown" if not usd else f"{usd:.4f}+unknown"


class _NotSent(Exception):
    """A call the cost cap kept back: told to the duplicates of its request waiting on it."""


def _leaves(eg: BaseExceptionGroup) -> list[BaseException]:
    out: list[BaseException] = []
    for e in eg.exceptions:
        out += _leaves(e) if isinstance(e, BaseExceptionGroup) else [e]
    return out
