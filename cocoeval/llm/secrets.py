"""API keys come from the environment only; this keeps them out of every log record."""

from __future__ import annotations

import logging
import os

KEY_ENV_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "OPENAI_COMPATIBLE_API_KEY")
_installed = False


def secret_values() -> list[str]:
    """Current values of the key variables (and any *_API_KEY), longest first."""
    names = set(KEY_ENV_VARS) | {k for k in os.environ if k.endswith("_API_KEY")}
    return sorted({v for k in names if len(v := os.environ.get(k, "")) >= 8}, key=len, reverse=True)


def redact(text: str) -> str:
    for v in secret_values():
        text = text.replace(v, "[REDACTED]")
    return text


def install_log_redaction() -> None:
    """Redact key values from every log record created from now on, whichever logger or handler
    handles it (a record factory, not a per-logger filter, so SDK child loggers are covered)."""
    global _installed
    if _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs):  # type: ignore[no-untyped-def]
        record = previous(*args, **kwargs)
        secrets = secret_values()
        if secrets:
            try:
                msg = record.getMessage()
            except Exception:  # a malformed record stays as it is, for logging to report
                return record
            clean = msg
            for v in secrets:
                clean = clean.replace(v, "[REDACTED]")
            if clean != msg or record.args:
                record.msg, record.args = clean, None
        return record

    logging.setLogRecordFactory(factory)
    _installed = True
