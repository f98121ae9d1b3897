"""A scripted model in this process: ``mock/echo`` or ``mock/<script.yaml|.json>``.

For dry runs of a params file (every stage runs, nothing is sent or billed), for teaching, and
for fast tests of the simulation and judging logic: the answers come from a script, and every
call still goes through the real runner (call cache, usage ledger, resume) as any provider's.
It is not a model: its answers mean nothing. Provider code itself is tested against the
loopback fake server (``tests/fakes/server``), whose scripted answers this one mirrors.

A script is a YAML or JSON file::

    answers:
      - match: "next 5 turns"   # a substring of the last message's text ("" or none: any request)
        context: "Budget"       # optional: a substring of the whole request's text as well
        text: "Alice: ..."      # the answer
        times: 2                # optional: answers this many requests, then is skipped
      - match: ""
        error: context_length   # optional: the call fails with this reason instead (not cached)

The first entry that matches and has times left answers; a request none matches (and every
request to ``mock/echo``) gets ``"echo: "`` and the first 40 characters of its last message. An
answer is cut to ``max_tokens * 4`` characters (finish reason ``length``); tokens are counted
as characters / 4, rounded up, as the fake server counts them. The times used are counted per
script content for the life of the process (a simulation asks the runner once per step), so an
edited script starts afresh; ``MockProvider.reset()`` starts every script afresh.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..base import CallError, GenerateRequest, GenerateResponse, Provider, Usage, provider
from ..errors import ConfigError
from ..yamlfile import safe_load

ECHO = "echo"
"""The model name of the script-less mock: every request is echoed."""
_HINT = (
    "write the script as {answers: [{match: TEXT, text: ANSWER}, ...]} "
    "(optional per answer: context, times, error), or use mock/echo"
)


class MockAnswer(BaseModel):
    """One scripted answer: when it applies (``match``, ``context``, ``times``) and what it gives."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    match: str = ""
    """A substring of the last message's text ("" matches every request)."""
    context: str | None = None
    """If given, a substring of the whole request's text too (system prompt and every message)."""
    text: str = ""
    """The answer's text."""
    times: int | None = Field(None, ge=0)
    """How many requests it answers (None: every one)."""
    error: str | None = Field(None, min_length=1)
    """If given, the call fails with this reason (``CallError``), e.g. ``context_length``."""


class MockScript(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    answers: list[MockAnswer] = Field(default_factory=list)


def tokens(chars: int) -> int:
    """The token count the mock (and the fake server) reports for ``chars`` characters."""
    return max(1, math.ceil(chars / 4))


@provider("mock")
class MockProvider(Provider):
    """Answers from a script (see the module's docstring); free, in this process, no key."""

    in_process = True  # the script's counts live in this process: worker processes never send its calls
    billing = "free"
    _used: ClassVar[dict[str, list[int]]] = {}
    """Times used per answer, per script content hash (shared by every instance in this process)."""
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def reset(cls) -> None:
        """Forget the times every script's answers were used."""
        with cls._lock:
            cls._used.clear()

    def _path(self) -> Path | None:
        return None if self.spec.model == ECHO else Path(self.spec.model).expanduser()

    def script(self) -> tuple[MockScript, str]:
        """The script and the sha256 of its file's bytes (of nothing for ``mock/echo``)."""
        path = self._path()
        if path is None:
            return MockScript(), hashlib.sha256(b"").hexdigest()
        if not path.is_file():
            raise ConfigError(
                f"mock model script not found: {path}",
                hint="give the path of a YAML or JSON script file, or use mock/echo",
            )
        raw = path.read_bytes()
        try:
            data = json.loads(raw) if path.suffix == ".json" else safe_load(raw.decode("utf-8"))
            return MockScript.model_validate(data if data is not None else {}), hashlib.sha256(raw).hexdigest()
        except (ValueError, yaml.YAMLError, ValidationError) as e:  # UnicodeDecodeError is a ValueError
            raise ConfigError(f"mock model script {path} is not a valid script: {e}", hint=_HINT) from None

    def check_ready(self) -> None:
        self.script()

    def cache_identity(self) -> dict[str, Any]:
        """The script's content, not only its name: an edited script is a new model."""
        return {"provider": self.name, "model": self.spec.model, "script": self.script()[1]}

    def _take(self, script: MockScript, digest: str, last: str, whole: str) -> MockAnswer | None:
        with self._lock:
            used = self._used.setdefault(digest, [0] * len(script.answers))
            for i, a in enumerate(script.answers):
                if a.match not in last or (a.context and a.context not in whole):
                    continue
                if a.times is not None and used[i] >= a.times:
                    continue
                used[i] += 1
                return a
        return None

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        t0 = time.perf_counter()
        script, digest = self.script()
        last = request.messages[-1].content if request.messages else ""
        whole = "\n".join(m.content for m in request.messages)
        answer = self._take(script, digest, last, whole)
        prompt_tokens = tokens(sum(len(m.content) for m in request.messages))
        if answer is not None and answer.error is not None:
            raise CallError(answer.error, "scripted error of the mock model")
        text = answer.text if answer is not None else "echo: " + last[:40]
        finish = "stop"
        if request.max_tokens is not None and len(text) > request.max_tokens * 4:
            text, finish = text[: request.max_tokens * 4], "length"
        return GenerateResponse(
            text=text,
            finish_reason=finish,
            model=self.spec.model,
            usage=Usage(input_tokens=prompt_tokens, output_tokens=tokens(len(text))),
            latency_s=time.perf_counter() - t0,
        )
