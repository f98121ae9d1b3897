"""The fake server's batch endpoints, driven by the real openai and anthropic SDKs."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import anthropic
import openai
import pytest

KEY = "test-key"
CHAT = "/v1/chat/completions"


def oai(srv, **kw) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=srv.openai_base, api_key=KEY, **kw)


def ant(srv, **kw) -> anthropic.Anthropic:
    kw.setdefault("max_retries", 0)
    return anthropic.Anthropic(base_url=srv.anthropic_base, api_key=KEY, **kw)


def chat_body(text: str, **kw) -> dict:
    return {"model": "gpt-fake", "messages": [{"role": "user", "content": text}], **kw}


def line(cid: str, body: dict, **kw) -> dict:
    return {"custom_id": cid, "method": "POST", "url": CHAT, "body": body, **kw}


def upload(client: openai.OpenAI, tmp_path, rows: list, purpose: str = "batch") -> str:
    path = tmp_path / "requests.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    with open(path, "rb") as fh:
        return client.files.create(file=fh, purpose=purpose).id


def submit(client: openai.OpenAI, tmp_path, rows: list, **kw) -> openai.types.Batch:
    return client.batches.create(
        input_file_id=upload(client, tmp_path, rows), endpoint=CHAT, completion_window="24h", **kw
    )


def jsonl(client: openai.OpenAI, file_id: str) -> list[dict]:
    return [json.loads(ln) for ln in client.files.content(file_id).text.splitlines()]


def live_error(srv, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        srv.url + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    return err.value.code, json.loads(err.value.read())


def same_answer(batch: dict, live: dict) -> None:
    for key in (
        ("choices", "usage", "model", "object")
        if "choices" in live
        else ("content", "usage", "model", "stop_reason", "type", "role")
    ):
        assert batch[key] == live[key], key


# --- OpenAI ---------------------------------------------------------------------------------


def test_openai_batch_happy_path_answers_like_live(srv, tmp_path):
    answers = [
        {"match": "weather", "text": "It is sunny.", "times": -1},
        {"match": "long", "text": "y" * 50, "times": -1},
    ]
    srv.configure(answers=answers)
    client = oai(srv)
    bodies = {
        "w": chat_body("the weather?"),
        "l": chat_body("a long one", max_tokens=3),
        "e": chat_body("plain echo"),
        "s": {
            **chat_body("sys"),
            "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}],
        },
    }
    batch = submit(client, tmp_path, [line(c, b) for c, b in bodies.items()], metadata={"run": "7"})
    assert (batch.status, batch.endpoint, batch.completion_window) == ("validating", CHAT, "24h")
    assert batch.id.startswith("batch_") and batch.metadata == {"run": "7"}
    assert batch.output_file_id is None and batch.request_counts.total == 0

    step = client.batches.retrieve(batch.id)
    assert step.status == "in_progress" and step.in_progress_at is not None
    assert (step.request_counts.total, step.request_counts.completed) == (4, 0)
    assert srv.stats()["requests"] == 0  # nothing answered before the batch ends

    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.completed_at is not None
    assert done.request_counts.model_dump() == {"total": 4, "completed": 4, "failed": 0}
    assert done.error_file_id is None and done.metadata == {"run": "7"}
    assert done.model == "gpt-fake"
    out = client.files.retrieve(done.output_file_id)
    assert (out.purpose, out.filename) == ("batch_output", f"{batch.id}_output.jsonl")
    lines = jsonl(client, done.output_file_id)
    assert sorted(x["custom_id"] for x in lines) == sorted(bodies)
    for x in lines:
        assert x["id"].startswith("batch_req_") and x["error"] is None
        assert x["response"]["status_code"] == 200
        assert x["response"]["request_id"].startswith("req_")
    by_id = {x["custom_id"]: x["response"]["body"] for x in lines}
    assert by_id["w"]["choices"][0]["message"]["content"] == "It is sunny."
    assert by_id["l"]["choices"][0]["message"]["content"] == "y" * 12
    assert by_id["l"]["choices"][0]["finish_reason"] == "length"
    assert done.usage.input_tokens == sum(b["usage"]["prompt_tokens"] for b in by_id.values())
    assert done.usage.total_tokens == sum(b["usage"]["total_tokens"] for b in by_id.values())

    stats = srv.stats()
    assert stats["requests"] == 4 and stats["by_path"]["batch:/v1/chat/completions"] == 4
    assert CHAT not in stats["by_path"]
    assert stats["prompts"] == {"the weather?": 1, "a long one": 1, "plain echo": 1, "hi": 1}
    assert stats["batches"] == {
        batch.id: {
            "provider": "openai",
            "status": "completed",
            "requests": 4,
            "custom_ids": list(bodies),
            "fault": None,
        }
    }
    for cid, body in bodies.items():
        live = client.chat.completions.with_raw_response.create(**body).http_response.json()
        same_answer(by_id[cid], live)
    assert client.batches.retrieve(batch.id).status == "completed"  # stays ended


def test_openai_per_request_faults_go_to_the_error_file(srv, tmp_path):
    srv.configure(
        faults=[
            {"match": "huge", "kind": "context_length", "times": -1},
            {"match": "busy", "kind": "429", "times": 1, "retry_after": 2},
            {"match": "filtered", "kind": "content_filter"},
            {"match": "broken", "kind": "malformed"},
            {"match": "dropped", "kind": "drop"},
        ]
    )
    client = oai(srv)
    texts = ["fine", "a huge prompt", "busy now", "filtered out", "broken one", "dropped one"]
    batch = submit(client, tmp_path, [line(f"c{i}", chat_body(t)) for i, t in enumerate(texts)])
    client.batches.retrieve(batch.id)
    done = client.batches.retrieve(batch.id)
    assert done.request_counts.model_dump() == {"total": 6, "completed": 4, "failed": 2}
    errors = {x["custom_id"]: x for x in jsonl(client, done.error_file_id)}
    assert list(errors) == ["c1", "c2"]
    assert errors["c1"]["error"] is None
    assert errors["c1"]["response"]["status_code"] == 400
    assert errors["c1"]["response"]["body"] == live_error(srv, CHAT, chat_body("a huge prompt"))[1]
    assert errors["c1"]["response"]["body"]["error"]["code"] == "context_length_exceeded"
    assert errors["c2"]["response"]["status_code"] == 429
    assert errors["c2"]["response"]["body"]["error"]["code"] == "rate_limit_exceeded"
    out = {x["custom_id"]: x["response"]["body"] for x in jsonl(client, done.output_file_id)}
    assert out["c0"]["choices"][0]["message"]["content"] == "echo: fine"
    assert out["c3"]["choices"][0]["finish_reason"] == "content_filter"
    assert out["c3"]["choices"][0]["message"]["content"] == ""
    assert out["c4"] == '{"id": "x", "choices": ['  # malformed: a truncated JSON string
    assert out["c5"]["choices"][0]["message"]["content"] == "echo: dropped one"


def test_model_faults_hit_batch_requests_but_not_the_batch_endpoints(srv, tmp_path):
    srv.configure(faults=[{"kind": "500", "times": -1}])
    client = oai(srv)
    batch = submit(client, tmp_path, [line("a", chat_body("x")), line("b", chat_body("y"))])
    srv.configure(batch_steps=0)  # taken at creation: this batch still needs two retrieves
    assert client.batches.retrieve(batch.id).status == "in_progress"
    done = client.batches.retrieve(batch.id)
    assert done.output_file_id is None
    lines = jsonl(client, done.error_file_id)
    assert [x["response"]["status_code"] for x in lines] == [500, 500]
    assert lines[0]["response"]["body"]["error"]["type"] == "server_error"


def test_openai_invalid_input_file_fails_with_line_numbers(srv, tmp_path):
    client = oai(srv)
    rows = [
        line("ok", chat_body("a")),
        "{not json",
        line("ok", chat_body("b")),
        line("u", chat_body("c"), url="/v1/embeddings"),
        line("m", chat_body("d"), method="GET"),
        {"custom_id": "nb", "method": "POST", "url": CHAT},
        "",
        line("mm", chat_body("e") | {"model": "other"}),
        {"method": "POST", "url": CHAT},
    ]
    batch = submit(client, tmp_path, rows)
    assert batch.status == "validating"
    failed = client.batches.retrieve(batch.id)
    assert failed.status == "failed" and failed.failed_at is not None
    assert failed.output_file_id is None and failed.error_file_id is None
    assert failed.errors.object == "list"
    got = [(e.code, e.line, e.param) for e in failed.errors.data]
    assert got == [
        ("invalid_json_line", 2, None),
        ("duplicate_custom_id", 3, "custom_id"),
        ("url_mismatch", 4, "url"),
        ("invalid_method", 5, "method"),
        ("missing_required_parameter", 6, "body"),
        ("model_mismatch", 8, "body.model"),
        ("missing_required_parameter", 9, "custom_id"),
    ]
    assert client.batches.retrieve(batch.id).status == "failed"
    assert srv.stats()["requests"] == 0
    empty = submit(client, tmp_path, ["", "  "])
    assert client.batches.retrieve(empty.id).errors.data[0].code == "empty_file"


def test_openai_create_refuses_unknown_files_and_other_purposes(srv, tmp_path):
    client = oai(srv)
    with pytest.raises(openai.BadRequestError) as err:
        client.batches.create(input_file_id="file-nope", endpoint=CHAT, completion_window="24h")
    assert err.value.param == "input_file_id"
    tuned = upload(client, tmp_path, [line("a", chat_body("a"))], purpose="fine-tune")
    with pytest.raises(openai.BadRequestError) as err:
        client.batches.create(input_file_id=tuned, endpoint=CHAT, completion_window="24h")
    assert err.value.param == "input_file_id" and "purpose" in err.value.message
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")
    assert srv.stats()["batches"] == {}


def test_openai_expire_keeps_the_first_requests(srv, tmp_path):
    srv.configure(batch_faults=[{"kind": "expire", "completed": 2, "provider": "openai"}])
    client = oai(srv)
    batch = submit(client, tmp_path, [line(f"r{i}", chat_body(f"q{i}")) for i in range(5)])
    client.batches.retrieve(batch.id)
    done = client.batches.retrieve(batch.id)
    assert done.status == "expired" and done.expired_at is not None and done.completed_at is None
    assert done.request_counts.model_dump() == {"total": 5, "completed": 2, "failed": 3}
    assert [x["custom_id"] for x in jsonl(client, done.output_file_id)] == ["r0", "r1"]
    expired = jsonl(client, done.error_file_id)
    assert [x["custom_id"] for x in expired] == ["r2", "r3", "r4"]
    assert expired[0]["response"] is None
    assert expired[0]["error"] == {
        "code": "batch_expired",
        "message": ("This request could not be executed before the completion window expired."),
    }
    stats = srv.stats()
    assert stats["requests"] == 2 and stats["batches"][batch.id]["fault"] == "expire"
    again = submit(client, tmp_path, [line("x", chat_body("x"))])  # the fault was used up
    client.batches.retrieve(again.id)
    assert client.batches.retrieve(again.id).status == "completed"


def test_openai_fail_fault_and_provider_filter(srv, tmp_path):
    srv.configure(
        batch_faults=[{"kind": "fail", "provider": "anthropic"}, {"kind": "fail", "provider": "openai", "times": 2}]
    )
    client = oai(srv)
    for _ in range(2):
        batch = submit(client, tmp_path, [line("a", chat_body("a"))])
        failed = client.batches.retrieve(batch.id)
        assert failed.status == "failed" and failed.output_file_id is None
        assert [e.code for e in failed.errors.data] == ["token_limit_exceeded"]
        assert failed.errors.data[0].line is None
    batch = submit(client, tmp_path, [line("a", chat_body("a"))])
    assert client.batches.retrieve(batch.id).status == "in_progress"
    assert srv.stats()["requests"] == 0


def test_openai_cancel(srv, tmp_path):
    client = oai(srv)
    batch = submit(client, tmp_path, [line("a", chat_body("a")), line("b", chat_body("b"))])
    client.batches.retrieve(batch.id)
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    done = client.batches.retrieve(batch.id)
    assert done.status == "cancelled" and done.cancelled_at is not None
    assert done.output_file_id is None and done.error_file_id is None
    assert done.request_counts.model_dump() == {"total": 2, "completed": 0, "failed": 0}
    assert srv.stats()["requests"] == 0
    assert srv.stats()["batches"][batch.id]["status"] == "cancelled"
    with pytest.raises(openai.BadRequestError):
        client.batches.cancel(batch.id)


def test_openai_steps_and_list_pagination(srv, tmp_path):
    srv.configure(batch_steps=4)
    client = oai(srv)
    slow = submit(client, tmp_path, [line("a", chat_body("a"))])
    assert [client.batches.retrieve(slow.id).status for _ in range(5)] == [
        "in_progress",
        "in_progress",
        "finalizing",
        "completed",
        "completed",
    ]
    srv.configure(batch_steps=0)
    quick = submit(client, tmp_path, [line("a", chat_body("a"))])
    assert client.batches.retrieve(quick.id).status == "completed"
    third = submit(client, tmp_path, [line("a", chat_body("a"))])
    first = client.batches.list(limit=2)
    assert [b.id for b in first.data] == [third.id, quick.id] and first.has_more is True
    assert [b.id for b in client.batches.list(limit=2)] == [third.id, quick.id, slow.id]
    assert [b.id for b in client.batches.list(after=quick.id)] == [slow.id]
    assert client.files.delete(upload(client, tmp_path, ["{}"])).deleted is True


def test_openai_path_fault_is_recovered_by_sdk_retries(srv, tmp_path):
    client = oai(srv)
    file_id = upload(client, tmp_path, [line("a", chat_body("a"))])
    srv.configure(faults=[{"kind": "500", "path": "/v1/batches", "times": 1}])
    with pytest.raises(openai.InternalServerError):
        client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h")
    srv.configure(faults=[{"kind": "500", "path": "/v1/batches", "times": 1}])
    batch = oai(srv, max_retries=2).batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h")
    assert batch.status == "validating"
    stats = srv.stats()
    assert stats["by_path"]["/v1/batches"] == 3 and list(stats["batches"]) == [batch.id]
    srv.configure(faults=[{"kind": "429", "path": f"/v1/batches/{batch.id}", "times": 1}])
    assert oai(srv, max_retries=1).batches.retrieve(batch.id).status == "in_progress"


# --- Anthropic ------------------------------------------------------------------------------

TOOL = {
    "name": "record",
    "description": "Record a person.",
    "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
}


def params(text: str, **kw) -> dict:
    return {"model": "claude-fake", "max_tokens": 100, "messages": [{"role": "user", "content": text}], **kw}


def results(client: anthropic.Anthropic, batch_id: str) -> dict[str, dict]:
    return {r.custom_id: r.result.model_dump(exclude_unset=True) for r in client.messages.batches.results(batch_id)}


def test_anthropic_batch_happy_path_answers_like_live(srv):
    srv.configure(answers=[{"match": "extract", "text": '{"name": "Ada"}', "times": -1}])
    client = ant(srv)
    reqs = {
        "plain": params("Say something", system="Be brief."),
        "tool": params("please extract", tools=[TOOL], tool_choice={"type": "tool", "name": "record"}),
        "short": params("x" * 50, max_tokens=2),
    }
    batch = client.messages.batches.create(requests=[{"custom_id": c, "params": p} for c, p in reqs.items()])
    assert batch.id.startswith("msgbatch_") and batch.type == "message_batch"
    assert batch.processing_status == "in_progress" and batch.results_url is None
    assert batch.request_counts.processing == 3 and batch.created_at < batch.expires_at
    assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
    assert srv.stats()["requests"] == 0
    ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.ended_at is not None
    assert ended.results_url == f"{srv.url}/v1/messages/batches/{batch.id}/results"
    assert ended.request_counts.model_dump() == {
        "processing": 0,
        "succeeded": 3,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    got = results(client, batch.id)
    assert list(got) == list(reqs) and {r["type"] for r in got.values()} == {"succeeded"}
    msgs = {c: r["message"] for c, r in got.items()}
    assert msgs["plain"]["content"][0]["text"] == "echo: Say something"
    assert msgs["tool"]["content"][0]["input"] == {"name": "Ada"}
    assert msgs["tool"]["stop_reason"] == "tool_use"
    assert msgs["short"]["stop_reason"] == "max_tokens"
    for cid, p in reqs.items():
        live = client.messages.with_raw_response.create(**p).http_response.json()
        assert msgs[cid]["content"][0].get("id", "").startswith("toolu_") == (cid == "tool")
        for block in (*msgs[cid]["content"], *live["content"]):
            block.pop("id", None)
        same_answer(msgs[cid], live)
    stats = srv.stats()
    assert stats["by_path"]["batch:/v1/messages"] == 3 and stats["requests"] == 6
    assert stats["batches"][batch.id] == {
        "provider": "anthropic",
        "status": "ended",
        "requests": 3,
        "custom_ids": list(reqs),
        "fault": None,
    }
    with urllib.request.urlopen(ended.results_url, timeout=10) as resp:
        assert resp.headers["Content-Type"] == "application/x-jsonl"
        assert len(resp.read().splitlines()) == 3


def test_anthropic_errored_and_expired_results(srv):
    srv.configure(
        faults=[{"match": "busy", "kind": "529", "times": -1}, {"match": "broke", "kind": "quota"}],
        batch_faults=[{"kind": "expire", "completed": 3}],
    )
    client = ant(srv)
    texts = ["fine", "busy now", "broke", "later", "never"]
    batch = client.messages.batches.create(
        requests=[{"custom_id": f"r{i}", "params": params(t)} for i, t in enumerate(texts)]
    )
    client.messages.batches.retrieve(batch.id)
    ended = client.messages.batches.retrieve(batch.id)
    assert ended.request_counts.model_dump() == {
        "processing": 0,
        "succeeded": 1,
        "errored": 2,
        "canceled": 0,
        "expired": 2,
    }
    got = results(client, batch.id)
    assert [r["type"] for r in got.values()] == ["succeeded", "errored", "errored", "expired", "expired"]
    assert got["r1"]["error"]["type"] == "error"
    assert got["r1"]["error"]["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    status, live = live_error(srv, "/v1/messages", params("busy now"))
    assert status == 529 and live["error"] == got["r1"]["error"]["error"]
    assert got["r2"]["error"]["error"]["type"] == "invalid_request_error"
    assert "credit balance" in got["r2"]["error"]["error"]["message"]
    assert srv.stats()["prompts"] == {"fine": 1, "busy now": 2, "broke": 1}


def test_anthropic_cancel_and_results_before_the_end(srv):
    srv.configure(batch_steps=3)
    client = ant(srv)
    batch = client.messages.batches.create(
        requests=[{"custom_id": "a", "params": params("a")}, {"custom_id": "b", "params": params("b")}]
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{srv.url}/v1/messages/batches/{batch.id}/results", timeout=10)
    assert err.value.code == 400
    assert json.loads(err.value.read())["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        client.messages.batches.results(batch.id)  # the SDK's own retrieve: step 1 of 3
    canceling = client.messages.batches.cancel(batch.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at
    ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended"
    assert (ended.request_counts.canceled, ended.request_counts.succeeded) == (2, 0)
    assert results(client, batch.id) == {"a": {"type": "canceled"}, "b": {"type": "canceled"}}
    assert srv.stats()["requests"] == 0
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.cancel(batch.id)
    assert client.messages.batches.delete(batch.id).type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(batch.id)


@pytest.mark.parametrize(
    "requests, why",
    [
        ([{"custom_id": "has space", "params": params("a")}], "requests.0.custom_id"),
        ([{"custom_id": "x" * 65, "params": params("a")}], "requests.0.custom_id"),
        (
            [{"custom_id": "a", "params": params("a")}, {"custom_id": "a", "params": params("b")}],
            "Duplicate custom_id 'a'",
        ),
        ([{"custom_id": "a", "params": "nope"}], "requests.0.params"),
        ([], "non-empty list"),
    ],
)
def test_anthropic_create_validation(srv, requests, why):
    with pytest.raises(anthropic.BadRequestError) as err:
        ant(srv).messages.batches.create(requests=requests)
    assert why in err.value.message
    assert err.value.body["error"]["type"] == "invalid_request_error"
    assert srv.stats()["batches"] == {}


def test_anthropic_list_fail_fault_and_path_fault(srv):
    srv.configure(batch_faults=[{"kind": "fail", "provider": "anthropic"}])
    client = ant(srv)
    one = [{"custom_id": "a", "params": params("a")}]
    with pytest.raises(anthropic.InternalServerError) as err:
        client.messages.batches.create(requests=one)
    assert err.value.body["error"]["type"] == "api_error"
    ids = [client.messages.batches.create(requests=one).id for _ in range(3)]
    srv.configure(faults=[{"kind": "529", "path": "/v1/messages/batches", "times": 1}])
    with pytest.raises(anthropic.APIStatusError) as err:
        client.messages.batches.list()
    assert err.value.status_code == 529 and err.value.body["error"]["type"] == "overloaded_error"
    srv.configure(faults=[{"kind": "529", "path": "/v1/messages/batches", "times": 1}])
    page = ant(srv, max_retries=2).messages.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[:0:-1] and page.has_more is True
    assert page.last_id == ids[1]
    assert [b.id for b in client.messages.batches.list(limit=2)] == ids[::-1]
    assert list(srv.stats()["batches"]) == ids
