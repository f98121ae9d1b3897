"""The server's shared state: settings (the script), stats, files, fine-tuning jobs, batches."""

from __future__ import annotations

import json
import threading
import time
from email.parser import BytesParser
from typing import Any

from cocoeval.llm.promptcache import DEFAULT_TTL_S, AnthropicBreakpointCache, OpenAIPrefixCache

from ._answers import ANTHROPIC_PATH, Reply, answer, content_text, messages_of, prompt_of

BATCH_KEY = "batch:"  # by_path key prefix of the model calls a batch makes: batch:/v1/messages
DEFAULT_BATCH_STEPS = 2


def take(
    entries: list[dict],
    text: str,
    default_times: int | None,
    path: str = "",
    model: bool = True,
    request: str | None = None,
) -> dict | None:
    """First entry that applies and has times left; uses one of its times. An entry applies
    when its match is in text, its path, if any, is a prefix of path (without a path: model
    calls only) and its context, if any, is in request (the whole request's text)."""
    for entry in entries:
        scope = entry.get("path")
        if (entry.get("match") or "") not in text or not (path.startswith(scope) if scope else model):
            continue
        if entry.get("context") and entry["context"] not in (request if request is not None else text):
            continue
        if use_time(entry, default_times):
            return entry
    return None


def request_text(body: Any) -> str:
    """Every text of a model call's request: the system prompt and all messages."""
    if not isinstance(body, dict):
        return ""
    return "\n".join([content_text(body.get("system")), *(content_text(m.get("content")) for m in messages_of(body))])


def use_time(entry: dict, default_times: int | None) -> bool:
    """Whether entry has times left (None or negative: forever); uses one."""
    times = entry.get("times", default_times)
    if times is None or times < 0:
        return True
    if times == 0:
        return False
    entry["times"] = times - 1
    return True


