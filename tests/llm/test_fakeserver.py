from __future__ import annotations

import json
import threading

import anthropic
import openai
import pytest

from tests.fakes.server import FakeServer, main


@pytest.fixture(scope="module")
def server():
    with FakeServer() as srv:
        yield srv


@pytest.fixture
def srv(server):
    server.reset()
    return server


def oai(srv, **kw) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=srv.openai_base, api_key="test", **kw)


def ant(srv, **kw) -> anthropic.Anthropic:
    kw.setdefault("max_retries", 0)
    return anthropic.Anthropic(base_url=srv.anthropic_base, api_key="test", **kw)


def chat(client: openai.OpenAI, text: str, **kw):
    return client.chat.completions.create(model="gpt-fake", messages=[{"role": "user", "content": text}], **kw)


def message(client: anthropic.Anthropic, text: str, **kw):
    kw.setdefault("max_tokens", 100)
    return client.messages.create(model="claude-fake", messages=[{"role": "user", "content": text}], **kw)


def test_openai_normal_answer(srv):
    resp = oai(srv).chat.completions.with_raw_response.create(
        model="gpt-fake",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello there, how are you?"},
        ],
    )
    assert resp.headers["x-request-id"].startswith("req_")
    out = resp.parse()
    assert out.id.startswith("chatcmpl-")
    assert out.model == "gpt-fake"
    assert out.choices[0].message.content == "echo: Hello there, how are you?"
    assert out.choices[0].finish_reason == "stop"
    # 14 + 25 characters -> 10 tokens; 31 characters -> 8 tokens
    assert out.usage.prompt_tokens == 10
    assert out.usage.completion_tokens == 8
    assert out.usage.total_tokens == 18
    assert out.usage.prompt_tokens_details.cached_tokens == 0
    stats = srv.stats()
    assert stats["requests"] == 1
    assert stats["by_path"] == {"/v1/chat/completions": 1}
    assert stats["prompts"] == {"Hello there, how are you?": 1}
    assert stats["bodies_last"]["model"] == "gpt-fake"
    assert stats["in_flight"] == 0


def test_anthropic_normal_answer(srv):
    resp = ant(srv).messages.with_raw_response.create(
        model="claude-fake",
        max_tokens=100,
        system="Be brief.",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Say something"}]}],
    )
    assert resp.headers["request-id"].startswith("req_")
    out = resp.parse()
    assert out.id.startswith("msg_")
    assert out.model == "claude-fake"
    assert out.content[0].type == "text"
    assert out.content[0].text == "echo: Say something"
    assert out.stop_reason == "end_turn"
    assert out.usage.input_tokens == 6  # (9 + 13) / 4
    assert out.usage.output_tokens == 5
    assert out.usage.cache_read_input_tokens == 0
    assert srv.stats()["prompts"] == {"Say something": 1}


def test_scripted_answers_and_max_tokens(srv):
    srv.configure(
        answers=[
            {"match": "weather", "text": "It is sunny.", "times": 1},
            {"match": "weather", "text": "Rain later."},
            {"match": "long", "text": "x" * 100},
        ]
    )
    client = oai(srv)
    assert chat(client, "What is the weather?").choices[0].message.content == "It is sunny."
    assert chat(client, "weather again").choices[0].message.content == "Rain later."
    assert chat(client, "weather again").choices[0].message.content == "Rain later."
    cut = chat(client, "a long one", max_tokens=5)
    assert cut.choices[0].message.content == "x" * 20
    assert cut.choices[0].finish_reason == "length"
    out = message(ant(srv), "long please", max_tokens=3)
    assert out.content[0].text == "x" * 12
    assert out.stop_reason == "max_tokens"
    assert srv.stats()["prompts"]["weather again"] == 2


def test_rate_limit_then_recover(srv):
    srv.configure(faults=[{"kind": "429", "retry_after": 0.05}])
    with pytest.raises(openai.RateLimitError) as err:
        chat(oai(srv), "hi")
    assert err.value.response.headers["retry-after"] == "0.05"
    assert err.value.response.headers["retry-after-ms"] == "50"
    assert err.value.code == "rate_limit_exceeded"

    srv.reset()
    srv.configure(faults=[{"kind": "429", "retry_after": 0.05}])
    out = chat(oai(srv, max_retries=2), "hi")
    assert out.choices[0].message.content == "echo: hi"
    assert srv.stats()["requests"] == 2


def test_anthropic_overloaded(srv):
    srv.configure(faults=[{"kind": "529"}])
    with pytest.raises((anthropic.InternalServerError, anthropic.APIStatusError)) as err:
        message(ant(srv), "hi")
    assert err.value.status_code == 529
    assert err.value.body["error"]["type"] == "overloaded_error"


