"""The LLM layer: every model call of cocoeval goes through here.

Providers (``openai``, ``azure``, ``anthropic``, ``openai-compatible``, ``llama-cpp-server``,
``local``) behind one ``generate()``; a content-addressed SQLite call cache; a concurrent runner
with rate limits and the SDKs' own retries; usage and cost accounting; dry-run estimates.
"""

from cocoeval import lazy_exports

_WHERE = {  # loaded on first use, so that importing one module of the layer (errors) stays cheap
    **dict.fromkeys(
        [
            "PROVIDERS",
            "CallError",
            "GenerateRequest",
            "GenerateResponse",
            "Message",
            "ModelSpec",
            "Provider",
            "Usage",
            "available_providers",
            "get_provider",
            "parse_model_spec",
            "provider",
            "request_key",
        ],
        "cocoeval.llm.base",
    ),
    "CallCache": "cocoeval.llm.cache",
    "classify_error": "cocoeval.llm.providers._errors",
    **dict.fromkeys(["Call", "CallResult", "LLMConfig", "Runner"], "cocoeval.llm.runner"),
    **dict.fromkeys(["install_log_redaction", "redact"], "cocoeval.llm.secrets"),
    **dict.fromkeys(
        ["Estimate", "Ledger", "PriceTable", "count_tokens", "estimate", "token_method"], "cocoeval.llm.usage"
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)  # the built-in providers register at first lookup

__all__ = [
    "PROVIDERS",
    "Call",
    "CallCache",
    "CallError",
    "CallResult",
    "Estimate",
    "GenerateRequest",
    "GenerateResponse",
    "LLMConfig",
    "Ledger",
    "Message",
    "ModelSpec",
    "PriceTable",
    "Provider",
    "Runner",
    "Usage",
    "available_providers",
    "classify_error",
    "count_tokens",
    "estimate",
    "get_provider",
    "install_log_redaction",
    "parse_model_spec",
    "provider",
    "redact",
    "request_key",
    "token_method",
]
