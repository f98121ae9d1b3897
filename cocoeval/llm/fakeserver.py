"""A fake LLM provider: a test double for tests and benchmarks.

It speaks the real wire formats, so the official ``openai`` and ``anthropic`` SDKs talk
to it through ``base_url``; nothing leaves the machine and no API key is needed.

Endpoints
  POST /v1/chat/completions  OpenAI chat completions (non-streaming)
  POST /v1/messages          Anthropic Messages (text, or ``tool_use`` when ``tool_choice``
                             names a tool: the answer text parsed as a JSON object)
  POST /v1/files             OpenAI file upload (multipart: purpose, file; kept in memory)
  GET  /v1/files/{id}[/content]   the File object / the raw bytes
  POST /v1/fine_tuning/jobs       create a job (400 when training_file was not uploaded)
  GET  /v1/fine_tuning/jobs/{id}  the job, a step on per retrieve: validating_files -> running
                             -> succeeded (fine_tuned_model ft:<model>:fake-org:<suffix or
                             custom>:<n>, trained_tokens lines * 100); failed (invalid_file)
                             instead when a line is not JSON with a "messages" list
  GET  /stats                counters: requests (model calls only), by_path (all API calls),
                             in_flight, max_in_flight, prompts (last message text -> count),
                             times, bodies_last; files (id -> filename, purpose, bytes), jobs
  POST /reset                clear stats, files, jobs and the script (faults, answers;
                             latency back to the start value)
  POST /config               merge settings: {"latency_s": float, "faults": [...],
                             "answers": [{"match": str, "text": str, "times": int}]}

The answer is the first scripted answer whose ``match`` is a substring of the last
message's text, else ``"echo: " + text[:40]``; it is cut to ``max_tokens * 4``
characters (finish "length" / "max_tokens"). Tokens are characters / 4, rounded up.
Latency (``latency_s``) applies to model calls only.

Faults, ``{"match": str, "kind": K, "times": int (default 1, -1 = forever),
"retry_after": float, "delay_s": float, "path": str}``, first match with times left wins.
A fault without ``path`` applies to model calls only; one with ``path`` applies to requests
whose path starts with it (``{"kind": "500", "path": "/v1/fine_tuning"}``), and for the
file and fine-tuning endpoints ``match`` is tested against the request path. Kinds:
  429             rate limit (``retry-after`` header when retry_after is given)
  quota           OpenAI 429 insufficient_quota; Anthropic 400 credit balance too low
  500, 529        server error / overloaded
  401, 403, 404   authentication / permission / not found errors
  context_length  400 prompt too long (OpenAI code context_length_exceeded)
  content_filter  200 with finish_reason "content_filter" / stop_reason "refusal", no text
                  (model calls only)
  slow            sleep delay_s, then answer normally
  timeout         sleep delay_s (default 30), then answer (clients give up first)
  drop            close the connection without any response
  malformed       200 with a truncated JSON body

Run it alone with ``python -m cocoeval.llm.fakeserver --port 0`` (prints ``PORT <n>``),
or from Python with ``with FakeServer() as srv: ...`` (a subprocess, so the server does
not compete for the client's GIL).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import math
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
FILES_PATH = "/v1/files"
JOBS_PATH = "/v1/fine_tuning/jobs"
MALFORMED_BODY = b'{"id": "x", "choices": ['

# kind -> (status, openai (type, code, message), anthropic (status, type, message))
_ERRORS: dict[str, tuple[int, tuple[str, str | None, str], tuple[int, str, str]]] = {
    "429": (429, ("requests", "rate_limit_exceeded", "Rate limit reached"),
            (429, "rate_limit_error", "Number of request tokens has exceeded your rate limit.")),
    "quota": (429, ("insufficient_quota", "insufficient_quota",
                    "You exceeded your current quota, please check your plan and billing details."),
              (400, "invalid_request_error",
               "Your credit balance is too low to access the Anthropic API.")),
    "500": (500, ("server_error", None, "The server had an error while processing your request."),
            (500, "api_error", "Internal server error")),
    "529": (529, ("server_error", "overloaded", "Overloaded"), (529, "overloaded_error", "Overloaded")),
    "401": (401, ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
            (401, "authentication_error", "invalid x-api-key")),
    "403": (403, ("invalid_request_error", "unsupported_country_region_territory",
                  "Country, region, or territory not supported"),
            (403, "permission_error", "Your API key does not have permission to use the specified resource.")),
    "404": (404, ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
            (404, "not_found_error", "model not found")),
    "context_length": (400, ("invalid_request_error", "context_length_exceeded",
                             "This model's maximum context length is 128000 tokens. However, your "
                             "messages resulted in 300000 tokens. Please reduce the length of the messages."),
                       (400, "invalid_request_error", "prompt is too long: 300000 tokens > 200000 maximum")),
}
FAULT_KINDS = (*_ERRORS, "content_filter", "slow", "timeout", "drop", "malformed")


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


def _messages(body: dict | None) -> list[dict]:
    messages = (body or {}).get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def _tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def _take(entries: list[dict], text: str, default_times: int | None, path: str = "",
          model: bool = True) -> dict | None:
    """First entry that applies and has times left; uses one of its times. An entry applies
    when its match is in text and its path, if any, is a prefix of path (without a path:
    model calls only)."""
    for entry in entries:
        scope = entry.get("path")
        if (entry.get("match") or "") not in text or not (
                path.startswith(scope) if scope else model):
            continue
        times = entry.get("times", default_times)
        if times is None or times < 0:
            return entry
        if times == 0:
            continue
        entry["times"] = times - 1
        return entry
    return None


def _oai_error(message: str, type_: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _form(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Fields of a multipart/form-data body: name -> (filename, bytes)."""
    msg = BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    return {part.get_param("name", header="content-disposition"):
            (part.get_filename(), part.get_payload(decode=True) or b"")
            for part in (msg.get_payload() if msg.is_multipart() else [])}