def test_quota_and_auth_errors(srv):
    srv.configure(faults=[{"kind": "quota"}, {"kind": "401", "match": "key"}])
    with pytest.raises(openai.RateLimitError) as err:
        chat(oai(srv), "hi")
    assert err.value.code == "insufficient_quota"
    with pytest.raises(openai.AuthenticationError):
        chat(oai(srv), "bad key")
    srv.configure(faults=[{"kind": "quota"}])
    with pytest.raises(anthropic.BadRequestError) as aerr:
        message(ant(srv), "hi")
    assert "credit balance" in aerr.value.message


def test_context_length(srv):
    srv.configure(faults=[{"kind": "context_length", "match": "huge"}])
    assert chat(oai(srv), "small").choices[0].message.content == "echo: small"
    with pytest.raises(openai.BadRequestError) as err:
        chat(oai(srv), "a huge prompt")
    assert err.value.code == "context_length_exceeded"
    assert err.value.param == "messages"


def test_content_filter(srv):
    srv.configure(faults=[{"kind": "content_filter", "times": 2}])
    out = chat(oai(srv), "hi")
    assert out.choices[0].finish_reason == "content_filter"
    assert out.choices[0].message.content == ""
    msg = message(ant(srv), "hi")
    assert msg.stop_reason == "refusal"


def test_drop(srv):
    srv.configure(faults=[{"kind": "drop"}])
    with pytest.raises(openai.APIConnectionError):
        chat(oai(srv), "hi")
    assert srv.stats()["requests"] == 1
    assert chat(oai(srv), "hi").choices[0].message.content == "echo: hi"


def test_malformed(srv):
    srv.configure(faults=[{"kind": "malformed"}])
    with pytest.raises(Exception):  # noqa: B017 - any error will do
        chat(oai(srv), "hi")


def test_timeout_fault(srv):
    srv.configure(faults=[{"kind": "timeout", "delay_s": 2}])
    with pytest.raises(openai.APITimeoutError):
        chat(oai(srv, timeout=0.3), "hi")


def test_anthropic_tool_use(srv):
    srv.configure(answers=[{"match": "extract", "text": '{"name": "Ada", "age": 36}'}])
    tool = {
        "name": "record",
        "description": "Record a person.",
        "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    out = message(ant(srv), "please extract", tools=[tool], tool_choice={"type": "tool", "name": "record"})
    assert out.stop_reason == "tool_use"
    block = out.content[0]
    assert block.type == "tool_use"
    assert block.name == "record"
    assert block.id.startswith("toolu_")
    assert block.input == {"name": "Ada", "age": 36}
    out = message(ant(srv), "not json", tools=[tool], tool_choice={"type": "tool", "name": "record"})
    assert out.content[0].input == {}


def test_concurrency():
    with FakeServer(latency_s=0.3) as srv:
        client = oai(srv)
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                chat(client, f"request {i}")
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        stats = srv.stats()
        assert stats["requests"] == 8
        assert stats["max_in_flight"] >= 5
        assert stats["in_flight"] == 0
        assert len(stats["times"]) == 8


def test_refuses_non_loopback_host(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--host", "10.0.0.1", "--port", "0"])
    assert exc.value.code != 0
    assert "loopback" in capsys.readouterr().err


FT_MODEL = "gpt-4.1-2025-04-14"


def upload(client: openai.OpenAI, path) -> openai.types.FileObject:
    with open(path, "rb") as fh:
        return client.files.create(file=fh, purpose="fine-tune")


@pytest.fixture
def train_file(tmp_path):
    path = tmp_path / "train.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}
        for i in range(3)
    ]
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\r\n" for r in rows) + b"\n")
    return path


def test_fine_tuning_flow(srv, train_file):
    client = oai(srv)
    f = upload(client, train_file)
    assert f.id.startswith("file-")
    assert (f.object, f.purpose, f.status) == ("file", "fine-tune", "processed")
    assert f.filename == "train.jsonl"
    assert f.bytes == train_file.stat().st_size
    assert client.files.retrieve(f.id) == f
    assert client.files.content(f.id).read() == train_file.read_bytes()

    job = client.fine_tuning.jobs.create(training_file=f.id, model=FT_MODEL, suffix="cocoeval", seed=3)
    assert job.id.startswith("ftjob-")
    assert (job.object, job.status, job.model, job.seed) == ("fine_tuning.job", "validating_files", FT_MODEL, 3)
    assert job.training_file == f.id
    assert job.fine_tuned_model is None and job.finished_at is None and job.error is None
    assert job.hyperparameters.n_epochs == "auto"

    statuses = [client.fine_tuning.jobs.retrieve(job.id) for _ in range(3)]
    assert [j.status for j in statuses] == ["running", "succeeded", "succeeded"]
    done = statuses[-1]
    assert done.fine_tuned_model == f"ft:{FT_MODEL}:fake-org:cocoeval:{job.id.split('-', 1)[1]}"
    assert done.trained_tokens == 300
    assert done.finished_at is not None and done.error is None

    stats = srv.stats()
    assert stats["requests"] == 0  # model calls only
    assert stats["files"] == {f.id: {"filename": "train.jsonl", "purpose": "fine-tune", "bytes": f.bytes}}
    assert stats["jobs"][job.id]["status"] == "succeeded"
    assert stats["by_path"]["/v1/files"] == 1
    assert stats["by_path"]["/v1/fine_tuning/jobs"] == 1
    assert stats["by_path"][f"/v1/fine_tuning/jobs/{job.id}"] == 3
    assert stats["by_path"][f"/v1/files/{f.id}/content"] == 1


def test_fine_tuning_default_suffix_and_binary_round_trip(srv, tmp_path):
    client = oai(srv)
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) + b"\r\n--not-a-boundary\r\n")
    f = upload(client, path)
    assert client.files.content(f.id).read() == path.read_bytes()
    good = tmp_path / "one.jsonl"
    good.write_text('{"messages": []}')
    job = client.fine_tuning.jobs.create(training_file=upload(client, good).id, model="m")
    assert job.seed == 0
    for _ in range(2):
        out = client.fine_tuning.jobs.retrieve(job.id)
    assert out.fine_tuned_model == f"ft:m:fake-org:custom:{job.id.split('-', 1)[1]}"
    assert out.trained_tokens == 100


