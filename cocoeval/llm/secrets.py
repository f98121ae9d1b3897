"""API keys: read from the environment only, sent only where they belong, kept out of every
error text, log record, run record and notebook output.

``redact(text)`` replaces the values of the key variables (``*_API_KEY`` and any variable a
model spec names with ``?key_env=``) and anything shaped like a credential (``sk-...``,
``sk-ant-...``, ``Bearer <token>``, ``api-key: ...``, ``x-api-key: ...``, ``Authorization:
...``, ``?key=...``) with ``[REDACTED]``. ``redact_values(text)`` replaces only the exact values
(no pattern can touch other text): what the run records get, whose model answers must stay as
the model wrote them.

``key_env_for(...)`` is the rule for where a provider's key may go: see its docstring.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from urllib.parse import urlsplit

from .errors import ConfigError

KEY_ENV_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "OPENAI_COMPATIBLE_API_KEY")
PROVIDER_KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY")
"""Keys of a provider's own service: sent to its own hosts only (never through ``?key_env=``)."""
LOOPBACK_OPT_IN = "COCOEVAL_ALLOW_KEY_TO_LOOPBACK"
"""Set to 1 to let a provider's key go to a loopback ``@URL`` too (a local proxy, the fake server)."""
MASK = "[REDACTED]"
_MIN_LEN = 8  # shorter values are not treated as secrets (too likely to occur in other text)
_named: set[str] = set()  # variables named by ?key_env= in this process
_installed = False

_PATTERNS = (
    # header or field with a credential value: api-key: X, "x-api-key": "X", Authorization: Bearer X
    (re.compile(r"(?i)(?<![a-z0-9])((?:x-)?api[-_]?key|authorization|access[-_]?token|secret[-_]?key)"
                r"""(["']?\s*[:=]\s*["']?)(?:(?:bearer|basic)\s+)?[^\s"',;&}\[\]]{6,}"""), rf"\1\2{MASK}"),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {MASK}"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{12,}"), MASK),  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    (re.compile(r"(?i)([?&](?:api[-_]?)?key=)[^&\s\"'#]+"), rf"\1{MASK}"),
)


def note_key_env(name: str) -> None:
    """Treat the value of ``name`` as a secret from now on (a variable ``?key_env=`` names)."""
    _named.add(name)


def secret_values() -> list[str]:
    """Current values of the key variables (any *_API_KEY, and those ``?key_env=`` named), longest
    first."""
    names = set(KEY_ENV_VARS) | _named | {k for k in os.environ if k.endswith("_API_KEY")}
    return sorted({v for k in names if len(v := os.environ.get(k, "")) >= _MIN_LEN}, key=len, reverse=True)


def redact_values(text: str) -> str:
    """``text`` with the values of the key variables replaced (nothing else changes)."""
    for v in secret_values():
        if v in text:
            text = text.replace(v, MASK)
    return text


def redact(text: str) -> str:
    """``text`` with key values and credential-shaped strings replaced: for error texts and logs."""
    text = redact_values(text)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def install_log_redaction() -> None:
    """Redact every log record created from now on, whichever logger or handler handles it (a
    record factory, not a per-logger filter, so SDK child loggers are covered)."""
    global _installed
    if _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            msg = record.getMessage()
        except Exception:  # a malformed record stays as it is, for logging to report
            return record
        clean = redact(msg)
        if clean != msg or record.args:
            record.msg, record.args = clean, None
        return record

    logging.setLogRecordFactory(factory)
    _installed = True


# -- where a key may go --------------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_of(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def own_host(url: str, hosts: tuple[str, ...]) -> bool:
    """Whether ``url`` is https on one of ``hosts`` (``api.openai.com``; ``.azure.com``: any host
    ending so)."""
    if urlsplit(url).scheme != "https":
        return False
    host = host_of(url)
    return any(host.endswith(h) if h.startswith(".") else host == h for h in hosts)


def key_env_for(spec: str, *, default_env: str, base_url: str | None, hosts: tuple[str, ...],
                key_env: str | None, any_host: bool = False, other: str | None = None) -> str:
    """The variable whose value may be sent with a call of ``spec`` to ``base_url``.

    - No ``@URL`` (the SDK's own endpoint, or one the user set in the environment, such as
      OPENAI_BASE_URL or AZURE_OPENAI_ENDPOINT) or an https URL on the provider's own ``hosts``:
      ``default_env``, or the variable ``?key_env=`` names.
    - A loopback URL when COCOEVAL_ALLOW_KEY_TO_LOOPBACK=1: the same.
    - Any other URL: only a variable named explicitly with ``?key_env=`` that is not a provider's
      own key variable; or, for providers made for other servers (``any_host``: openai-compatible,
      llama-cpp-server), their own ``default_env``. Otherwise a ConfigError that says how to fix
      (``other``: the provider to suggest for other servers of the same wire format).
    """
    trusted = (base_url is None or own_host(base_url, hosts)
               or (os.environ.get(LOOPBACK_OPT_IN) == "1" and is_loopback(host_of(base_url))))
    if key_env is not None:
        if not trusted and key_env in PROVIDER_KEY_VARS:
            raise ConfigError(
                f"model spec {spec!r}: {key_env} is a provider's own key and is sent only to that "
                f"provider's hosts, not to {host_of(base_url or '') or base_url}",
                hint="put the key this server should get in a variable of its own and name it: "
                     "?key_env=MY_SERVER_KEY")
        note_key_env(key_env)
        return key_env
    if trusted or any_host:
        return default_env
    provider, _, rest = spec.partition("/")
    model = rest.split("@", 1)[0]
    fixes = [f"name the variable that holds this server's key: {spec}?key_env=MY_SERVER_KEY"]
    if other:
        fixes.insert(0, f"write {other}/{model}@{base_url} (key from OPENAI_COMPATIBLE_API_KEY)")
    raise ConfigError(
        f"model spec {spec!r}: {default_env} is sent only to {provider}'s own hosts "
        f"({', '.join(h.lstrip('.') for h in hosts)}), not to {host_of(base_url or '') or base_url}",
        hint=f"{'; or '.join(fixes)}; a local proxy on 127.0.0.1/localhost may get the key with "
             f"{LOOPBACK_OPT_IN}=1")
