"""The providers' batch APIs, as mixins: OpenAI Batch (also Azure) and Anthropic Message Batches.

Both follow ``Provider``'s batch protocol: ``batch_stage`` (OpenAI uploads the JSONL input
file; Anthropic needs nothing sent yet), ``batch_start`` (creates the batch, never retried by the
SDK: a retry after a lost answer would create a second, paid batch), ``batch_find`` (the batch an
earlier ``batch_start`` of the same staged requests created, if any), ``batch_get``,
``batch_results`` and ``batch_cancel``. A batch the provider does not know (404) is a
``CallError("batch_not_found")``, not a fatal error: the project or workspace of the key may have
changed, or the batch may have been deleted.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from ..base import BatchInfo, CallError, GenerateRequest, GenerateResponse
from ..secrets import redact
from ._errors import ANTHROPIC_ERROR_STATUS, classify_error, sdk_call
from ._keys import key_name

Items = list[tuple[str, GenerateRequest]]


class OpenAIBatches:
    """The Batch API: JSONL upload, ``batches.create``, polling, output and error files."""

    batch: ClassVar[bool] = True
    batch_limits: ClassVar[tuple[int, int] | None] = (50_000, 200 * 1024 * 1024)
    batch_url = "/v1/chat/completions"
    batch_wait_for_file = False
    """Wait until an uploaded file is processed before creating the batch (Azure)."""

    if TYPE_CHECKING:  # the provider's own parser of a response body, live or in a batch

        def parse(self, body: Any, latency: float | None) -> GenerateResponse: ...

    BATCH_ENDED = ("completed", "expired", "cancelled", "failed")

    async def _bsdk(self, call: Any) -> Any:
        import openai

        return await sdk_call(self, call, openai.APIError, not_found="batch_not_found")

    async def batch_stage(self, items: Items) -> str:
        lines = [
            json.dumps(
                {"custom_id": key, "method": "POST", "url": self.batch_url, "body": self.kwargs(req)},  # type: ignore[attr-defined]
                ensure_ascii=False,
            )
            for key, req in items
        ]
        data = ("\n".join(lines) + "\n").encode()
        f = await self._bsdk(
            self._client().files.create(  # type: ignore[attr-defined]
                file=("cocoeval-batch.jsonl", data, "application/jsonl"), purpose="batch"
            )
        )
        return f"upload:{f.id}"

    async def batch_start(self, ref: str, items: Items) -> str:
        file_id = ref.removeprefix("upload:")
        client = self._client()  # type: ignore[attr-defined]
        if self.batch_wait_for_file:
            await self._bsdk(client.files.wait_for_processing(file_id, poll_interval=1.0))
        b = await self._bsdk(
            client.with_options(max_retries=0).batches.create(
                input_file_id=file_id,
                endpoint=self.batch_url,
                completion_window="24h",
                metadata={"cocoeval_input_file": file_id},
            )
        )
        return b.id

    async def batch_find(self, ref: str, *, since: float, requests: int, exclude: set[str]) -> str | None:
        file_id = ref.removeprefix("upload:")

        async def find() -> str | None:
            async for b in self._client().batches.list(limit=100):  # type: ignore[attr-defined]
                if b.input_file_id == file_id:
                    return b.id
                if b.created_at < since - 3600:  # newest first: older ones cannot be it
                    return None
            return None

        return await self._bsdk(find())

    async def batch_get(self, batch_id: str) -> BatchInfo:
        b = await self._bsdk(self._client().batches.retrieve(batch_id))  # type: ignore[attr-defined]
        rc = b.request_counts
        error = None
        if b.status == "failed":
            errs = (b.errors.data if b.errors and b.errors.data else None) or []
            error = "; ".join(f"line {e.line}: {e.message}" if e.line else str(e.message) for e in errs[:5])
            error = redact(error) or "the provider gave no reason"
        return BatchInfo(
            id=b.id,
            status=b.status,
            ended=b.status in self.BATCH_ENDED,
            error=error,
            done=(rc.completed + rc.failed) if rc else 0,
            total=rc.total if rc else 0,
        )

    async def batch_cancel(self, batch_id: str) -> str:
        return (await self._bsdk(self._client().batches.cancel(batch_id))).status  # type: ignore[attr-defined]

    async def batch_results(self, batch_id: str) -> dict[str, GenerateResponse | Exception]:
        client = self._client()  # type: ignore[attr-defined]
        b = await self._bsdk(client.batches.retrieve(batch_id))
        out: dict[str, GenerateResponse | Exception] = {}
        for file_id in (b.output_file_id, b.error_file_id):
            if file_id:
                content = await self._bsdk(client.files.content(file_id))
                for line in content.text.splitlines():
                    if line.strip():
                        key, result = self._batch_line(line)
                        if key is not None:  # a line naming no request answers none of ours
                            out[key] = result
        return out

    def _batch_line(self, line: str) -> tuple[str | None, GenerateResponse | Exception]:
        try:
            rec = json.loads(line)
            key = rec["custom_id"]
            resp, err = rec.get("response") or {}, rec.get("error") or {}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None, CallError("malformed_response", "unreadable batch line")
        if resp.get("status_code") == 200:
            try:
                return key, self.parse(resp.get("body"), None)
            except CallError as e:
                return key, e
        if err:
            code = str(err.get("code") or "error")
            return key, CallError(code if code.startswith("batch_") else f"batch_{code}", str(err.get("message") or ""))
        body = resp.get("body")
        msg = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else str(body)
        return key, classify_error(
            resp.get("status_code"),
            body,
            str(msg),
            provider=self.name,  # type: ignore[attr-defined]
            model=self.spec.model,  # type: ignore[attr-defined]
            key_env=key_name(self),
        )


class AnthropicBatches:
    """Message Batches: the requests inline in ``messages.batches.create``; results as JSONL."""

    batch: ClassVar[bool] = True
    batch_limits: ClassVar[tuple[int, int] | None] = (100_000, 256 * 1024 * 1024)

    if TYPE_CHECKING:  # the provider's own parser of a response body, live or in a batch

        def parse(self, body: Any, latency: float | None) -> GenerateResponse: ...

    async def _bsdk(self, call: Any) -> Any:
        import anthropic

        return await sdk_call(self, call, anthropic.APIError, not_found="batch_not_found")

    async def batch_stage(self, items: Items) -> str:
        return f"pending:{uuid.uuid4().hex}"  # nothing to send before the batch itself

    async def batch_start(self, ref: str, items: Items) -> str:
        requests = [{"custom_id": key, "params": self.kwargs(req)} for key, req in items]  # type: ignore[attr-defined]
        client = self._client().with_options(max_retries=0)  # type: ignore[attr-defined]
        return (await self._bsdk(client.messages.batches.create(requests=requests))).id

    async def batch_find(self, ref: str, *, since: float, requests: int, exclude: set[str]) -> str | None:
        """A batch created from ``since`` (less a minute of clock skew) with this many requests and
        not already known: the only trace a lost create leaves. Should another batch of the same
        size be created in that window, its answers carry other custom ids: they are not taken,
        and this run's requests then fail as unanswered and are sent again by the next run."""

        async def find() -> str | None:
            found = []
            async for b in self._client().messages.batches.list(limit=100):  # type: ignore[attr-defined]
                created = b.created_at.timestamp()
                if created < since - 60:
                    break
                rc = b.request_counts
                total = rc.processing + rc.succeeded + rc.errored + rc.canceled + rc.expired
                if total == requests and b.id not in exclude:
                    found.append(b.id)
            return found[-1] if found else None  # the oldest match: the first attempt's

        return await self._bsdk(find())

    async def batch_get(self, batch_id: str) -> BatchInfo:
        b = await self._bsdk(self._client().messages.batches.retrieve(batch_id))  # type: ignore[attr-defined]
        rc = b.request_counts
        done = rc.succeeded + rc.errored + rc.canceled + rc.expired
        return BatchInfo(
            id=b.id,
            status=b.processing_status,
            ended=b.processing_status == "ended",
            done=done,
            total=done + rc.processing,
        )

    async def batch_cancel(self, batch_id: str) -> str:
        b = await self._bsdk(self._client().messages.batches.cancel(batch_id))  # type: ignore[attr-defined]
        return b.processing_status

    async def batch_results(self, batch_id: str) -> dict[str, GenerateResponse | Exception]:
        async def collect() -> dict[str, GenerateResponse | Exception]:
            out: dict[str, GenerateResponse | Exception] = {}
            async for item in await self._client().messages.batches.results(batch_id):  # type: ignore[attr-defined]
                out[item.custom_id] = self._batch_result(item.result.model_dump(mode="json"))
            return out

        return await self._bsdk(collect())

    def _batch_result(self, result: dict[str, Any]) -> GenerateResponse | Exception:
        kind = result.get("type")
        if kind == "succeeded":
            try:
                return self.parse(result.get("message"), None)
            except CallError as e:
                return e
        if kind == "errored":
            body = result.get("error") or {}
            err = body.get("error") or {}
            return classify_error(
                ANTHROPIC_ERROR_STATUS.get(str(err.get("type")), 400),
                body,
                str(err.get("message") or ""),
                provider=self.name,  # type: ignore[attr-defined]
                model=self.spec.model,  # type: ignore[attr-defined]
                key_env=key_name(self),
            )
        return CallError(f"batch_{kind}", f"the batch ended with this request {kind}")
