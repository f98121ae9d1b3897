"""What a model call gets back, computed without an HTTP handler: answers and error bodies.

``answer(path, body, prompt, n, fault, scripted)`` returns ``(status, body, headers)`` for a
chat completion or an Anthropic message; the live endpoints send it and the batch processors
write it into their result files.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
MODEL_PATHS = (OPENAI_PATH, ANTHROPIC_PATH)
MALFORMED_BODY = b'{"id": "x", "choices": ['
REASONING = re.compile(r"^(o\d|gpt-5(?!.*chat))")

Reply = tuple[int, "dict | bytes", dict[str, str]]

# kind -> (status, openai (type, code, message), anthropic (status, type, message))
ERRORS: dict[str, tuple[int, tuple[str, str | None, str], tuple[int, str, str]]] = {
    "429": (
        429,
        ("requests", "rate_limit_exceeded", "Rate limit reached"),
        (429, "rate_limit_error", "Number of request tokens has exceeded your rate limit."),
    ),
    "quota": (
        429,
        (
            "insufficient_quota",
            "insufficient_quota",
            "You exceeded your current quota, please check your plan and billing details.",
        ),
        (400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API."),
    ),
    "500": (
        500,
        ("server_error", None, "The server had an error while processing your request."),
        (500, "api_error", "Internal server error"),
    ),
    "529": (529, ("server_error", "overloaded", "Overloaded"), (529, "overloaded_error", "Overloaded")),
    "401": (
        401,
        ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
        (401, "authentication_error", "invalid x-api-key"),
    ),
    "403": (
        403,
        (
            "invalid_request_error",
            "unsupported_country_region_territory",
            "Country, region, or territory not supported",
        ),
        (403, "permission_error", "Your API key does not have permission to use the specified resource."),
    ),
    "404": (
        404,
        ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
        (404, "not_found_error", "model not found"),
    ),
    "context_length": (
        400,
        (
            "invalid_request_error",
            "context_length_exceeded",
            "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 300000 tokens. Please reduce the length of the messages.",
        ),
        (400, "invalid_request_error", "prompt is too long: 300000 tokens > 200000 maximum"),
    ),
}
FAULT_KINDS = (*ERRORS, "echo_key", "content_filter", "slow", "timeout", "drop", "malformed")


def content_text(content: Any) -> str:
    """Text of a message content: a string, or the text parts of a list of blocks joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif "content" in block:  # e.g. an Anthropic tool_result
                    parts.append(content_text(block["content"]))
        return "\n".join(p for p in parts if p)
    return ""


def messages_of(body: dict | None) -> list[dict]:
    messages = (body or {}).get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def prompt_of(body: dict | None) -> str:
    """The last message's text: what faults and scripted answers are matched against."""
    msgs = messages_of(body)
    return content_text(msgs[-1].get("content")) if msgs else ""


def tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def request_key(headers: Any) -> str:
    """The API key a request carries: Authorization: Bearer (OpenAI), x-api-key (Anthropic) or
    api-key (Azure)."""
    auth = str(headers.get("Authorization") or "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return str(headers.get("x-api-key") or headers.get("api-key") or "")


def is_anthropic(path: str) -> bool:
    return path == ANTHROPIC_PATH or path.startswith(ANTHROPIC_PATH + "/")


def oai_error(
    message: str, type_: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def ant_error(message: str, type_: str = "invalid_request_error", n: int | None = None) -> dict:
    body: dict[str, Any] = {"type": "error", "error": {"type": type_, "message": message}}
    if n is not None:
        body["request_id"] = f"req_{n}"
    return body


def request_id_header(path: str, n: int) -> dict[str, str]:
    return {"request-id" if is_anthropic(path) else "x-request-id": f"req_{n}"}


def error_reply(path: str, kind: str, n: int, retry_after: float | None = None) -> Reply:
    """The error response of an HTTP-error fault kind, in the path's provider format."""
    status, (o_type, o_code, o_msg), (a_status, a_type, a_msg) = ERRORS[kind]
    headers = request_id_header(path, n)
    body: dict
    if is_anthropic(path):
        status, body = a_status, ant_error(a_msg, a_type, n)
    else:
        body = oai_error(o_msg, o_type, "messages" if kind == "context_length" else None, o_code)
    if kind == "429" and retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
        if not is_anthropic(path):
            headers["retry-after-ms"] = str(round(retry_after * 1000))
    return status, body, headers


def echo_key_reply(path: str, fault: dict, n: int, key: str) -> Reply:
    """An error (status ``fault["status"]``, default 400) whose message repeats the request's
    key and its header, as some providers and proxies do."""
    status = int(fault.get("status", 400))
    msg = f"Invalid API key provided: {key or '(none)'}; the request had Authorization: Bearer {key or '(none)'}"
    body = ant_error(msg, "invalid_request_error", n) if is_anthropic(path) else oai_error(msg, code="invalid_request")
    return status, body, request_id_header(path, n)


def fault_reply(path: str, fault: dict, n: int, key: str = "") -> tuple[str, Reply | None]:
    """(kind, the whole reply the fault makes) or (kind, None) when the request is answered
    normally afterwards: slow, timeout and drop (acted out by the caller, if at all) and
    content_filter on a model call. ``key``: the request's key (for echo_key)."""
    kind = str(fault.get("kind"))
    if kind in ERRORS:
        return kind, error_reply(path, kind, n, fault.get("retry_after"))
    if kind == "echo_key":
        return kind, echo_key_reply(path, fault, n, key)
    if kind == "malformed":
        return kind, (200, MALFORMED_BODY, {})
    if kind in ("slow", "timeout", "drop", "usage") or (kind == "content_filter" and path in MODEL_PATHS):
        return kind, None
    return kind, (400, {"error": {"message": f"unknown fault kind {kind!r}"}}, {})


def answer(
    path: str,
    body: dict | None,
    prompt: str,
    n: int,
    fault: dict | None,
    scripted: dict | None,
    key: str = "",
    cache: tuple[int, int] | str = (0, 0),
    reasoning: int = 0,
) -> Reply:
    """The reply to a model call on path (OPENAI_PATH or ANTHROPIC_PATH): n numbers the ids,
    fault is the fault that matched (if any), scripted the scripted answer (if any), key the
    request's API key (echoed by the echo_key fault; empty inside a batch), cache the prompt
    cache's (read, write) tokens (``State.prompt_cache``; a text: why the request is refused),
    reasoning the reasoning tokens a reasoning model (o1.., gpt-5) adds to its output."""
    if body is None:
        return 400, oai_error("request body is not a JSON object"), {}
    if isinstance(cache, str):
        return 400, ant_error(cache, "invalid_request_error", n), request_id_header(path, n)
    kind = ""
    if fault:
        kind, reply = fault_reply(path, fault, n, key)
        if reply is not None:
            return reply
    text = str(scripted["text"]) if scripted else "echo: " + prompt[:40]
    truncated = False
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int) and limit > 0 and len(text) > limit * 4:
        text, truncated = text[: limit * 4], True
    if kind == "content_filter":
        text = ""
    chars = sum(len(content_text(m.get("content"))) for m in messages_of(body))
    chars += len(content_text(body.get("system")))
    p_tok, c_tok = tokens(chars), tokens(len(text))
    model = body.get("model", "fake")
    read, write = min(cache[0], p_tok), min(cache[1], p_tok - min(cache[0], p_tok))
    thought = reasoning if REASONING.match(str(model)) else 0
    c_tok += thought
    if path == OPENAI_PATH:
        finish = "content_filter" if kind == "content_filter" else ("length" if truncated else "stop")
        return _usage_fault(
            kind,
            fault,
            (
                200,
                {
                    "id": f"chatcmpl-{n}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "logprobs": None,
                            "finish_reason": finish,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": p_tok,
                        "completion_tokens": c_tok,
                        "total_tokens": p_tok + c_tok,
                        "prompt_tokens_details": {"cached_tokens": read},
                        "completion_tokens_details": {"reasoning_tokens": thought},
                    },
                },
                {"x-request-id": f"req_{n}"},
            ),
        )
    stop = "refusal" if kind == "content_filter" else ("max_tokens" if truncated else "end_turn")
    content: list[dict] = [{"type": "text", "text": text}]
    choice = body.get("tool_choice")
    if body.get("tools") and isinstance(choice, dict) and choice.get("type") == "tool" and kind != "content_filter":
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        content = [
            {
                "type": "tool_use",
                "id": f"toolu_{n}",
                "name": choice.get("name"),
                "input": parsed if isinstance(parsed, dict) else {},
            }
        ]
        if not truncated:
            stop = "tool_use"
    return _usage_fault(
        kind,
        fault,
        (
            200,
            {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": p_tok - read - write,
                    "output_tokens": c_tok,
                    "cache_read_input_tokens": read,
                    "cache_creation_input_tokens": write,
                },
            },
            {"request-id": f"req_{n}"},
        ),
    )


def _usage_fault(kind: str, fault: dict | None, reply: Reply) -> Reply:
    """The ``usage`` fault: the answer with its usage object left out (``"usage": null``) or with
    the fault's counts written over the real ones (a negative or absurd count, a missing one: null)."""
    if kind != "usage" or fault is None:
        return reply
    status, body, headers = reply
    assert isinstance(body, dict)
    if fault.get("usage") is None:
        body.pop("usage", None)
    else:
        body["usage"] = {k: v for k, v in {**body["usage"], **fault["usage"]}.items() if v is not None}
    return status, body, headers
