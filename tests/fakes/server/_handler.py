"""The HTTP side: routes requests to the model answers, files, fine-tuning and batches."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

from . import _batches, _msgbatches
from ._answers import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Reply,
    answer,
    fault_reply,
    oai_error,
    prompt_of,
    request_id_header,
    request_key,
)
from ._batches import BATCHES_PATH
from ._msgbatches import MSG_BATCHES_PATH
from ._state import State, form, json_object

FILES_PATH = "/v1/files"
JOBS_PATH = "/v1/fine_tuning/jobs"
AZURE_ROUTE = re.compile(r"/openai/deployments/[^/]+/chat/completions")


def _under(path: str, *roots: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in roots)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cocoeval-fakeserver/1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms stalls
    server: FakeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes | dict, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = dict(headers or {})
        try:
            self.send_response(status)
            self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
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
        elif path.startswith((FILES_PATH + "/", JOBS_PATH + "/")) or _under(path, BATCHES_PATH, MSG_BATCHES_PATH):
            self._api(path, b"")
        else:
            self._no_route()

    def do_DELETE(self) -> None:
        path = self._path()
        if path.startswith((FILES_PATH + "/", MSG_BATCHES_PATH + "/")):
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
        if path in (FILES_PATH, JOBS_PATH) or _under(path, BATCHES_PATH, MSG_BATCHES_PATH):
            return self._api(path, raw)
        if AZURE_ROUTE.fullmatch(path):
            path = OPENAI_PATH  # Azure OpenAI's route for the same wire format
        if path not in (OPENAI_PATH, ANTHROPIC_PATH):
            return self._no_route()
        body = json_object(raw)
        prompt = prompt_of(body)
        n, latency, fault, scripted = state.arrive(
            path, prompt, body if body is not None else raw.decode("utf-8", "replace")
        )
        errs = fault is not None and fault.get("kind") not in ("content_filter", "slow", "timeout", "usage")
        cache, store = ((0, 0), None) if errs else state.prompt_cache(path, body)
        try:
            if latency > 0:
                time.sleep(latency)
            if body is not None and fault and self._transport(fault):
                return None
            if store is not None:
                store()  # processed: its prefix is in the cache from now on
            self._send(
                *answer(
                    path,
                    body,
                    prompt,
                    n,
                    fault,
                    scripted,
                    request_key(self.headers),
                    cache,
                    int(state.settings.get("reasoning_tokens") or 0),
                )
            )
        finally:
            state.leave()

    def _transport(self, fault: dict) -> bool:
        """Act out a drop (True: nothing more to send) or a slow / timeout delay."""
        kind = fault.get("kind")
        if kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return True
        if kind in ("slow", "timeout"):
            time.sleep(float(fault.get("delay_s", 30 if kind == "timeout" else 1)))
        return False

    def _api(self, path: str, raw: bytes) -> None:
        """The endpoints that are not model calls: path faults apply, matched on the path."""
        state = self.server.state
        n, fault = state.arrive_api(path)
        if fault:
            if self._transport(fault):
                return None
            reply = fault_reply(path, fault, n, request_key(self.headers))[1]
            if reply is not None:
                return self._send(*reply)
        status, body, headers = self._route(path, raw, n)
        self._send(status, body, {**request_id_header(path, n), **headers})

    def _route(self, path: str, raw: bytes, n: int) -> Reply:
        state, method = self.server.state, self.command
        query = dict(parse_qsl(self.path.partition("?")[2]))
        if _under(path, MSG_BATCHES_PATH):
            host = self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"
            return _msgbatches.route(state, method, path, raw, n, query, host)
        if _under(path, BATCHES_PATH):
            return _batches.route(state, method, path, raw, n, query)
        if path == FILES_PATH:
            fields = form(self.headers.get("Content-Type") or "", raw)
            if "purpose" not in fields or "file" not in fields:
                return 400, oai_error("expected multipart/form-data with the fields purpose and file", param="file"), {}
            (name, data), purpose = fields["file"], fields["purpose"][1].decode("utf-8", "replace")
            return 200, state.add_file(n, name or "upload", purpose, data), {}
        if path == JOBS_PATH:
            body = json_object(raw)
            job = state.create_job(n, body) if body and isinstance(body.get("model"), str) else "model"
            if isinstance(job, str):
                why = "missing or not a string" if job == "model" else "not an uploaded file"
                return 400, oai_error(f"invalid {job}: {why}", param=job), {}
            return 200, job, {}
        found: dict | None = None
        if path.startswith(JOBS_PATH + "/"):
            found = state.advance_job(path[len(JOBS_PATH) + 1 :])
        else:
            file_id, _, rest = path[len(FILES_PATH) + 1 :].partition("/")
            if method == "DELETE":
                if not rest and state.delete_file(file_id):
                    return 200, {"id": file_id, "object": "file", "deleted": True}, {}
            elif entry := state.blobs.get(file_id) if rest in ("", "content") else None:
                if rest:
                    return 200, entry[1], {"Content-Type": "application/octet-stream"}
                found = entry[0]
        if found is None:
            return 404, oai_error(f"No such object: {path}", param="id"), {}
        return 200, found, {}


class FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], latency_s: float = 0.0) -> None:
        self.state = State(latency_s)
        super().__init__(address, Handler)
