"""Prices, token counting, usage/cost ledgers and dry-run estimates."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .base import GenerateRequest, Usage, parse_model_spec, provider_class
from .errors import InputError
from .secrets import redact_urls
from .yamlfile import DuplicateKeyError
from .yamlfile import safe_load as yaml_safe_load


class Price(BaseModel):
    """USD per 1M tokens: input, cached input and output (a table entry, or a model's own
    ``price:`` in ``llm.price``); never negative."""

    input: float = Field(ge=0, le=1e6)
    """Input not read from a prompt cache."""
    cached_input: float = Field(ge=0, le=1e6)
    """Input read from the provider's prompt cache (a server without one: the input price)."""
    output: float = Field(ge=0, le=1e6)
    """Output, reasoning tokens included."""
    cache_write: float | None = Field(None, ge=0, le=1e6)
    """Input written to the prompt cache (Anthropic: 1.25x input); None: the input price."""


_SNAPSHOT = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8})?(:.*)?")
"""What may follow a price-table name in a model name: a dated snapshot (``-2025-04-14``,
``-20250514``) and, for a fine-tuned model, its ``:org:suffix:id`` tail. Any other tail
(``gpt-5-nano`` after ``gpt-5``, ``claude-opus-4-5`` after ``claude-opus-4``) is another model,
often at another price: it is unknown until the table names it, never priced as its prefix."""


def _bare_spec(spec: str) -> str:
    """A model spec without its ``?key_env=`` tail (which variable holds the key is no other model)."""
    return spec.partition("?key_env=")[0]


class PriceTable(BaseModel):
    batch_discount: float = 0.5
    models: dict[str, Price]
    specs: dict[str, Price] = Field(default_factory=dict)
    """Prices given for model specs (``llm.price``): a spec named here, whole or by its
    PROVIDER/MODEL part, is priced by it before ``models`` and before a free provider's 0."""

    def with_specs(self, price: dict[str, Price]) -> PriceTable:
        """This table with ``price`` (model spec: its price) on top; itself when there is none."""
        if not price:
            return self
        new = self.model_copy(update={"specs": {**self.specs, **{_bare_spec(k): v for k, v in price.items()}}})
        new.__dict__.pop("_memo", None)  # the copy's look-ups are its own
        return new

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        p = Path(path) if path else Path(str(resources.files("cocoeval.llm").joinpath("prices.yaml")))
        try:
            return cls.model_validate(yaml_safe_load(p.read_text(encoding="utf-8")))
        except DuplicateKeyError as e:  # a model listed twice would keep the last price silently
            raise InputError(
                f"duplicate key {e.key!r} at line {e.line} (first at line {e.first_line})",
                file=str(p),
                hint="give each model once",
            ) from None
        except Exception as e:
            raise InputError(
                f"not a valid price table ({e})", file=str(p), hint="see cocoeval/llm/prices.yaml for the shape"
            ) from None

    def price_for(self, model_spec: str) -> Price | None:
        """Price of a model (None when unknown); free for in-process/self-hosted providers."""
        memo = self.__dict__.setdefault("_memo", {})  # looked up once per model, not per call
        if model_spec not in memo:
            memo[model_spec] = self._lookup(model_spec)
        return memo[model_spec]

    def _lookup(self, model_spec: str) -> Price | None:
        bare = _bare_spec(model_spec)
        for given in (bare, bare.partition("@http")[0]):
            if given in self.specs:
                return self.specs[given]
        spec = parse_model_spec(model_spec)
        cls = provider_class(spec.provider)
        if cls is not None and cls.billing == "free":
            return Price(input=0, cached_input=0, output=0)
        name = spec.model.split("/")[-1]
        best = max(
            (k for k in self.models if name.startswith(k) and _SNAPSHOT.fullmatch(name[len(k) :])),
            key=len,
            default=None,
        )
        return self.models[best] if best else None

    def cost(self, model_spec: str, usage: Usage, *, batch: bool = False) -> float | None:
        p = self.price_for(model_spec)
        if p is None:
            return None
        if usage.unknown is not None:  # usage the provider did not say (or said wrongly): no bill known
            free = not (p.input or p.cached_input or p.output or p.cache_write)
            return 0.0 if free else None
        written = min(usage.cache_write_tokens, max(usage.input_tokens - usage.cached_input_tokens, 0))
        fresh = max(usage.input_tokens - usage.cached_input_tokens - written, 0)
        write = p.input if p.cache_write is None else p.cache_write
        usd = (
            fresh * p.input
            + usage.cached_input_tokens * p.cached_input
            + written * write
            + usage.output_tokens * p.output
        ) / 1e6
        return usd * (self.batch_discount if batch else 1.0)


