"""OpenAI Batch API (``/v1/batches``), and helpers shared with the Anthropic batches.

A batch is a record in ``State.batches``: {"provider", "obj" (the API object), "fault" (the
batch fault it drew at creation), "steps" (batch_steps at creation), "retrieves",
"requests" ([(custom_id, body)]), "custom_ids" (for /stats)}. Every retrieve moves it a
step on; the requests are answered (by ``State.locked_batch_call``) at the step that ends it.
"""

from __future__ import annotations

import json
import time

from ._answers import OPENAI_PATH, Reply, oai_error
from ._state import State, json_object

BATCHES_PATH = "/v1/batches"
MAX_LINES = 50_000
WINDOW_S = 24 * 3600
OPENAI_ANSWERED = ("slow", "timeout", "drop")  # per-request faults that answer normally
EXPIRED = {
    "code": "batch_expired",
    "message": "This request could not be executed before the completion window expired.",
}
DUPLICATE = (
    "The custom_id for this request is a duplicate of another request. The custom_id "
    "parameter must be unique for each request in a batch."
)


def page(
    items: list[dict], query: dict[str, str], after_key: str, before_key: str | None, default: int, maximum: int
) -> tuple[list[dict], bool]:
    """One page of items (newest first) for a list call: (page, has_more)."""
    try:
        limit = max(1, min(int(query.get("limit", default)), maximum))
    except ValueError:
        limit = default
    ids = [item["id"] for item in items]
    before = query.get(before_key) if before_key else None
    if before:
        if before not in ids:
            return [], False
        end = ids.index(before)
        return items[max(0, end - limit) : end], end - limit > 0
    after = query.get(after_key)
    if after and after not in ids:
        return [], False
    start = ids.index(after) + 1 if after else 0
    return items[start : start + limit], start + limit < len(items)


def record_stat(state: State, rec: dict) -> None:  # locked
    obj = rec["obj"]
    state.stats["batches"][obj["id"]] = {
        "provider": rec["provider"],
        "status": obj.get("status") or obj.get("processing_status"),
        "requests": rec["size"],
        "custom_ids": rec["custom_ids"],
        "fault": (rec["fault"] or {}).get("kind"),
    }


def encode(obj: object) -> bytes:
    return json.dumps(obj).encode()


def validate(data: bytes, endpoint: str) -> tuple[list[tuple[str, dict]], list[dict], str | None]:
    """(requests, errors, model) of a batch input file."""
    numbered = [(i, ln) for i, ln in enumerate(data.splitlines(), 1) if ln.strip()]
    if not numbered:
        return [], [dict(code="empty_file", message="The input file is empty.", param=None, line=None)], None
    if len(numbered) > MAX_LINES:
        return (
            [],
            [
                dict(
                    code="too_many_tasks",
                    param=None,
                    line=None,
                    message=(f"The input file has {len(numbered)} requests; a batch may have at most {MAX_LINES}."),
                )
            ],
            None,
        )
    requests: list[tuple[str, dict]] = []
    errors: list[dict] = []
    seen: set[str] = set()
    model = None
    for i, raw in numbered:
        line = json_object(raw)
        err: tuple[str, str, str | None] | None = None
        if line is None:
            err = ("invalid_json_line", "This line is not parseable as valid JSON.", None)
        else:
            cid, body, url = line.get("custom_id"), line.get("body"), line.get("url")
            if not isinstance(cid, str) or not cid:
                err = ("missing_required_parameter", "Missing required parameter: 'custom_id'.", "custom_id")
            elif cid in seen:
                err = ("duplicate_custom_id", DUPLICATE, "custom_id")
            elif line.get("method") != "POST":
                err = ("invalid_method", f"The method must be 'POST', not {line.get('method')!r}.", "method")
            elif url != endpoint:
                err = ("url_mismatch", f"The URL {url!r} does not match the batch's endpoint {endpoint!r}.", "url")
            elif not isinstance(body, dict):
                err = (
                    "missing_required_parameter" if body is None else "invalid_body",
                    "The request 'body' must be a JSON object.",
                    "body",
                )
            elif model is not None and body.get("model") != model:
                err = (
                    "model_mismatch",
                    f"The model {body.get('model')!r} differs from the "
                    f"batch's model {model!r}: a batch uses one model.",
                    "body.model",
                )
            if isinstance(cid, str) and cid:
                seen.add(cid)
        if err:
            errors.append({"code": err[0], "message": err[1], "param": err[2], "line": i})
        else:
            requests.append((cid, body))
            model = model if model is not None else body.get("model")
    return requests, errors, model


def _create(state: State, n: int, body: dict | None) -> Reply:
    if body is None:
        return 400, oai_error("request body is not a JSON object"), {}
    file_id = str(body.get("input_file_id"))
    with state.lock:
        blob = state.blobs.get(file_id)
        if blob is None:
            return (
                400,
                oai_error(f"Invalid 'input_file_id': {file_id!r} is not an uploaded file.", param="input_file_id"),
                {},
            )
        if blob[0]["purpose"] != "batch":
            return (
                400,
                oai_error(
                    f"Invalid 'input_file_id': {file_id!r} has purpose {blob[0]['purpose']!r}, not 'batch'.",
                    param="input_file_id",
                ),
                {},
            )
        for key, want in (("endpoint", OPENAI_PATH), ("completion_window", "24h")):
            if body.get(key) != want:
                return (
                    400,
                    oai_error(f"Invalid {key!r}: {body.get(key)!r} (the fake server supports {want!r})", param=key),
                    {},
                )
        if not isinstance(body.get("metadata"), dict | None):
            return 400, oai_error("Invalid 'metadata': expected an object.", param="metadata"), {}
        now = int(time.time())
        obj = {
            "id": f"batch_{n}",
            "object": "batch",
            "endpoint": OPENAI_PATH,
            "model": None,
            "errors": None,
            "input_file_id": file_id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + WINDOW_S,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
            "usage": None,
        }
        requests, errors, model = validate(blob[1], OPENAI_PATH)
        rec = {
            "provider": "openai",
            "obj": obj,
            "fault": state.locked_batch_fault("openai"),
            "steps": int(state.settings.get("batch_steps", 2)),
            "retrieves": 0,
            "requests": requests,
            "errors": errors,
            "model": model,
            "size": len(requests) + len(errors),
            "custom_ids": [cid for cid, _ in requests],
        }
        state.batches[obj["id"]] = rec
        record_stat(state, rec)
        return 200, encode(obj), {}


