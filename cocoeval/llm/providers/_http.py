"""The base of the providers that call an HTTP API through its vendor's SDK (OpenAI, Anthropic).

``HTTPProvider`` holds what they share: the key rule (``_keys.KeyRule``), one SDK client per
provider instance (the SDK's own retries and timeout, the aiohttp transport, the attempt-counting
hooks), the POST of one request through the SDK's raw request path with its errors classified
(``_errors.post_json``), and closing the client. A provider names its SDK and client class and
says what differs: the client's arguments, the path, the request body (``kwargs``) and how an
answer's body becomes a ``GenerateResponse`` (text, finish reason, usage). The SDK is imported
on first use, never when this module is."""

from __future__ import annotations

import importlib
from abc import abstractmethod
from typing import Any, ClassVar

from .._attempts import EVENT_HOOKS
from ..base import GenerateRequest, GenerateResponse, Provider
from ._errors import post_json
from ._keys import KeyRule


def aiohttp_client(sdk: Any) -> Any:
    """The SDK's aiohttp transport (its documented choice for high concurrency: httpx's pool
    costs ~2 ms of CPU per request at 64 connections), else its httpx client; either with the
    hooks that count attempts (``_attempts.py``)."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return sdk.DefaultAsyncHttpxClient(event_hooks=EVENT_HOOKS)
    if hasattr(sdk, "DefaultAioHttpClient"):
        return sdk.DefaultAioHttpClient(event_hooks=EVENT_HOOKS)
    return sdk.DefaultAsyncHttpxClient(event_hooks=EVENT_HOOKS)


class HTTPProvider(KeyRule, Provider):
    """A provider whose calls are one JSON POST each through an SDK client (created once, on
    ``start`` or the first call; closed by ``aclose``). Subclasses set ``sdk_module``,
    ``client_class`` and ``path`` and define ``kwargs`` and ``parse``; ``client_args`` where
    the client takes other arguments than a key and a base URL."""

    sdk_module: ClassVar[str] = ""
    """The SDK's module (``openai``, ``anthropic``), imported on first use."""
    client_class: ClassVar[str] = ""
    """The SDK's async client class (``AsyncOpenAI``...)."""
    path: ClassVar[str] = ""
    """Where a call is POSTed, relative to the client's base URL."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client_obj: Any = None

    def check_ready(self) -> None:
        self.check_key()

    def sdk(self) -> Any:
        return importlib.import_module(self.sdk_module)

    @abstractmethod
    def kwargs(self, request: GenerateRequest) -> dict[str, Any]:
        """The body of a prepared request, as sent live and in batches."""

    @abstractmethod
    def parse(self, body: Any, latency: float | None) -> GenerateResponse:
        """An answer's JSON body (and the call's latency) as a response; a CallError where it is
        malformed or a failure (refusal, content filter)."""

    def client_args(self) -> dict[str, Any]:
        """The client's arguments other than retries, timeout and transport."""
        return {"api_key": self.api_key(), "base_url": self.spec.base_url}

    def make_client(self) -> Any:
        """The SDK client, retrying as the SDK does (``max_retries``): no other retry loop."""
        sdk = self.sdk()
        return getattr(sdk, self.client_class)(
            **self.client_args(), max_retries=self.max_retries, timeout=self.timeout_s, http_client=aiohttp_client(sdk)
        )

    def _client(self) -> Any:
        if self._client_obj is None:
            self._client_obj = self.make_client()
        return self._client_obj

    async def start(self) -> None:
        self._client()

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        sdk = self.sdk()
        self._client()
        body, latency = await post_json(self, self.path, self.kwargs(request), sdk.APIError)
        return self.parse(body, latency)

    async def aclose(self) -> None:
        if self._client_obj is not None:
            await self._client_obj.close()
            self._client_obj = None
