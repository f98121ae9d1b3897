"""Running a coroutine to the end from synchronous code, inside Jupyter's running loop too."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run(make())``; under a running event loop (a notebook) in a thread of its own,
    which an interrupt of the calling thread stops too (answers in flight are kept)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    box: dict[str, Any] = {}
    done, stop = threading.Event(), threading.Event()

    async def main() -> T:
        box["loop"], box["task"] = asyncio.get_running_loop(), asyncio.current_task()
        if stop.is_set():  # interrupted before it began (the task is stored before this test)
            raise KeyboardInterrupt
        return await make()

    def target() -> None:
        try:
            box["out"] = asyncio.run(main())
        except BaseException as e:
            box["err"] = e
        finally:
            done.set()

    threading.Thread(target=target).start()
    try:
        while not done.wait(0.1):  # not Thread.join: an interrupted join may return too early
            pass
    except KeyboardInterrupt:  # Jupyter's interrupt reaches this thread: stop the run too
        stop.set()
        if "task" in box:
            with contextlib.suppress(RuntimeError):  # its loop has just closed
                box["loop"].call_soon_threadsafe(box["task"].cancel)
        while not done.wait(0.1):  # the run winds down (answers in flight are kept)
            pass
        raise
    if "err" in box:
        raise box["err"]
    return box["out"]