def form(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Fields of a multipart/form-data body: name -> (filename, bytes)."""
    msg = BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    return {
        part.get_param("name", header="content-disposition"): (
            part.get_filename(),
            part.get_payload(decode=True) or b"",
        )
        for part in (msg.get_payload() if msg.is_multipart() else [])
    }


def json_object(raw: bytes | str) -> dict | None:
    try:
        body = json.loads(raw)
    except ValueError:  # bad UTF-8 too
        return None
    return body if isinstance(body, dict) else None


BODIES_KEPT = 500
"""Request bodies kept in ``stats()["bodies"]`` (the most recent)."""


class State:
    """Stats and script, shared by the handler threads (guarded by one lock). Methods whose
    name starts with ``locked_`` expect the caller to hold the lock."""

    def __init__(self, latency_s: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.start_latency = float(latency_s)
        self.counter = 0
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.settings: dict[str, Any] = {
                "latency_s": self.start_latency,
                "faults": [],
                "answers": [],
                "batch_steps": DEFAULT_BATCH_STEPS,
                "batch_faults": [],
            }
            self.stats: dict[str, Any] = {
                "requests": 0,
                "by_path": {},
                "max_in_flight": 0,
                "in_flight": 0,
                "prompts": {},
                "times": [],
                "bodies_last": None,
                "bodies": [],
                "files": {},
                "jobs": {},
                "job_requests": {},
                "batches": {},
            }
            self.blobs: dict[str, tuple[dict, bytes]] = {}  # file id -> (File object, bytes)
            self.batches: dict[str, dict] = {}  # batch id -> record (see _batches, _msgbatches)
            self.openai_cache = OpenAIPrefixCache()
            self.anthropic_cache = AnthropicBreakpointCache()

    def configure(self, settings: dict) -> None:
        with self.lock:
            for key, value in settings.items():
                if key in ("faults", "answers", "batch_faults"):
                    value = [dict(e) for e in value]  # own copies: their times are decremented
                self.settings[key] = value

    def prompt_cache(self, path: str, body: Any) -> tuple[tuple[int, int] | str, Any]:
        """Bill a live model call's prompt caching the provider's way, as it arrives: ((cache-read
        tokens, cache-write tokens), or why the request is refused (over 4 Anthropic
        breakpoints); and the function to call once it is answered, which writes its prefix to
        the cache (requests arriving meanwhile do not find it, as with the providers)."""
        if not isinstance(body, dict):
            return (0, 0), lambda: None
        with self.lock:
            ttl = float(self.settings.get("cache_ttl_s", DEFAULT_TTL_S))
            self.openai_cache.ttl_s = self.anthropic_cache.ttl_s = ttl
            if path == ANTHROPIC_PATH:
                try:
                    billed, store = self.anthropic_cache.look(body)
                except ValueError as e:
                    return str(e), lambda: None
            else:
                cached, store = self.openai_cache.look(body)
                billed = (cached, 0)

        def stored() -> None:
            with self.lock:
                store()

        return billed, stored

    def next_n(self) -> int:  # locked
        self.counter += 1
        return self.counter

    def arrive(self, path: str, prompt: str, body: Any) -> tuple[int, float, dict | None, dict | None]:
        """Count a live model call; returns (n, latency, fault, scripted answer)."""
        with self.lock:
            n, fault, scripted = self.locked_model_call(path, path, prompt, body, ("slow", "timeout"))
            st = self.stats
            st["in_flight"] += 1
            st["max_in_flight"] = max(st["max_in_flight"], st["in_flight"])
            return n, float(self.settings.get("latency_s") or 0), fault, scripted

    def locked_model_call(
        self, path: str, key: str, prompt: str, body: Any, answered: tuple[str, ...]
    ) -> tuple[int, dict | None, dict | None]:
        """Count a model call under by_path key; returns (n, fault, scripted answer). The
        scripted answer is used up only when no fault matched or its kind is in answered."""
        n = self.next_n()
        st = self.stats
        st["by_path"][key] = st["by_path"].get(key, 0) + 1
        fault = take(self.settings.get("faults") or [], prompt, 1, path, True)
        st["requests"] += 1
        st["prompts"][prompt] = st["prompts"].get(prompt, 0) + 1
        st["times"].append(time.monotonic())
        st["bodies_last"] = body
        st["bodies"] = [*st["bodies"][-(BODIES_KEPT - 1) :], body]
        scripted = None
        if fault is None or fault.get("kind") in answered:
            scripted = take(self.settings.get("answers") or [], prompt, None, request=request_text(body))
        return n, fault, scripted

    def locked_batch_call(self, path: str, body: dict, answered: tuple[str, ...]) -> tuple[int, Reply]:
        """Answer one request of a batch like a live model call on path, without latency;
        faults whose kind is in answered are ignored (answered normally)."""
        prompt = prompt_of(body)
        n, fault, scripted = self.locked_model_call(path, BATCH_KEY + path, prompt, body, answered)
        if fault is not None and fault.get("kind") in answered:
            fault = None
        return n, answer(path, body, prompt, n, fault, scripted)

    def locked_batch_fault(self, provider: str) -> dict | None:
        """The next batch fault for a batch being created (its times are used)."""
        for entry in self.settings.get("batch_faults") or []:
            if entry.get("provider") not in (None, provider):
                continue
            if use_time(entry, 1):
                return dict(entry)
        return None

    def arrive_api(self, path: str) -> tuple[int, dict | None]:
        """Count a file, fine-tuning or batch request (not a model call); returns (n, fault)."""
        with self.lock:
            n = self.next_n()
            self.stats["by_path"][path] = self.stats["by_path"].get(path, 0) + 1
            return n, take(self.settings.get("faults") or [], path, 1, path, False)

    def add_file(self, n: int, filename: str, purpose: str, data: bytes) -> dict:
        with self.lock:
            return self.locked_add_file(f"file-{n}", filename, purpose, data)

    def locked_add_file(self, file_id: str, filename: str, purpose: str, data: bytes) -> dict:
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        self.blobs[obj["id"]] = (obj, data)
        self.stats["files"][obj["id"]] = {k: obj[k] for k in ("filename", "purpose", "bytes")}
        return obj

    def delete_file(self, file_id: str) -> bool:
        with self.lock:
            self.stats["files"].pop(file_id, None)
            return self.blobs.pop(file_id, None) is not None

    def create_job(self, n: int, body: dict) -> dict | str:
        """The new job, or the parameter that names no uploaded file."""
        with self.lock:
            for key in ("training_file", "validation_file"):
                if str(body.get(key)) not in self.blobs and (key == "training_file" or body.get(key)):
                    return key
            job = {
                "id": f"ftjob-{n}",
                "object": "fine_tuning.job",
                "model": body["model"],
                "created_at": int(time.time()),
                "status": "validating_files",
                "training_file": body["training_file"],
                "validation_file": body.get("validation_file"),
                "fine_tuned_model": None,
                "hyperparameters": _hyperparameters(body),
                "organization_id": "org-fake",
                "result_files": [],
                "seed": body.get("seed") or 0,
                "trained_tokens": None,
                "error": None,
                "finished_at": None,
                "user_provided_suffix": body.get("suffix"),
            }
            job["method"] = body.get("method") if isinstance(body.get("method"), dict) else {"type": "supervised"}
            self.stats["jobs"][job["id"]] = job
            self.stats["job_requests"][job["id"]] = body
            return dict(job)

    def advance_job(self, job_id: str) -> dict | None:
        """The job a step on: validating_files -> running (or failed) -> succeeded."""
        with self.lock:
            job = self.stats["jobs"].get(job_id)
            if job is None or job["status"] not in ("validating_files", "running"):
                return dict(job) if job else None
            data = self.blobs.get(job["training_file"], ({}, b""))[1]
            lines = [ln for ln in data.splitlines() if ln.strip()]
            now = int(time.time())
            if job["status"] == "running":
                name = f"{job['model']}:fake-org:{job['user_provided_suffix'] or 'custom'}"
                job.update(
                    status="succeeded",
                    finished_at=now,
                    trained_tokens=len(lines) * 100,
                    fine_tuned_model=f"ft:{name}:{job['id'].split('-', 1)[1]}",
                )
            elif bad := next(
                (
                    i
                    for i, ln in enumerate(lines or [b""], 1)
                    if not isinstance((json_object(ln) or {}).get("messages"), list)
                ),
                0,
            ):
                job.update(
                    status="failed",
                    finished_at=now,
                    error={
                        "code": "invalid_file",
                        "param": "training_file",
                        "message": f'Invalid file format. Line {bad}: expected a JSON object with a "messages" list.',
                    },
                )
            else:
                job["status"] = "running"
            return dict(job)

    def leave(self) -> None:
        with self.lock:
            self.stats["in_flight"] -= 1

    def snapshot(self) -> bytes:
        with self.lock:
            return json.dumps(self.stats).encode()


def _hyperparameters(body: dict) -> dict:
    """The job's hyperparameters as the request gave them (``method.<type>.hyperparameters``, or
    the older top-level ``hyperparameters``); "auto" where not given, as OpenAI reports them."""
    method = body.get("method") if isinstance(body.get("method"), dict) else {}
    inner = method.get(str(method.get("type") or "supervised"))
    given = inner.get("hyperparameters") if isinstance(inner, dict) else body.get("hyperparameters")
    given = given if isinstance(given, dict) else {}
    return {k: given.get(k, "auto") for k in ("n_epochs", "batch_size", "learning_rate_multiplier")}
