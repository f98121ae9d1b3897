"""The LLM layer: every model call of cocoeval goes through here.

Providers (``openai``, ``azure``, ``anthropic``, ``openai-compatible``, ``llama-cpp-server``,
``local``) behind one ``generate()``; a content-addressed SQLite call cache; a concurrent runner
with rate limits and the SDKs' own retries; usage and cost accounting; dry-run estimates.
"""

from . import providers  # noqa: F401  (registers the built-in providers)
from .base import (
    CallError,
    GenerateRequest,
    GenerateResponse,
    Message,
    ModelSpec,
    Provider,
    Usage,
    available_providers,
    get_provider,
    parse_model_spec,
    provider,
    request_key,
)
from .cache import CallCache
from .providers._errors import classify_error
from .runner import Call, CallResult, LLMConfig, Runner
from .secrets import install_log_redaction, redact
from .usage import Estimate, Ledger, PriceTable, count_tokens, estimate, token_method

__all__ = [
    "Call", "CallCache", "CallError", "CallResult", "Estimate", "GenerateRequest",
    "GenerateResponse", "LLMConfig", "Ledger", "Message", "ModelSpec", "PriceTable", "Provider",
    "Runner", "Usage", "available_providers", "classify_error", "count_tokens", "estimate", "get_provider",
    "install_log_redaction", "parse_model_spec", "provider", "redact", "request_key", "token_method",
]
