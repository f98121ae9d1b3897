"""The providers' prompt-cache billing rules, applied to wire request bodies.

Used twice: by the fake server, which reports cached tokens the way the providers do, and by
``cocoeval estimate``, which bills the planned requests in the order the scheduler sends them.

OpenAI (and Azure), automatic: a request's longest common prefix with a recent request (same
model and structured-output schema, routed to the same cache: same ``prompt_cache_key``) is
billed as cached, from 1,024 tokens on and in steps of 128 tokens. Anthropic, explicit: at most
4 ``cache_control`` breakpoints per request; at each, the prefix up to it is looked up (also at
the 20 block boundaries before it) and, when missing, written; a prefix shorter than the model's
minimum is never cached. Reads bill 0.1x the input price, writes 1.25x (``prices.yaml``). Both
forget a prefix a few minutes after its last use (``ttl_s``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

OPENAI_MIN_TOKENS = 1024
OPENAI_STEP_TOKENS = 128
ANTHROPIC_MAX_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK_BLOCKS = 20
DEFAULT_TTL_S = 300.0
ANTHROPIC_MIN_TOKENS: dict[str, int] = {
    "claude-3-haiku": 2048,
    "claude-3-5-haiku": 2048,
    "claude-haiku-3": 2048,
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
}
"""Minimum cacheable prompt length by model-name prefix (Anthropic's documentation); other
models 1,024 tokens."""


def anthropic_min_tokens(model: str) -> int:
    name = model.split("/")[-1]
    best = max((k for k in ANTHROPIC_MIN_TOKENS if name.startswith(k)), key=len, default=None)
    return ANTHROPIC_MIN_TOKENS[best] if best else 1024


def chars_tokens(text: str) -> int:
    """The fake server's token count: characters / 4, rounded up."""
    return math.ceil(len(text) / 4)


def openai_cached(prefix_tokens: int) -> int:
    """Tokens OpenAI bills as cached for a prefix of this many tokens shared with a recent request."""
    return prefix_tokens // OPENAI_STEP_TOKENS * OPENAI_STEP_TOKENS if prefix_tokens >= OPENAI_MIN_TOKENS else 0


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return ""


_MARK = re.compile("\x1e[a-z_]*\x1f")


def _visible(text: str) -> str:
    """The prompt text without the role marks the flattening adds (they count no tokens)."""
    return _MARK.sub("", text)


def _lcp(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over C-speed slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class OpenAIPrefixCache:
    """OpenAI's automatic prompt caching. ``bill(body)`` -> cached input tokens of that request
    (and the request is remembered). Requests are compared with the ``keep`` most recent ones of
    their route: same model, schema and ``prompt_cache_key`` (without a key every request of a
    model shares one route, so a prefix seen hundreds of requests earlier is gone)."""

    def __init__(
        self,
        tokens: Callable[[str], int] = chars_tokens,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        keep: int = 64,
        keep_keyed: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tokens, self.ttl_s, self.keep, self.keep_keyed, self.clock = tokens, ttl_s, keep, keep_keyed, clock
        self._routes: dict[str, deque[tuple[float, str]]] = {}

    @staticmethod
    def flatten(body: dict) -> tuple[str, str]:
        """(route, prompt text): the text every message contributes, in order, with its role."""
        route = json.dumps(
            [body.get("model"), body.get("response_format"), body.get("tools"), body.get("prompt_cache_key")],
            sort_keys=True,
            default=str,
        )
        msgs = ms if isinstance(ms := body.get("messages"), list) else []
        text = "".join(f"\x1e{m.get('role')}\x1f{_text(m.get('content'))}" for m in msgs if isinstance(m, dict))
        return route, text

    def bill(self, body: dict) -> int:
        cached, store = self.look(body)
        store()
        return cached

    def look(self, body: dict) -> tuple[int, Callable[[], None]]:
        """(cached tokens, store): what the request reads from the cache as it arrives, and the
        function that writes its prefix to the cache once it has been processed."""
        route, text = self.flatten(body)
        now = self.clock()
        recent = self._routes.setdefault(
            route, deque(maxlen=self.keep_keyed if body.get("prompt_cache_key") else self.keep)
        )
        best = max((_lcp(text, old) for t, old in recent if now - t <= self.ttl_s), default=0)
        cached = min(openai_cached(self.tokens(_visible(text[:best]))), self.tokens(_visible(text))) if best >= 2 else 0
        return cached, lambda: recent.append((self.clock(), text))


class AnthropicBreakpointCache:
    """Anthropic's explicit prompt caching. ``bill(body)`` -> (cache-read tokens, cache-write
    tokens) of that request. A body with more than 4 breakpoints is refused (ValueError), as the
    API does."""

    def __init__(
        self,
        tokens: Callable[[str], int] = chars_tokens,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tokens, self.ttl_s, self.clock = tokens, ttl_s, clock
        self._store: OrderedDict[str, float] = OrderedDict()

    @staticmethod
    def blocks(body: dict) -> list[tuple[str, bool]]:
        """(text, has a breakpoint) per content block in cache order: system, then messages
        (tools come first and are part of the route, see ``bill``)."""
        out: list[tuple[str, bool]] = []

        def add(content: Any, role: str) -> None:
            if isinstance(content, str):
                out.append((f"\x1e{role}\x1f{content}", False))
                return
            for n, b in enumerate(content if isinstance(content, list) else []):
                if isinstance(b, dict):
                    text = t if isinstance(t := b.get("text"), str) else json.dumps(b, sort_keys=True)
                    out.append(((f"\x1e{role}\x1f" if n == 0 else "") + text, bool(b.get("cache_control"))))

        add(body.get("system") or [], "system")
        msgs = ms if isinstance(ms := body.get("messages"), list) else []
        for m in msgs:
            if isinstance(m, dict):
                add(m.get("content"), str(m.get("role")))
        return out

    def bill(self, body: dict) -> tuple[int, int]:
        billed, store = self.look(body)
        store()
        return billed

    def look(self, body: dict) -> tuple[tuple[int, int], Callable[[], None]]:
        """((read, write) tokens, store): the bill as the request arrives, and the function that
        writes its prefixes to the cache once it has been processed."""
        blocks = self.blocks(body)
        marks: list[int | str] = [i for i, (_, bp) in enumerate(blocks) if bp]
        marks += ["tools" for t in body.get("tools") or [] if isinstance(t, dict) and t.get("cache_control")]
        if len(marks) > ANTHROPIC_MAX_BREAKPOINTS:
            raise ValueError(
                f"A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marks)}."
            )
        points = [i for i in marks if isinstance(i, int)]
        if not points:
            return (0, 0), lambda: None
        now, minimum = self.clock(), anthropic_min_tokens(str(body.get("model", "")))
        for k in [k for k, t in self._store.items() if now - t > self.ttl_s]:
            del self._store[k]
        h = hashlib.sha256(
            json.dumps(
                [body.get("model"), body.get("tools"), body.get("tool_choice")], sort_keys=True, default=str
            ).encode()
        )
        keys, texts, acc = [], [], ""
        for text, _ in blocks[: points[-1] + 1]:
            h.update(text.encode())
            acc += text
            keys.append(h.hexdigest())
            texts.append(_visible(acc))
        read_at = -1
        for p in points:  # a hit at the breakpoint or one of the 20 block boundaries before it
            for j in range(p, max(-1, p - ANTHROPIC_LOOKBACK_BLOCKS - 1), -1):
                if j <= read_at:
                    break
                if keys[j] in self._store:
                    read_at = j
                    break
        read = self.tokens(texts[read_at]) if read_at >= 0 else 0
        if read_at >= 0:
            self._store[keys[read_at]] = now
        written, new = read, []
        for p in points:
            if p > read_at and (n := self.tokens(texts[p])) >= minimum:
                new.append(keys[p])
                written = n

        def store() -> None:
            for k in new:
                self._store[k] = self.clock()

        return (read, written - read), store
