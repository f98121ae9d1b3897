"""Mapping SDK exceptions to what the runner does: stop the run, or record the call as failed."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

from ..base import CallError
from ..errors import FatalLLMError
from ..secrets import redact
from ._keys import key_name

_FIX = {
    401: "the API key was refused: check the key in {env} (keys are read from the environment only)",
    403: "the key has no access to this model or endpoint: check the project/organisation permissions",
    404: "the model or endpoint does not exist: check the model spec and base URL",
}


def classify(exc: BaseException, *, provider: str, model: str, key_env: str) -> Exception:
    """Turn an SDK exception into FatalLLMError (stop the run) or CallError (record, go on)."""
    return classify_error(
        getattr(exc, "status_code", None),
        getattr(exc, "body", None),
        str(getattr(exc, "message", "") or exc),
        type(exc).__name__,
        provider=provider,
        model=model,
        key_env=key_env,
    )


ANTHROPIC_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""Anthropic error types by the HTTP status they come with (batch results carry only the type)."""


def classify_error(
    status: int | None, body: Any, message: str, name: str = "", *, provider: str, model: str, key_env: str
) -> Exception:
    """The same decision from an HTTP status, error body and message (also used for the
    per-request errors inside batch results). The message is redacted: a provider or proxy may
    echo the key in it."""
    message = redact(message)
    code = ""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            code = str(err.get("code") or err.get("type") or "")
    low = f"{code} {message}".lower()
    where = f"{provider}/{model}"
    if status in _FIX:
        return FatalLLMError(f"{where}: HTTP {status}: {message}", hint=_FIX[status].format(env=key_env))
    if "insufficient_quota" in low or "credit balance" in low or "spend limit" in low or status == 402:
        return FatalLLMError(
            f"{where}: out of quota or credit: {message}",
            hint="add credit or raise the spend limit on the provider's billing page, "
            "then re-run: completed calls are cached and will not be repeated",
        )
    if "context_length" in low or "context length" in low or "prompt is too long" in low or status == 413:
        return CallError("context_length", message)
    if "content_filter" in low or "content_policy" in low or "content management policy" in low:
        return CallError("content_filter", message)
    if status == 429:
        return CallError("rate_limited", f"still rate limited after retries: {message}")
    if status is not None and status >= 500:
        return CallError("server_error", f"HTTP {status} after retries: {message}")
    if status is not None:
        return CallError("bad_request", f"HTTP {status}: {message}")
    if "Timeout" in name:
        return CallError("timeout", message)
    if "Connection" in name:
        return CallError("connection_error", message)
    return CallError("malformed_response", f"{name}: {message}")


async def sdk_call(
    provider: Any, call: Awaitable[Any], api_error: type[BaseException], not_found: str | None = None
) -> Any:
    """Await an SDK call (its own retries included); its errors classified, an unparseable
    answer a failed call rather than a crash. ``not_found``: the CallError reason of a 404 (for
    objects such as batches, whose absence does not mean the model spec is wrong)."""
    try:
        return await call
    except api_error as e:
        if not_found and getattr(e, "status_code", None) == 404:
            raise CallError(not_found, str(getattr(e, "message", "") or e)) from None
        raise classify(e, provider=provider.name, model=provider.spec.model, key_env=key_name(provider)) from None
    except (FatalLLMError, CallError):
        raise
    except Exception as e:
        raise CallError("malformed_response", f"{type(e).__name__}: {e}") from None


async def post_json(
    provider: Any, path: str, body: dict[str, Any], api_error: type[BaseException]
) -> tuple[Any, float]:
    """POST through the SDK's documented raw request path (its retries and errors, without the
    per-request typed transforms that cost more CPU than the HTTP call): (JSON body, latency)."""
    t0 = time.perf_counter()
    out = await sdk_call(provider, provider._client_obj.post(path, body=body, cast_to=object), api_error)
    return out, time.perf_counter() - t0