def test_fine_tuning_unknown_ids(srv, train_file):
    client = oai(srv)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve("file-nope")
    with pytest.raises(openai.NotFoundError):
        client.files.content("file-nope")
    with pytest.raises(openai.NotFoundError):
        client.fine_tuning.jobs.retrieve("ftjob-nope")
    with pytest.raises(openai.BadRequestError) as err:
        client.fine_tuning.jobs.create(training_file="file-nope", model=FT_MODEL)
    assert err.value.param == "training_file"
    assert srv.stats()["jobs"] == {}


def test_fine_tuning_invalid_file_fails(srv, tmp_path):
    client = oai(srv)
    path = tmp_path / "bad.jsonl"
    path.write_text('{"messages": []}\n{"prompt": "old format"}\n')
    job = client.fine_tuning.jobs.create(training_file=upload(client, path).id, model=FT_MODEL)
    assert job.status == "validating_files"
    out = client.fine_tuning.jobs.retrieve(job.id)
    assert out.status == "failed"
    assert out.error.code == "invalid_file"
    assert out.error.param == "training_file"
    assert "Line 2" in out.error.message
    assert out.fine_tuned_model is None
    assert client.fine_tuning.jobs.retrieve(job.id).status == "failed"


def test_fine_tuning_path_fault_recovered_by_retries(srv, train_file):
    srv.configure(faults=[{"kind": "500", "path": "/v1/fine_tuning", "times": 1}])
    f = upload(oai(srv), train_file)  # a path fault leaves other endpoints alone
    assert chat(oai(srv), "hi").choices[0].message.content == "echo: hi"  # and model calls
    with pytest.raises(openai.InternalServerError):
        oai(srv).fine_tuning.jobs.create(training_file=f.id, model=FT_MODEL)

    srv.configure(faults=[{"kind": "500", "path": "/v1/fine_tuning", "times": 1}])
    job = oai(srv, max_retries=2).fine_tuning.jobs.create(training_file=f.id, model=FT_MODEL)
    assert job.status == "validating_files"
    stats = srv.stats()
    assert stats["by_path"]["/v1/fine_tuning/jobs"] == 3
    assert len(stats["jobs"]) == 1
    assert stats["requests"] == 1


def test_model_faults_leave_file_endpoints_alone(srv, train_file):
    srv.configure(faults=[{"kind": "500", "times": -1}])
    f = upload(oai(srv), train_file)
    assert oai(srv).files.retrieve(f.id).id == f.id
    with pytest.raises(openai.InternalServerError):
        chat(oai(srv), "hi")


def test_scripted_answers_can_require_a_context_anywhere_in_the_request(srv):
    srv.configure(
        answers=[
            {"match": "next turn", "context": "meeting A", "text": "from A", "times": 1},
            {"match": "next turn", "context": "meeting B", "text": "from B"},
        ]
    )
    client = oai(srv)

    def ask(system: str) -> str:
        return (
            client.chat.completions.create(
                model="gpt-fake",
                messages=[{"role": "system", "content": system}, {"role": "user", "content": "Write the next turn."}],
            )
            .choices[0]
            .message.content
        )

    assert ask("History of meeting B") == "from B"
    assert ask("History of meeting A") == "from A"
    assert ask("History of meeting A") == "echo: Write the next turn."  # A's answer is used up
    out = ant(srv).messages.create(
        model="claude-fake",
        max_tokens=50,
        system="History of meeting B",
        messages=[{"role": "user", "content": "Write the next turn."}],
    )
    assert out.content[0].text == "from B"  # Anthropic's system prompt is part of the request too