def _json_object(raw: bytes) -> dict | None:
    try:
        body = json.loads(raw)
    except ValueError:  # bad UTF-8 too
        return None
    return body if isinstance(body, dict) else None


class State:
    """Stats and script, shared by the handler threads (guarded by one lock)."""

    def __init__(self, latency_s: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.start_latency = float(latency_s)
        self.counter = 0
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.settings: dict[str, Any] = {"latency_s": self.start_latency, "faults": [], "answers": []}
            self.stats: dict[str, Any] = {"requests": 0, "by_path": {}, "max_in_flight": 0,
                                          "in_flight": 0, "prompts": {}, "times": [],
                                          "bodies_last": None, "files": {}, "jobs": {}}
            self.blobs: dict[str, tuple[dict, bytes]] = {}  # file id -> (File object, bytes)

    def configure(self, settings: dict) -> None:
        with self.lock:
            for key, value in settings.items():
                if key in ("faults", "answers"):
                    value = [dict(e) for e in value]  # own copies: their times are decremented
                self.settings[key] = value

    def arrive(self, path: str, prompt: str, body: Any) -> tuple[int, float, dict | None, dict | None]:
        """Count a request; returns (n, latency, fault, answer)."""
        with self.lock:
            n, fault = self._count(path, prompt, True)
            st = self.stats
            st["requests"] += 1
            st["in_flight"] += 1
            st["max_in_flight"] = max(st["max_in_flight"], st["in_flight"])
            st["prompts"][prompt] = st["prompts"].get(prompt, 0) + 1
            st["times"].append(time.monotonic())
            st["bodies_last"] = body
            answer = None
            if fault is None or fault.get("kind") in ("slow", "timeout"):
                answer = _take(self.settings.get("answers") or [], prompt, None)
            return n, float(self.settings.get("latency_s") or 0), fault, answer

    def _count(self, path: str, text: str, model: bool) -> tuple[int, dict | None]:  # locked
        self.counter += 1
        self.stats["by_path"][path] = self.stats["by_path"].get(path, 0) + 1
        return self.counter, _take(self.settings.get("faults") or [], text, 1, path, model)

    def arrive_api(self, path: str) -> tuple[int, dict | None]:
        """Count a file or fine-tuning request (not a model call); returns (n, fault)."""
        with self.lock:
            return self._count(path, path, False)

    def add_file(self, n: int, filename: str, purpose: str, data: bytes) -> dict:
        obj = {"id": f"file-{n}", "object": "file", "bytes": len(data),
               "created_at": int(time.time()), "filename": filename, "purpose": purpose,
               "status": "processed"}
        with self.lock:
            self.blobs[obj["id"]] = (obj, data)
            self.stats["files"][obj["id"]] = {k: obj[k] for k in ("filename", "purpose", "bytes")}
        return obj

    def create_job(self, n: int, body: dict) -> dict | str:
        """The new job, or the parameter that names no uploaded file."""
        with self.lock:
            for key in ("training_file", "validation_file"):
                if str(body.get(key)) not in self.blobs and (key == "training_file" or body.get(key)):
                    return key
            job = {"id": f"ftjob-{n}", "object": "fine_tuning.job", "model": body["model"],
                   "created_at": int(time.time()), "status": "validating_files",
                   "training_file": body["training_file"],
                   "validation_file": body.get("validation_file"), "fine_tuned_model": None,
                   "hyperparameters": dict.fromkeys(
                       ("n_epochs", "batch_size", "learning_rate_multiplier"), "auto"),
                   "organization_id": "org-fake", "result_files": [],
                   "seed": body.get("seed") or 0, "trained_tokens": None, "error": None,
                   "finished_at": None, "user_provided_suffix": body.get("suffix")}
            self.stats["jobs"][job["id"]] = job
            return dict(job)

    def advance_job(self, job_id: str) -> dict | None:
        """The job a step on: validating_files -> running (or failed) -> succeeded."""
        with self.lock:
            job = self.stats["jobs"].get(job_id)
            if job is None or job["status"] not in ("validating_files", "running"):
                return dict(job) if job else None
            lines = [ln for ln in self.blobs[job["training_file"]][1].splitlines() if ln.strip()]
            now = int(time.time())
            if job["status"] == "running":
                name = f"{job['model']}:fake-org:{job['user_provided_suffix'] or 'custom'}"
                job.update(status="succeeded", finished_at=now, trained_tokens=len(lines) * 100,
                           fine_tuned_model=f"ft:{name}:{job['id'].split('-', 1)[1]}")
            elif bad := next((i for i, ln in enumerate(lines or [b""], 1)
                              if not isinstance((_json_object(ln) or {}).get("messages"), list)), 0):
                job.update(status="failed", finished_at=now, error={
                    "code": "invalid_file", "param": "training_file", "message":
                    f'Invalid file format. Line {bad}: expected a JSON object with a "messages" list.'})
            else:
                job["status"] = "running"
            return dict(job)

    def leave(self) -> None:
        with self.lock:
            self.stats["in_flight"] -= 1

    def snapshot(self) -> bytes:
        with self.lock:
            return json.dumps(self.stats).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cocoeval-fakeserver/1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms stalls
    server: FakeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes | dict, headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self.close_connection = True

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def _no_route(self) -> None:
        self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_GET(self) -> None:
        path = self._path()
        if path == "/stats":
            self._send(200, self.server.state.snapshot())
        elif path.startswith((FILES_PATH + "/", JOBS_PATH + "/")):
            self._api(path, b"")
        else:
            self._no_route()

    def do_POST(self) -> None:
        path, raw = self._path(), self.rfile.read(int(self.headers.get("Content-Length") or 0))
        state = self.server.state
        if path == "/reset":
            state.reset()
            return self._send(200, {"ok": True})
        if path == "/config":
            try:
                state.configure(json.loads(raw or b"{}"))
            except (ValueError, TypeError, AttributeError) as exc:
                return self._send(400, {"error": {"message": f"bad config: {exc}"}})
            return self._send(200, {"ok": True})
        if path in (FILES_PATH, JOBS_PATH):
            return self._api(path, raw)
        if re.fullmatch(r"/openai/deployments/[^/]+/chat/completions", path):
            path = OPENAI_PATH  # Azure OpenAI's route for the same wire format
        if path not in (OPENAI_PATH, ANTHROPIC_PATH):
            return self._no_route()
        body = _json_object(raw)
        msgs = _messages(body)
        prompt = content_text(msgs[-1].get("content")) if msgs else ""
        n, latency, fault, answer = state.arrive(path, prompt, body if body is not None else raw.decode("utf-8", "replace"))
        try:
            if latency > 0:
                time.sleep(latency)
            self._model(path, body, prompt, n, fault, answer)
        finally:
            state.leave()

    def _error(self, path: str, kind: str, n: int, retry_after: float | None = None) -> None:
        status, (o_type, o_code, o_msg), (a_status, a_type, a_msg) = _ERRORS[kind]
        headers = {}
        if path != ANTHROPIC_PATH:
            headers["x-request-id"] = f"req_{n}"
            body = _oai_error(o_msg, o_type, "messages" if kind == "context_length" else None, o_code)
        else:
            status = a_status
            headers["request-id"] = f"req_{n}"
            body = {"type": "error", "error": {"type": a_type, "message": a_msg}, "request_id": f"req_{n}"}
        if kind == "429" and retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
            if path != ANTHROPIC_PATH:
                headers["retry-after-ms"] = str(round(retry_after * 1000))
        self._send(status, body, headers)

    def _fault(self, path: str, fault: dict, n: int) -> bool:
        """Act out a fault; True when that was the whole response."""
        kind = str(fault.get("kind"))
        if kind in _ERRORS:
            self._error(path, kind, n, fault.get("retry_after"))
        elif kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        elif kind == "malformed":
            self._send(200, MALFORMED_BODY)
        elif kind in ("slow", "timeout"):
            time.sleep(float(fault.get("delay_s", 30 if kind == "timeout" else 1)))
            return False
        elif kind == "content_filter" and path in (OPENAI_PATH, ANTHROPIC_PATH):
            return False
        else:
            self._send(400, {"error": {"message": f"unknown fault kind {kind!r}"}})
        return True

    def _api(self, path: str, raw: bytes) -> None:
        """The OpenAI file and fine-tuning endpoints."""
        state = self.server.state
        n, fault = state.arrive_api(path)
        if fault and self._fault(path, fault, n):
            return None
        hdrs = {"x-request-id": f"req_{n}"}
        if path == FILES_PATH:
            fields = _form(self.headers.get("Content-Type") or "", raw)
            if "purpose" not in fields or "file" not in fields:
                return self._send(400, _oai_error("expected multipart/form-data with the fields "
                                                  "purpose and file", param="file"), hdrs)
            (name, data), purpose = fields["file"], fields["purpose"][1].decode("utf-8", "replace")
            return self._send(200, state.add_file(n, name or "upload", purpose, data), hdrs)
        if path == JOBS_PATH:
            body = _json_object(raw)
            job = state.create_job(n, body) if body and isinstance(body.get("model"), str) else "model"
            if isinstance(job, str):
                why = "missing or not a string" if job == "model" else "not an uploaded file"
                return self._send(400, _oai_error(f"invalid {job}: {why}", param=job), hdrs)
            return self._send(200, job, hdrs)
        found: dict | None = None
        if path.startswith(JOBS_PATH + "/"):
            found = state.advance_job(path[len(JOBS_PATH) + 1:])
        else:
            file_id, _, rest = path[len(FILES_PATH) + 1:].partition("/")
            entry = state.blobs.get(file_id) if rest in ("", "content") else None
            if entry and rest:
                return self._send(200, entry[1], hdrs, "application/octet-stream")
            found = entry[0] if entry else None
        if found is None:
            return self._send(404, _oai_error(f"No such object: {path}", param="id"), hdrs)
        return self._send(200, found, hdrs)

    def _model(self, path: str, body: dict | None, prompt: str, n: int,
               fault: dict | None, answer: dict | None) -> None:
        if body is None:
            return self._send(400, _oai_error("request body is not a JSON object"))
        if fault and self._fault(path, fault, n):
            return None
        kind = str(fault.get("kind")) if fault else ""

        text = str(answer["text"]) if answer else "echo: " + prompt[:40]
        truncated = False
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if isinstance(limit, int) and limit > 0 and len(text) > limit * 4:
            text, truncated = text[: limit * 4], True
        if kind == "content_filter":
            text = ""
        chars = sum(len(content_text(m.get("content"))) for m in _messages(body))
        chars += len(content_text(body.get("system")))
        p_tok, c_tok = _tokens(chars), _tokens(len(text))
        model = body.get("model", "fake")
        if path == OPENAI_PATH:
            finish = "content_filter" if kind == "content_filter" else ("length" if truncated else "stop")
            return self._send(200, {
                "id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": None, "finish_reason": finish}],
                "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok,
                          "total_tokens": p_tok + c_tok, "prompt_tokens_details": {"cached_tokens": 0}},
            }, {"x-request-id": f"req_{n}"})
        stop = "refusal" if kind == "content_filter" else ("max_tokens" if truncated else "end_turn")
        content: list[dict] = [{"type": "text", "text": text}]
        choice = body.get("tool_choice")
        if (body.get("tools") and isinstance(choice, dict) and choice.get("type") == "tool"
                and kind != "content_filter"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            content = [{"type": "tool_use", "id": f"toolu_{n}", "name": choice.get("name"),
                        "input": parsed if isinstance(parsed, dict) else {}}]
            if not truncated:
                stop = "tool_use"
        return self._send(200, {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": p_tok, "output_tokens": c_tok,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        }, {"request-id": f"req_{n}"})


class FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], latency_s: float = 0.0) -> None:
        self.state = State(latency_s)
        super().__init__(address, Handler)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cocoeval.llm.fakeserver",
                                     description="Fake OpenAI/Anthropic server (a test double).")
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address only")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    args = parser.parse_args(argv)
    if not is_loopback(args.host):
        parser.error(f"--host {args.host!r} refused: the fake server only listens on loopback")
    server = FakeHTTPServer((args.host, args.port), latency_s=args.latency)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


class FakeServer:
    """Context manager running the fake server in a subprocess on 127.0.0.1."""

    def __init__(self, latency_s: float = 0.0, start_timeout_s: float = 30.0) -> None:
        self.latency_s = latency_s
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.url = self.openai_base = self.anthropic_base = ""

    def start(self) -> FakeServer:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cocoeval.llm.fakeserver", "--port", "0",
             "--latency", repr(float(self.latency_s))],
            stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], self.start_timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"fake server did not start (first line {line!r})")
        self.port = int(line.split()[1])
        self.url = self.anthropic_base = f"http://127.0.0.1:{self.port}"
        self.openai_base = self.url + "/v1"
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, method: str, path: str, payload: dict | None = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict:
        return self._call("GET", "/stats")

    def reset(self) -> None:
        self._call("POST", "/reset", {})

    def configure(self, **settings: Any) -> None:
        self._call("POST", "/config", settings)


if __name__ == "__main__":
    main()
