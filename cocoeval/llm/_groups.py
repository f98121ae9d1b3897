"""Sending order for calls that share a prompt prefix (a request's ``cache_group``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class FirstOfGroup:
    """The first call of a group sent goes alone; the others of its group wait until it has been
    answered (or has failed), so the provider writes the shared prefix to its cache once and the
    others read it. Order only: no request, key or result changes."""

    def __init__(self) -> None:
        self._gates: dict[tuple[str, str], asyncio.Event] = {}

    @contextlib.asynccontextmanager
    async def turn(self, model: str, group: str | None) -> AsyncIterator[None]:
        if group is None:
            yield
            return
        gate = self._gates.get((model, group))
        if gate is not None:
            await gate.wait()
            yield
            return
        gate = self._gates[(model, group)] = asyncio.Event()
        try:
            yield
        finally:
            gate.set()
