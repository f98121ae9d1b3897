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

import functools
import ipaddress
import logging
import os
import re
from urllib.parse import parse_qsl, unquote, urlsplit

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
    (
        re.compile(
            r"(?i)(?<![a-z0-9])((?:x-)?api[-_]?key|authorization|access[-_]?token|secret[-_]?key)"
            r"""(["']?\s*[:=]\s*["']?)(?:(?:bearer|basic)\s+)?[^\s"',;&}\[\]]{6,}"""
        ),
        rf"\1\2{MASK}",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {MASK}"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{12,}"), MASK),  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    (re.compile(r"(?i)([?&](?:api[-_]?)?key=)[^&\s\"'#]+"), rf"\1{MASK}"),
)


# -- what in a URL looks like a key -------------------------------------------------------------

_KEY_NAME_PARTS = ("key", "token", "secret", "passw", "pwd", "auth", "credential", "signature")
_KEY_NAMES = {"sig", "code", "pass", "bearer"}
_KEY_PREFIXES = re.compile(
    r"(?:(?:sk|gsk|xai|hf|ghp|gho|ghu|ghs|github_pat|glpat|nvapi|pplx|r8|fw)[-_]|AIza)"
    r"[A-Za-z0-9_-]{12,}"
)
_MIXED_RUN = re.compile(r"[A-Za-z0-9]{24,}")
_HEX_RUN = re.compile(r"(?i)[0-9a-f]{40,}")


def key_named(name: str) -> bool:
    """Whether a URL query parameter's name says it holds a credential: it contains key, token,
    secret, passw, pwd, auth, credential or signature (any case, ``-``/``_``/``.`` ignored:
    ``api_key``, ``apiKey``, ``x-api-key``, ``access_token``, ``client_secret``,
    ``subscription-key``...), or is ``sig``, ``code`` (an Azure Functions key), ``pass`` or
    ``bearer``. ``key_env`` (it names a variable), ``api-version``, ``deployment``... are not."""
    n = re.sub(r"[-_.]", "", name.lower())
    if n == "keyenv":  # names the variable holding the key (model specs' ?key_env=), never a key
        return False
    return n in _KEY_NAMES or any(part in n for part in _KEY_NAME_PARTS)


def key_shaped(text: str) -> bool:
    """Whether ``text`` (a URL path segment, a query value) looks like a key: it starts with a
    known key prefix (``sk-`` of OpenAI, DeepSeek and OpenRouter,
    ``sk-ant-`` of Anthropic, ``gsk_``, ``xai-``, ``hf_``, ``ghp_``, ``github_pat_``, ``glpat-``,
    ``nvapi-``, ``pplx-``, ``r8_``, ``fw_``, ``AIza``) and 12 or more letters, digits, ``-`` or
    ``_``, or holds a random-looking run: 24 or more
    letters and digits in a row mixing upper case, lower case and digits, or 40 or more hex digits.
    Words, model names (``Meta-Llama-3.1-8B-Instruct``), versions, dates, ports, deployment names
    and the 32-hex account ids or UUIDs of some gateways' paths are none of these."""
    text = unquote(text)
    if _KEY_PREFIXES.match(text) or _HEX_RUN.search(text):
        return True
    return any(
        re.search(r"[a-z]", r) and re.search(r"[A-Z]", r) and re.search(r"[0-9]", r) for r in _MIXED_RUN.findall(text)
    )


def url_secrets(url: str) -> list[str]:
    """Where ``url`` holds what looks like a key (``key_named`` query parameters whatever their
    value, ``key_shaped`` path segments, query values and fragment), as words that never repeat
    the value ("query parameter 'api_key'", "path segment 3"); empty when nothing does. The host
    and port are not looked at (a key before the host is refused on its own: user-info)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    out = [f"path segment {i}" for i, seg in enumerate(parts.path.split("/")) if seg and key_shaped(seg)]
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if key_named(name) or key_shaped(value) or key_shaped(name):
            out.append(f"query parameter {name!r}" if not key_shaped(name) else "a query parameter")
    if parts.fragment and key_shaped(parts.fragment):
        out.append("the fragment (after #)")
    return out


@functools.lru_cache(maxsize=1024)  # called with the same few specs for every call of a run
def redact_url(url: str) -> str:
    """``url`` with what ``url_secrets`` finds replaced by ``[REDACTED]`` (the rest as it was)."""
    if not url_secrets(url):
        return url
    parts = urlsplit(url)
    path = "/".join(MASK if seg and key_shaped(seg) else seg for seg in parts.path.split("/"))
    query = "&".join(_redact_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    frag = MASK if parts.fragment and key_shaped(parts.fragment) else parts.fragment
    out = f"{parts.scheme}://{parts.netloc}{path}" if parts.scheme else f"{parts.netloc}{path}"
    return out + (f"?{query}" if parts.query else "") + (f"#{frag}" if parts.fragment else "")


def _redact_pair(pair: str) -> str:
    name, eq, value = pair.partition("=")
    if key_shaped(name):
        return MASK
    if eq and value and (key_named(unquote(name)) or key_shaped(value)):
        return f"{name}={MASK}"
    return pair


_URL = re.compile(r"""https?://[^\s"'<>`]+""")


def redact_urls(text: str) -> str:
    """``text`` with every http(s) URL in it passed through ``redact_url``: for model specs,
    cache identities, run records' settings and log lines (never for model answers, which stay
    as the model wrote them)."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


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
    text = redact_urls(redact_values(text))
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


def key_env_for(
    spec: str,
    *,
    default_env: str,
    base_url: str | None,
    hosts: tuple[str, ...],
    key_env: str | None,
    any_host: bool = False,
    other: str | None = None,
) -> str:
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
    trusted = (
        base_url is None
        or own_host(base_url, hosts)
        or (os.environ.get(LOOPBACK_OPT_IN) == "1" and is_loopback(host_of(base_url)))
    )
    if key_env is not None:
        if not trusted and key_env in PROVIDER_KEY_VARS:
            raise ConfigError(
                f"model spec {spec!r}: {key_env} is a provider's own key and is sent only to that "
                f"provider's hosts, not to {host_of(base_url or '') or base_url}",
                hint="put the key this server should get in a variable of its own and name it: ?key_env=MY_SERVER_KEY",
            )
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
        hint=f"{'; or '.join(fixes)}; a local proxy on 127.0.0.1/localhost may get the key with {LOOPBACK_OPT_IN}=1",
    )
