"""The HTTP attempts of one live call, so that attempts the provider may have billed are counted.

The SDKs retry a request that timed out; the provider may have received and billed the attempt
that timed out (its answer was lost on the way back). Each live call runs inside ``track()``;
the SDK clients carry ``EVENT_HOOKS`` (httpx event hooks, run in the calling task, so a context
variable tells the calls apart), which count the attempts sent and the attempts answered. An
attempt sent and never answered counts as paid (input tokens estimated from the request), unless
the call failed because the server could not be reached (nothing arrived there to be billed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass
class Attempts:
    sent: int = 0
    answered: int = 0

    def lost(self, error: BaseException | None = None) -> int:
        """Attempts sent that got no usable answer: those never answered, and the answer whose
        body could not be read (``error`` a malformed_response without usage: the provider
        answered, so it billed, but what is unknown); none when the call failed with ``error``
        because the server could not be reached (a connection error: nothing arrived to be billed)."""
        if error is not None and not_reached(error):
            return 0
        unread = (
            getattr(error, "reason", None) == "malformed_response"
            and getattr(error, "usage", None) is None
            and self.answered > 0
        )
        return max(self.sent - self.answered, 0) + int(unread)


_UNREACHED = ("ConnectError", "ConnectTimeout", "PoolTimeout", "ClientConnectorError")


def not_reached(error: BaseException) -> bool:
    """Whether a failed call never reached the server: its reason says so, or the exceptions
    behind it (the SDK's, and the HTTP library's below them) are connection failures."""
    if getattr(error, "reason", None) == "connection_error":
        return True
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__name__ in _UNREACHED:
            return True
        e = e.__cause__ or e.__context__
    return False


_CURRENT: ContextVar[Attempts | None] = ContextVar("cocoeval_llm_attempts", default=None)


@contextlib.contextmanager
def track() -> Iterator[Attempts]:
    """Count the HTTP attempts the SDK makes inside this block (in this task)."""
    a = Attempts()
    token = _CURRENT.set(a)
    try:
        yield a
    finally:
        _CURRENT.reset(token)


async def _on_request(_request: Any) -> None:
    if (a := _CURRENT.get()) is not None:
        a.sent += 1


async def _on_response(_response: Any) -> None:
    if (a := _CURRENT.get()) is not None:
        a.answered += 1


EVENT_HOOKS = {"request": [_on_request], "response": [_on_response]}
"""httpx event hooks for the SDK clients' ``http_client``."""