def _advance(state: State, rec: dict) -> None:  # locked
    obj, now = rec["obj"], int(time.time())
    if obj["status"] == "cancelling":
        obj.update(status="cancelled", cancelled_at=now)
        obj["request_counts"]["total"] = len(rec["requests"])
        return
    if obj["status"] not in ("validating", "in_progress", "finalizing"):
        return
    rec["retrieves"] += 1
    k, fault = rec["retrieves"], rec["fault"] or {}
    if k == 1:
        errors = rec["errors"]
        if not errors and fault.get("kind") == "fail":
            errors = [
                {
                    "code": "token_limit_exceeded",
                    "param": None,
                    "line": None,
                    "message": (
                        f"Enqueued token limit reached for {rec['model']} in organization org-fake. "
                        "Please try again once some in_progress batches have been completed."
                    ),
                }
            ]
        if errors:
            obj.update(status="failed", failed_at=now, errors={"object": "list", "data": errors})
            return
        obj.update(status="in_progress", in_progress_at=now, model=rec["model"])
        obj["request_counts"]["total"] = len(rec["requests"])
    steps = max(1, rec["steps"])
    if k >= steps:
        _finish(state, rec, now, fault)
    elif k == steps - 1 and k >= 2:
        obj.update(status="finalizing", finalizing_at=now)


def _finish(state: State, rec: dict, now: int, fault: dict) -> None:  # locked
    obj, requests = rec["obj"], rec["requests"]
    expire = fault.get("kind") == "expire"
    limit = int(fault.get("completed", 0)) if expire else len(requests)
    out: list[dict] = []
    err: list[dict] = []
    used = [0, 0]
    for i, (cid, body) in enumerate(requests):
        if i >= limit:
            err.append(
                {"id": f"batch_req_{state.next_n()}", "custom_id": cid, "response": None, "error": dict(EXPIRED)}
            )
            continue
        n, (status, data, _) = state.locked_batch_call(OPENAI_PATH, body, OPENAI_ANSWERED)
        if isinstance(data, dict) and status == 200:
            u = data.get("usage") or {}  # none, or wrong counts, under the usage fault
            used[0] += max(u.get("prompt_tokens") or 0, 0)
            used[1] += max(u.get("completion_tokens") or 0, 0)
        (out if status == 200 else err).append(
            {
                "id": f"batch_req_{n}",
                "custom_id": cid,
                "error": None,
                "response": {
                    "status_code": status,
                    "request_id": f"req_{n}",
                    "body": data.decode("utf-8", "replace") if isinstance(data, bytes) else data,
                },
            }
        )
    files = []
    for kind, lines in (("output", out), ("error", err)):
        file_id = f"file-{state.next_n()}" if lines else None
        if file_id:
            state.locked_add_file(
                file_id, f"{obj['id']}_{kind}.jsonl", "batch_output", b"".join(encode(line) + b"\n" for line in lines)
            )
        files.append(file_id)
    obj.update(
        output_file_id=files[0],
        error_file_id=files[1],
        request_counts={"total": len(requests), "completed": len(out), "failed": len(err)},
        usage={
            "input_tokens": used[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": used[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sum(used),
        },
    )
    if expire:
        obj.update(status="expired", expired_at=now)
    else:
        obj.update(status="completed", finalizing_at=obj["finalizing_at"] or now, completed_at=now)


def route(state: State, method: str, path: str, raw: bytes, n: int, query: dict[str, str]) -> Reply:
    """POST /v1/batches, GET /v1/batches[/{id}], POST /v1/batches/{id}/cancel."""
    rest = path[len(BATCHES_PATH) :]
    if not rest:
        if method == "POST":
            return _create(state, n, json_object(raw))
        with state.lock:
            items = [r["obj"] for r in reversed(state.batches.values()) if r["provider"] == "openai"]
            chunk, more = page(items, query, "after", None, 20, 100)
            return (
                200,
                encode(
                    {
                        "object": "list",
                        "data": chunk,
                        "has_more": more,
                        "first_id": chunk[0]["id"] if chunk else None,
                        "last_id": chunk[-1]["id"] if chunk else None,
                    }
                ),
                {},
            )
    batch_id, _, action = rest[1:].partition("/")
    if (method, action) not in (("GET", ""), ("POST", "cancel")):
        return 404, oai_error(f"no route {method} {path}"), {}
    with state.lock:
        rec = state.batches.get(batch_id)
        if rec is None or rec["provider"] != "openai":
            return 404, oai_error(f"No batch found with id {batch_id!r}.", param="batch_id"), {}
        obj = rec["obj"]
        if not action:
            _advance(state, rec)
        elif obj["status"] in ("validating", "in_progress", "finalizing"):
            obj.update(status="cancelling", cancelling_at=int(time.time()))
        elif obj["status"] != "cancelling":
            return 400, oai_error(f"Cannot cancel a batch with status {obj['status']!r}."), {}
        record_stat(state, rec)
        return 200, encode(obj), {}
