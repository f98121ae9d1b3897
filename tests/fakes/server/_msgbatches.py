"""Anthropic Message Batches (``/v1/messages/batches``); records as in ``_batches``."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from ._answers import ANTHROPIC_PATH, Reply, ant_error, error_reply
from ._batches import WINDOW_S, encode, page, record_stat
from ._state import State, json_object

MSG_BATCHES_PATH = ANTHROPIC_PATH + "/batches"
MAX_REQUESTS = 100_000
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
ANTHROPIC_ANSWERED = ("slow", "timeout", "drop", "malformed")  # faults that answer normally
JSONL = "application/x-jsonl"


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _bad(message: str, n: int, status: int = 400, type_: str = "invalid_request_error") -> Reply:
    return status, ant_error(message, type_, n), {}


def _check(body: dict | None) -> str | None:
    """Why a create body is refused, or None."""
    requests = (body or {}).get("requests")
    if not isinstance(requests, list) or not requests:
        return "requests: expected a non-empty list of {custom_id, params} objects"
    if len(requests) > MAX_REQUESTS:
        return f"requests: {len(requests)} requests; a batch may have at most {MAX_REQUESTS}"
    seen: dict[str, int] = {}
    for i, req in enumerate(requests):
        cid = req.get("custom_id") if isinstance(req, dict) else None
        if not isinstance(req, dict):
            return f"requests.{i}: Input should be an object"
        if not isinstance(cid, str) or not CUSTOM_ID.fullmatch(cid):
            return f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$' (got {cid!r})"
        if cid in seen:
            return (
                f"requests.{i}.custom_id: Duplicate custom_id {cid!r} "
                f"(also requests.{seen[cid]}.custom_id); custom_ids must be unique in a batch"
            )
        if not isinstance(req.get("params"), dict):
            return f"requests.{i}.params: Input should be an object"
        seen[cid] = i
    return None


def _create(state: State, n: int, body: dict | None, host: str) -> Reply:
    if why := _check(body):
        return _bad(why, n)
    assert body is not None
    requests = [(r["custom_id"], r["params"]) for r in body["requests"]]
    with state.lock:
        fault = state.locked_batch_fault("anthropic")
        if fault and fault.get("kind") == "fail":
            return error_reply(MSG_BATCHES_PATH, "500", n)
        now = time.time()
        obj = {
            "id": f"msgbatch_{n}",
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "ended_at": None,
            "created_at": rfc3339(now),
            "expires_at": rfc3339(now + WINDOW_S),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
        }
        rec = {
            "provider": "anthropic",
            "obj": obj,
            "fault": fault,
            "retrieves": 0,
            "steps": int(state.settings.get("batch_steps", 2)),
            "requests": requests,
            "results": None,
            "size": len(requests),
            "custom_ids": [c for c, _ in requests],
        }
        state.batches[obj["id"]] = rec
        record_stat(state, rec)
        return 200, _render(obj, host), {}


def _advance(state: State, rec: dict) -> None:  # locked
    status = rec["obj"]["processing_status"]
    if status == "canceling":
        _finish(state, rec, 0, "canceled")
    elif status == "in_progress":
        rec["retrieves"] += 1
        if rec["retrieves"] >= max(1, rec["steps"]):
            fault = rec["fault"] or {}
            expire = fault.get("kind") == "expire"
            _finish(state, rec, int(fault.get("completed", 0)) if expire else len(rec["requests"]), "expired")


def _finish(state: State, rec: dict, limit: int, rest: str) -> None:  # locked
    counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
    lines = []
    for i, (cid, params) in enumerate(rec["requests"]):
        result: dict = {"type": rest}
        if i < limit:
            _, (status, data, _) = state.locked_batch_call(ANTHROPIC_PATH, params, ANTHROPIC_ANSWERED)
            result = {"type": "succeeded", "message": data} if status == 200 else {"type": "errored", "error": data}
        counts[result["type"]] += 1
        lines.append(encode({"custom_id": cid, "result": result}) + b"\n")
    rec["results"] = b"".join(lines)
    rec["obj"].update(processing_status="ended", ended_at=rfc3339(time.time()), request_counts=counts)


def _render(obj: dict, host: str) -> bytes:
    if obj["processing_status"] == "ended":
        obj = {**obj, "results_url": f"http://{host}{MSG_BATCHES_PATH}/{obj['id']}/results"}
    return encode(obj)


def route(state: State, method: str, path: str, raw: bytes, n: int, query: dict[str, str], host: str) -> Reply:
    """POST/GET /v1/messages/batches, GET/DELETE /v1/messages/batches/{id},
    GET .../{id}/results, POST .../{id}/cancel."""
    rest = path[len(MSG_BATCHES_PATH) :]
    if not rest:
        if method == "POST":
            return _create(state, n, json_object(raw), host)
        with state.lock:
            items = [r["obj"] for r in reversed(state.batches.values()) if r["provider"] == "anthropic"]
            chunk, more = page(items, query, "after_id", "before_id", 20, 1000)
            data = b",".join(_render(obj, host) for obj in chunk)
            return (
                200,
                b'{"data": [%s], "has_more": %s, "first_id": %s, "last_id": %s}'
                % (
                    data,
                    encode(more),
                    encode(chunk[0]["id"] if chunk else None),
                    encode(chunk[-1]["id"] if chunk else None),
                ),
                {},
            )
    batch_id, _, action = rest[1:].partition("/")
    if (method, action) not in (("GET", ""), ("GET", "results"), ("POST", "cancel"), ("DELETE", "")):
        return _bad(f"no route {method} {path}", n, 404, "not_found_error")
    with state.lock:
        rec = state.batches.get(batch_id)
        if rec is None or rec["provider"] != "anthropic":
            return _bad(f"No message batch with id {batch_id!r}.", n, 404, "not_found_error")
        obj = rec["obj"]
        ended = obj["processing_status"] == "ended"
        if action == "results":
            if not ended:
                return _bad(
                    f"Message batch {batch_id} has not ended yet: its results are "
                    "available once processing_status is 'ended'.",
                    n,
                )
            return 200, rec["results"], {"Content-Type": JSONL}
        if method == "DELETE":
            if not ended:
                return _bad(
                    f"Message batch {batch_id} is still in progress; cancel it and wait "
                    "for it to end before deleting it.",
                    n,
                )
            del state.batches[batch_id]
            state.stats["batches"][batch_id]["status"] = "deleted"
            return 200, {"id": batch_id, "type": "message_batch_deleted"}, {}
        if action == "cancel":
            if ended:
                return _bad(f"Message batch {batch_id} has already ended; it cannot be canceled.", n)
            if obj["processing_status"] == "in_progress":
                obj.update(processing_status="canceling", cancel_initiated_at=rfc3339(time.time()))
        else:
            _advance(state, rec)
        record_stat(state, rec)
        return 200, _render(obj, host), {}
