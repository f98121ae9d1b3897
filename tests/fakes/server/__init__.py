"""A fake LLM provider: a test double for tests and benchmarks.

It speaks the real wire formats, so the official ``openai`` and ``anthropic`` SDKs talk
to it through ``base_url``; nothing leaves the machine and no API key is needed.

Endpoints
  POST /v1/chat/completions  OpenAI chat completions (non-streaming; also Azure's
                             /openai/deployments/{name}/chat/completions)
  POST /v1/messages          Anthropic Messages (text, or ``tool_use`` when ``tool_choice``
                             names a tool: the answer text parsed as a JSON object)
  POST /v1/files             OpenAI file upload (multipart: purpose, file; kept in memory)
  GET  /v1/files/{id}[/content]   the File object / the raw bytes
  DELETE /v1/files/{id}      {"id", "object": "file", "deleted": true}
  POST /v1/fine_tuning/jobs       create a job (400 when training_file was not uploaded)
  GET  /v1/fine_tuning/jobs/{id}  the job, a step on per retrieve: validating_files -> running
                             -> succeeded (fine_tuned_model ft:<model>:fake-org:<suffix or
                             custom>:<n>, trained_tokens lines * 100); failed (invalid_file)
                             instead when a line is not JSON with a "messages" list
  POST /v1/batches           OpenAI batch: {input_file_id (purpose "batch"), endpoint
                             "/v1/chat/completions", completion_window "24h", metadata?} ->
                             status "validating"; 400 (param input_file_id / endpoint /
                             completion_window / metadata) otherwise
  GET  /v1/batches[/{id}]    the list (newest first; after, limit) / the batch a step on
  POST /v1/batches/{id}/cancel    "cancelling", then "cancelled" at the next retrieve (no
                             request answered, no files); 400 once it has ended
  POST /v1/messages/batches  Anthropic batch: {requests: [{custom_id, params}]} -> "in_progress"
  GET  /v1/messages/batches[/{id}]  the list (newest first; after_id, before_id, limit) / the
                             batch a step on
  GET  /v1/messages/batches/{id}/results   JSONL (application/x-jsonl), once ended (else 400)
  POST /v1/messages/batches/{id}/cancel    "canceling", then "ended" at the next retrieve with
                             every request canceled; 400 once it has ended
  DELETE /v1/messages/batches/{id}  {"id", "type": "message_batch_deleted"}; 400 unless ended
  GET  /stats                counters: requests (model calls, batch requests included), by_path
                             (all API calls; batch requests as "batch:/v1/chat/completions" and
                             "batch:/v1/messages"), in_flight, max_in_flight, prompts (last
                             message text -> count), times, bodies_last, bodies (the last 500
                             request bodies); files (id -> filename,
                             purpose, bytes; batch result files too), jobs (their
                             hyperparameters and method as the request gave them), job_requests
                             (job id -> the create request's body); batches (id ->
                             provider, status, requests, custom_ids, fault)
  POST /reset                clear stats, files, jobs, batches and the script (faults, answers,
                             batch settings; latency back to the start value)
  POST /config               merge settings: {"latency_s": float, "cache_ttl_s": float,
                             "reasoning_tokens": int, "faults": [...],
                             "answers": [{"match": str, "text": str, "times": int,
                                          "context": str}],
                             "batch_steps": int, "batch_faults": [...]}

The answer is the first scripted answer with times left whose ``match`` is a substring of the
last message's text (and whose ``context``, if given, of the whole request's text: system
prompt and every message), else ``"echo: " + text[:40]``; it is cut to ``max_tokens * 4``
characters (finish "length" / "max_tokens"). Tokens are characters / 4, rounded up.
Prompt caching is billed the providers' way (``llm/promptcache.py``): OpenAI reports as
``prompt_tokens_details.cached_tokens`` the longest prefix shared with a recent request of the
same model, schema and ``prompt_cache_key``, from 1,024 tokens in 128-token steps; Anthropic
reports ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` at its ``cache_control``
breakpoints (400 for more than 4), ``input_tokens`` being the rest. A request's prefix enters the
cache when it has been answered (after ``latency_s``) and leaves it ``cache_ttl_s`` (300) after
its last use; batch requests are not cached. Reasoning models (o1.., gpt-5) add the setting
``reasoning_tokens`` (default 0) to their output, reported as
``completion_tokens_details.reasoning_tokens``.
Latency (``latency_s``) applies to live model calls only.

Faults, ``{"match": str, "kind": K, "times": int (default 1, -1 = forever),
"retry_after": float, "delay_s": float, "status": int, "path": str}``, first match with times left wins.
A fault without ``path`` applies to model calls only (live, and each request of a batch,
whose path is its endpoint's); one with ``path`` applies to requests whose path starts with
it (``{"kind": "500", "path": "/v1/batches"}``; "/v1/messages" covers /v1/messages/batches
too), and for the file, fine-tuning and batch endpoints ``match`` is tested against the
request path. Errors are in the path's provider format (Anthropic's for
/v1/messages...). Kinds:
  429             rate limit (``retry-after`` header when retry_after is given)
  quota           OpenAI 429 insufficient_quota; Anthropic 400 credit balance too low
  500, 529        server error / overloaded
  401, 403, 404   authentication / permission / not found errors
  context_length  400 prompt too long (OpenAI code context_length_exceeded)
  echo_key        an error (status ``status``, default 400) whose message repeats the
                  request's key (Authorization: Bearer, x-api-key or api-key header), as some
                  providers and proxies do ("(none)" inside a batch)
  content_filter  200 with finish_reason "content_filter" / stop_reason "refusal", no text
                  (model calls only)
  slow            sleep delay_s, then answer normally
  timeout         sleep delay_s (default 30), then answer (clients give up first)
  drop            close the connection without any response
  malformed       200 with a truncated JSON body
  usage           answer normally but without a usage object (``"usage": null`` or absent),
                  or with the fault's ``usage`` counts over the real ones (a count null: left out)

Batches. Every retrieve moves a batch a step on; the ``batch_steps``-th retrieve (the first
when batch_steps is 0 or 1; default 2; taken when the batch is created) ends it. OpenAI:
validating -> in_progress (... finalizing on the step before the last, from 3 steps) ->
completed; the input file is checked at the first retrieve, and any bad line fails the batch
(status "failed", ``errors.data`` [{code, message, param, line}], codes empty_file,
too_many_tasks (over 50,000 lines), invalid_json_line, missing_required_parameter
(custom_id / body), duplicate_custom_id, invalid_method, url_mismatch, invalid_body,
model_mismatch; blank lines are skipped but keep their numbers). Anthropic: in_progress -> ended;
create answers 400 invalid_request_error when requests is not a non-empty list, has over
100,000 entries, a custom_id not matching ^[a-zA-Z0-9_-]{1,64}$, a duplicate custom_id, or
params that are not an object. When a batch ends its requests are answered in order, like
live calls (scripted answers, faults matched on the last message, token counts, /stats)
but without latency. OpenAI lines (output file purpose "batch_output", named
``{batch}_output.jsonl`` / ``{batch}_error.jsonl``; a file id is null when it would be empty):
  {"id": "batch_req_<n>", "custom_id", "response": {"status_code": 200, "request_id":
  "req_<n>", "body": <chat completion>}, "error": null}        (output file)
  the same with the error status and the live error body        (error file: fault kinds
  429, quota, 500, 529, 401, 403, 404, context_length)
  {"id", "custom_id", "response": null, "error": {"code": "batch_expired", "message"}}
                                                                (error file: expired)
content_filter answers as live; slow, timeout and drop answer normally; malformed writes an
output line whose ``body`` is the string '{"id": "x", "choices": ['. request_counts: total,
completed (status 200), failed (error file lines); usage sums the completed lines' tokens.
Anthropic results (one line per request, in request order):
  {"custom_id", "result": {"type": "succeeded", "message": <message>}}
  {"custom_id", "result": {"type": "errored", "error": {"type": "error", "error": {"type",
  "message"}, "request_id"}}}       (the live error body)
  {"custom_id", "result": {"type": "expired"}} / {"type": "canceled"}
and malformed answers normally. ``results_url`` is ``http://<Host header>/v1/messages/
batches/{id}/results`` once ended, else null.

Batch faults, ``{"kind": "expire" | "fail", "completed": int, "times": int (default 1, -1 =
forever), "provider": "openai" | "anthropic" (optional: both)}``, are drawn in order by
batches as they are created (first with times left wins). expire: the batch ends as
"expired" (expired_at set) / "ended" with only its first ``completed`` (default 0) requests
answered, the rest expired. fail: OpenAI status "failed" at the first retrieve (errors
[{code "token_limit_exceeded", line null}], no files); Anthropic: the create call answers
500 api_error instead (the draw uses one of its times).

Run it alone with ``python -m tests.fakes.server --port 0`` (prints ``PORT <n>``),
or from Python with ``with FakeServer() as srv: ...`` (a subprocess, so the server does
not compete for the client's GIL).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import select
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from ._answers import ANTHROPIC_PATH, FAULT_KINDS, MALFORMED_BODY, OPENAI_PATH, answer, content_text
from ._handler import FakeHTTPServer, Handler
from ._state import State

__all__ = [
    "ANTHROPIC_PATH",
    "FAULT_KINDS",
    "MALFORMED_BODY",
    "OPENAI_PATH",
    "FakeHTTPServer",
    "FakeServer",
    "Handler",
    "State",
    "answer",
    "content_text",
    "is_loopback",
    "main",
]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.server", description="Fake OpenAI/Anthropic server (a test double)."
    )
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
        root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.server", "--port", "0", "--latency", repr(float(self.latency_s))],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
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
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict:
        return self._call("GET", "/stats")

    def reset(self) -> None:
        self._call("POST", "/reset", {})

    def configure(self, **settings: Any) -> None:
        self._call("POST", "/config", settings)
