"""The worker process of ``LLMConfig.processes`` > 1 (see ``workers.py`` for the protocol).

It reads requests as JSON lines on standard input, sends each through its provider (the SDK's
own retries included), writes a successful answer into the call cache and only then replies.
At end of input (the runner closed it, or the runner died, even by ``kill -9``) it finishes the
calls in flight, caches their answers and exits. It runs in a session of its own and ignores
SIGINT, so a Ctrl-C meant for the runner does not cancel calls that are already paid for.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import signal
import sys
import time
from typing import Any

from ._attempts import track
from .base import CallError, GenerateRequest, Provider, get_provider
from .cache import CallCache
from .errors import LLMError
from .usage import request_tokens

log = logging.getLogger("cocoeval.llm.worker")

FLUSH_S = 10.0
"""How long a worker whose input has ended waits for the runner to read its last replies."""


async def serve(config: dict[str, Any], out: Any) -> None:
    cache = CallCache(config["cache"], config["policy"])
    providers: dict[str, Provider] = {}
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    # replies through a non-blocking transport: a runner that is not reading (between two runs)
    # never stalls the calls in flight; their replies wait here, their answers are cached
    writer, _ = await loop.connect_write_pipe(asyncio.Protocol, out)

    def reply(msg: dict[str, Any]) -> None:
        if not writer.is_closing():  # closed: the runner has gone; the answer is cached anyway
            writer.write(json.dumps(msg).encode() + b"\n")

    async def handle(msg: dict[str, Any]) -> None:
        n = msg["id"]
        try:
            prov = providers.get(msg["model"])
            if prov is None:
                importlib.import_module(msg["module"])
                prov = get_provider(msg["model"], max_retries=config["max_retries"], timeout_s=config["timeout_s"])
                await prov.start()
                providers[msg["model"]] = prov  # only once started
            if msg.get("op") == "prepare":
                return reply({"id": n, "prepared": True})
            request = GenerateRequest.model_validate(msg["request"])
            with track() as attempts:
                try:
                    resp = await prov.generate(request)
                except CallError as e:  # attempts sent and never answered may have been billed
                    lost = attempts.lost(e)
                    return reply(
                        {
                            "id": n,
                            "key": msg["key"],
                            "error": {"reason": e.reason, "detail": e.detail},
                            "usage": e.usage.model_dump() if e.usage is not None else None,
                            "lost": lost,
                            "lost_tokens": lost * request_tokens(request),
                        }
                    )
            resp.dropped_params = msg["dropped"]
            answer = resp.model_dump(mode="json")
            cache.put(msg["key"], msg["identity"], msg["request_json"], answer)  # before the reply
            lost = attempts.lost()
            reply(
                {"id": n, "key": msg["key"], "ok": answer, "lost": lost, "lost_tokens": lost * request_tokens(request)}
            )
        except LLMError as e:  # FatalLLMError (stop the run), ConfigError (fix a setting)
            reply(
                {
                    "id": n,
                    "key": msg.get("key"),
                    "fatal": {"type": type(e).__name__, "message": e.message, "hint": e.hint},
                }
            )
        except Exception as e:  # a bug: the runner stops the run with it
            reply({"id": n, "key": msg.get("key"), "crash": f"{type(e).__name__}: {e}"})

    tasks: set[asyncio.Task] = set()
    try:
        while line := await reader.readline():
            try:
                msg = json.loads(line)
                if not isinstance(msg, dict) or "id" not in msg:
                    raise ValueError("no id")
            except ValueError:  # a runner killed mid-write leaves a cut line
                log.warning("worker %d: skipped a line that is not a request (%d bytes)", os.getpid(), len(line))
                continue
            task = asyncio.create_task(handle(msg))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:  # end of input: finish and cache what is in flight, then hand over the last replies
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        deadline = time.monotonic() + FLUSH_S
        while writer.get_write_buffer_size() and not writer.is_closing() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        writer.close()
        for prov in providers.values():
            with contextlib.suppress(Exception):
                await prov.aclose()
        cache.close()


def main() -> None:
    from . import providers as _providers  # noqa: F401  (registers the built-in providers)
    from .secrets import install_log_redaction

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner decides; see the module docstring
    config = json.loads(sys.argv[1])
    sys.path[:0] = [p for p in config.get("sys_path", []) if p not in sys.path]  # the runner's imports
    install_log_redaction()
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    out = os.fdopen(os.dup(1), "wb", buffering=0)  # replies on a private copy of stdout ...
    os.dup2(2, 1)  # ... so that anything a library prints goes to stderr, not into the protocol
    asyncio.run(serve(config, out))