# ------------------------------------------------------------------ token counting

APPROX_CHARS_PER_TOKEN = 4
"""Fallback when no tokenizer is available offline: ~4 characters per token for English text
(OpenAI's rule of thumb); plus 4 tokens of overhead per message."""


@lru_cache(maxsize=1)
def _encoder() -> Any:
    """tiktoken's o200k_base when its file is already cached locally (it would need the network
    to download it); otherwise None."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not (os.path.isdir(cache_dir) and os.listdir(cache_dir)):
        return None
    try:
        import tiktoken

        return tiktoken.get_encoding("o200k_base")
    except Exception:
        return None


def token_method() -> str:
    return "tiktoken o200k_base" if _encoder() is not None else f"approximation ({APPROX_CHARS_PER_TOKEN} chars/token)"


def count_tokens(text: str) -> int:
    enc = _encoder()
    if enc is not None:
        return len(enc.encode(text, disallowed_special=()))
    return math.ceil(len(text) / APPROX_CHARS_PER_TOKEN)


def request_tokens(request: GenerateRequest) -> int:
    return sum(count_tokens(m.content) + 4 for m in request.messages)


# ------------------------------------------------------------------ ledgers


class Ledger:
    """Usage and cost totals by (stage, model), billed by the provider's rules: cached input at
    the cached rate, cache writes at the cache-write rate (``Price``), as the answers report them.

    ``lost_attempts`` / ``lost_input_tokens`` / ``lost_cost_usd`` ("paid, answer lost"): HTTP
    attempts that were sent and got no answer (a client-side timeout the SDK retried, or a call
    that timed out for good), or an answer whose body could not be read; the provider may have
    billed them, so their input tokens, estimated from the request, are counted as paid.
    ``cost_usd`` includes ``lost_cost_usd``; ``lost_cost_unknown_calls``: the calls whose lost
    attempts have no price (their cost is unknown, never $0; they count in ``cost_unknown_calls`` too).

    The token and cost fields count what this ledger's calls paid, never a cache hit.
    ``reused_*`` ("re-used, not paid again"): the answers taken from the call cache that were
    paid before (an earlier run, another process), with the usage they were paid for and what
    that cost (at the batch price for an answer that came from a batch), so that ``cost_usd +
    reused_cost_usd`` is what the answers used cost; a request asked twice in one run is paid once
    and counted once (a cache hit without usage).

    ``usage_unknown_calls``: answers whose usage the provider did not report, or reported as a
    negative or absurd count (``Usage.unknown``): none of their tokens are counted and each
    counts in ``cost_unknown_calls`` (its cost is unknown, never $0); a warning names the first
    of each stage and model."""

    FIELDS = (
        "calls",
        "cache_hits",
        "failed",
        "input_tokens",
        "cached_input_tokens",
        "cache_write_tokens",
        "output_tokens",
        "reasoning_tokens",
        "lost_attempts",
        "lost_input_tokens",
        "reused_calls",
        "reused_input_tokens",
        "reused_output_tokens",
        "reused_cost_unknown_calls",
        "usage_unknown_calls",
    )

    def __init__(self, prices: PriceTable | None = None, journal: str | os.PathLike[str] | None = None) -> None:
        self.prices = prices or PriceTable.load()
        self._rows: dict[tuple[str, str], dict[str, Any]] = defaultdict(self._zero)
        self.invocation = uuid.uuid4().hex[:16]
        """Names this ledger's lines in the journal (and its entry in a run's usage.json)."""
        self.journal = Path(journal) if journal is not None else None
        """A JSONL file each call that may have paid is appended to as it is counted (``invocation``,
        stage, model, what it added to the row), so that what a killed process paid is known
        (``journal_totals``); None: none is kept."""
        self._journal_lock = threading.Lock()
        self._journal_tail_checked = False

    def _journal_prefix(self) -> str:
        """Before this ledger's first line: when the journal ends in a line cut short (a process
        killed while writing it, a full disk), a newline and a ``torn_line_above`` marker, so that
        this line is not glued onto it and readers skip the cut line knowingly (``journal_totals``)."""
        self._journal_tail_checked = True
        assert self.journal is not None
        if (what := _not_a_file(self.journal)) is not None:
            raise OSError(f"it is {what}, not a file")
        try:
            with open(self.journal, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() == 0:
                    return ""
                f.seek(-1, os.SEEK_END)
                if f.read(1) == b"\n":
                    return ""
        except FileNotFoundError:
            return ""
        return (
            "\n"
            + json.dumps(
                {"torn_line_above": True, "invocation": self.invocation, "at": round(time.time(), 3)}, sort_keys=True
            )
            + "\n"
        )

    def _write_journal(self, stage: str, model: str, before: dict[str, Any]) -> None:
        after = self._rows[(stage, model)]
        line = {k: after[k] - before[k] for k in after if not k.startswith("reused") and after[k] != before[k]}
        line.update(invocation=self.invocation, stage=stage, model=redact_urls(model), at=round(time.time(), 3))
        assert self.journal is not None
        with self._journal_lock:
            try:  # appended and flushed: a kill -9 right after loses nothing; a crash of the OS may
                prefix = "" if self._journal_tail_checked else self._journal_prefix()
                with open(self.journal, "a", encoding="utf-8") as f:
                    f.write(prefix + json.dumps(line, sort_keys=True) + "\n")
            except OSError as e:  # the run goes on; what it paid is still in usage.json at its end
                logging.getLogger(__name__).warning(
                    "cannot append to the usage journal %s (%s): a kill of this process would lose its usage; "
                    "no more lines are written",
                    self.journal,
                    e.strerror or e,
                )
                self._journal_tail_checked = True
                self.journal = None

    def _zero(self) -> dict[str, Any]:
        return {
            **dict.fromkeys(self.FIELDS, 0),
            "cost_usd": 0.0,
            "lost_cost_usd": 0.0,
            "lost_cost_unknown_calls": 0,
            "cost_unknown_calls": 0,
            "reused_cost_usd": 0.0,
        }

    def add(self, stage: str, model: str, usage: Usage | None, *, cache_hit: bool, **kw: Any) -> float | None:
        """``_add``, and the line of a call that may have paid in the journal (when one is kept)."""
        if self.journal is None or cache_hit:
            return self._add(stage, model, usage, cache_hit=cache_hit, **kw)
        before = dict(self._rows[(stage, model)])
        cost = self._add(stage, model, usage, cache_hit=cache_hit, **kw)
        self._write_journal(stage, model, before)
        return cost

    def _add(
        self,
        stage: str,
        model: str,
        usage: Usage | None,
        *,
        cache_hit: bool,
        failed: bool = False,
        batch: bool = False,
        lost_attempts: int = 0,
        lost_input_tokens: int = 0,
    ) -> float | None:
        """Record one call; returns what it cost (0 for cache hits and for a failed call that billed
        nothing, None when a price it needs is unknown), the attempts it lost included. A failed
        call's ``usage`` (a refusal, a content filter: the provider bills them) counts like an
        answer's. A cache hit with ``usage``: an answer paid before, counted in ``reused_*``
        (``batch``: it came from a batch); without: one this run has already counted."""
        row = self._rows[(stage, model)]
        row["calls"] += 1
        row["cache_hits"] += int(cache_hit)
        row["failed"] += int(failed)
        if cache_hit:
            if usage is not None:
                row["reused_calls"] += 1
                row["reused_input_tokens"] += usage.input_tokens
                row["reused_output_tokens"] += usage.output_tokens
                was = self.prices.cost(model, usage, batch=batch)
                if was is None:
                    row["reused_cost_unknown_calls"] += 1
                else:
                    row["reused_cost_usd"] += was
            return 0.0
        cost = 0.0
        unknown = False
        if lost_attempts:
            row["lost_attempts"] += lost_attempts
            row["lost_input_tokens"] += lost_input_tokens
            lost = self.prices.cost(model, Usage(input_tokens=lost_input_tokens))
            if lost is None:
                unknown = True
                row["lost_cost_unknown_calls"] += 1
            else:
                row["lost_cost_usd"] += lost
                row["cost_usd"] += lost
                cost += lost
        if usage is not None and usage.unknown is not None:
            row["usage_unknown_calls"] += 1
            unknown = unknown or self.prices.cost(model, usage, batch=batch) is None  # a free model costs 0
            if row["usage_unknown_calls"] == 1:
                logging.getLogger(__name__).warning(
                    "%s (%s): %s; its tokens are not counted and its cost is unknown (this warning is given "
                    "once per stage and model; usage.json counts them in usage_unknown_calls)",
                    model,
                    stage,
                    usage.unknown,
                )
        elif usage is not None:
            row["input_tokens"] += usage.input_tokens
            row["cached_input_tokens"] += usage.cached_input_tokens
            row["cache_write_tokens"] += usage.cache_write_tokens
            row["output_tokens"] += usage.output_tokens
            row["reasoning_tokens"] += usage.reasoning_tokens
            paid = self.prices.cost(model, usage, batch=batch)
            if paid is None:
                unknown = True
            else:
                row["cost_usd"] += paid
                cost += paid
        if unknown:
            row["cost_unknown_calls"] += 1
            return None
        return cost

    def rows(self) -> list[dict[str, Any]]:
        """The rows by stage and model, as usage.json shows them (``shown_costs``: a cost none of
        whose calls has a known price is null); a key in a model's URL (refused by
        ``parse_model_spec``) would be ``[REDACTED]`` here."""
        return [shown_costs({"stage": s, "model": redact_urls(m), **v}) for (s, m), v in sorted(self._rows.items())]

    def totals(self) -> dict[str, Any]:
        out: dict[str, Any] = self._zero()
        for v in self._rows.values():
            for k in out:
                out[k] += v[k]
        return out


def shown_costs(row: dict[str, Any]) -> dict[str, Any]:
    """A ledger row or totals as a file shows them: ``cost_usd`` (and ``reused_cost_usd``) null when
    every call it would sum has an unknown price (a model with no ``price:`` and none in the table),
    so that an unknown cost never reads as $0; a partly known one keeps the known part, with
    ``cost_unknown_calls`` saying how many calls it leaves out."""
    out = dict(row)
    if out.get("cost_unknown_calls") and not out.get("cost_usd"):
        out["cost_usd"] = None
    if out.get("lost_cost_unknown_calls") and not out.get("lost_cost_usd"):
        out["lost_cost_usd"] = None
    if out.get("reused_cost_unknown_calls") and not out.get("reused_cost_usd"):
        out["reused_cost_usd"] = None
    return out


def _not_a_file(path: Path) -> str | None:
    """What ``path`` is when it exists and is no regular file (opening a named pipe waits forever)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "a folder" if stat.S_ISDIR(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device or socket"


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("a key given twice in one object")
    return d


MAX_JOURNAL_COUNT = 10**15
"""A journal line's count above this (tokens, calls, dollars of one call) is not one cocoeval wrote."""


def _journal_line_problem(d: Any) -> str | None:
    if not isinstance(d, dict):
        return f"a JSON {type(d).__name__}, not an object"
    if not isinstance(d.get("invocation"), str) or not d["invocation"]:
        return "no invocation id"
    for k, v in d.items():
        if k in ("invocation", "stage", "model"):
            if not isinstance(v, str):
                return f"{k} is not a string"
        elif k == "at":
            continue
        elif isinstance(v, bool) or not isinstance(v, int | float):
            return f"{k} is not a number ({json.dumps(v)[:40]})"
        elif not math.isfinite(v) or v < 0 or v > MAX_JOURNAL_COUNT:
            return f"{k} is negative or absurd ({v})"
    return None


def journal_totals(path: str | Path, unreadable: list[int] | None = None) -> dict[str, dict[str, Any]]:
    """What each invocation in a usage journal (``Ledger.journal``) paid, by its id: the sums of
    its lines. The last line, when a kill cut it short (no newline at its end), is skipped
    silently, as is a line cut short that a later invocation marked (``torn_line_above``). Any
    other line that is not a journal line (not JSON, not an object with an invocation id, a count
    that is not a non-negative number) is never counted nor dropped silently: a warning names the
    file and the line, the line stays in the file, and its number is appended to ``unreadable`` (0:
    the whole file, a folder or a named pipe in its place, cannot be read)."""
    out: dict[str, dict[str, Any]] = {}
    log = logging.getLogger(__name__)
    why = _not_a_file(Path(path))
    try:
        if why is not None:
            raise OSError(f"it is {why}, not a file")
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return out
    except OSError as e:
        log.warning(
            "warning: the usage journal %s cannot be read (%s): what invocations killed before their "
            "usage.json paid is not counted",
            path,
            e.strerror or e,
        )
        if unreadable is not None:
            unreadable.append(0)
        return out
    raw = data.split(b"\n")
    torn_last = not data.endswith(b"\n")
    if not torn_last:
        raw.pop()  # the empty piece after the last newline
    lines: list[str] = []
    parsed: list[Any] = []
    for b in raw:
        try:
            ln = b.decode("utf-8")
        except UnicodeDecodeError as e:
            lines.append(b.decode("utf-8", errors="replace"))
            parsed.append(ValueError(f"not valid UTF-8 ({e.reason} at byte {e.start})"))
            continue
        lines.append(ln)
        try:
            parsed.append(json.loads(ln, object_pairs_hook=_unique_pairs))
        except (ValueError, RecursionError) as e:
            parsed.append(e)
    bad: list[tuple[int, str]] = []
    for i, (ln, d) in enumerate(zip(lines, parsed, strict=True)):
        if isinstance(d, dict) and d.get("torn_line_above") is True:
            continue
        problem = (
            f"not JSON ({(str(d).splitlines() or [type(d).__name__])[0][:80]})"
            if isinstance(d, Exception)
            else _journal_line_problem(d)
        )
        if problem is not None:
            if not ln.strip() and i < len(lines) - 1:
                problem = "an empty line"
            nxt = parsed[i + 1] if i + 1 < len(parsed) else None
            marked = isinstance(nxt, dict) and nxt.get("torn_line_above") is True
            if isinstance(d, Exception) and ((nxt is None and torn_last) or marked):
                continue  # a line a kill cut short: what it counted is lost, as the kill lost it
            bad.append((i + 1, problem))
            continue
        row = out.setdefault(d["invocation"], {})
        for k, v in d.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and k != "at":
                row[k] = row.get(k, 0) + v
    for n, problem in bad:
        log.warning(
            "warning: %s line %d is not a usage journal line (%s): it is not counted (what that call paid is missing "
            "from all_invocations) and is left in the file",
            path,
            n,
            problem,
        )
    if unreadable is not None:
        unreadable.extend(n for n, _ in bad)
    return out


class Estimate(BaseModel):
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    """None when a model's price is unknown."""
    token_method: str


def estimate(
    calls: Iterable[tuple[str, GenerateRequest]],
    *,
    prices: PriceTable | None = None,
    expected_output_tokens: int | None = None,
    batch: bool = False,
) -> Estimate:
    """Forecast tokens and cost of (model spec, request) pairs before sending anything.
    Output tokens: ``expected_output_tokens`` per call, else each request's max_tokens."""
    prices = prices or PriceTable.load()
    n = tin = tout = 0
    cost: float | None = 0.0
    for model, req in calls:
        n += 1
        i = request_tokens(req)
        o = expected_output_tokens if expected_output_tokens is not None else (req.max_tokens or 0)
        tin += i
        tout += o
        c = prices.cost(model, Usage(input_tokens=i, output_tokens=o), batch=batch)
        cost = None if c is None or cost is None else cost + c
    return Estimate(calls=n, input_tokens=tin, output_tokens=tout, cost_usd=cost, token_method=token_method())
