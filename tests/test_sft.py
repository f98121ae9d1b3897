from __future__ import annotations

import json

import pytest

from cocoeval.sft import export_sft, sft_examples, validate_sft_file

from .sim_helpers import instance


def test_example_shapes_for_k_1_5_30(tmp_path):
    insts = [instance(f"d/c{i}/0") for i in range(12)]
    report = export_sft(insts, tmp_path, ks=(1, 5, 30), seed=4)
    for k in (1, 5, 30):
        f = report["files"][str(k)]
        assert f["valid"] and f["examples"] == 12 and f["tokens"] > 0
        starts = set()
        for line in (tmp_path / f"sft_k{k}.jsonl").read_text().splitlines():
            msgs = json.loads(line)["messages"]
            assert [m["role"] for m in msgs] == ["system", "user", "assistant"]
            answer = msgs[-1]["content"].splitlines()
            assert len(answer) == k and all(": utterance " in a for a in answer)
            first = int(answer[0].split("utterance ")[1].split(" ")[0]) - 30  # index in r
            starts.add(first)
            # the gold turns before the start stand as "written so far"
            assert ("written so far" in msgs[1]["content"]) == (first > 0)
            assert f"Write the next {k} turn" in msgs[1]["content"]
        if k == 30:
            assert starts == {0}
        else:
            assert len(starts) > 1 and all(0 <= s <= 30 - k for s in starts)  # random, seeded
    assert sft_examples(insts, 5, seed=4) == sft_examples(insts, 5, seed=4)
    assert sft_examples(insts, 5, seed=4) != sft_examples(insts, 5, seed=5)


@pytest.mark.parametrize("line,needle", [
    ('{"prompt": "x"}', "no 'messages'"),
    ('{"messages": [{"role": "robot", "content": "x"}]}', "need a role"),
    ('{"messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": "a"}]}', "non-empty"),
    ('{"messages": [{"role": "user", "content": "q"}]}', "end with the assistant"),
    ('{"messages": [{"role": "user", "content": "' + "w " * 400 + '"}, {"role": "assistant", "content": "a"}]}',
     "over the 50-token limit"),
])
def test_validation_finds_each_problem(tmp_path, line, needle):
    p = tmp_path / "bad.jsonl"
    p.write_text(line + "\n")
    rep = validate_sft_file(p, max_example_tokens=50)
    assert not rep["valid"] and any(needle in x and "line 1" in x for x in rep["problems"]), rep["problems"]


def test_finetune_helper_against_the_fake_server(tmp_path, monkeypatch):
    from cocoeval import ConfigError
    from cocoeval.sft import finetune_status, start_finetune
    from tests.fakes.server import FakeServer

    export_sft([instance(f"d/c{i}/0") for i in range(3)], tmp_path, ks=(5,))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ft-" + "z" * 20)
    with FakeServer() as srv:
        out = start_finetune(tmp_path / "sft_k5.jsonl", "gpt-4.1-2025-04-14", suffix="cocoeval-k5",
                             seed=1, base_url=srv.openai_base)
        assert out["job_id"].startswith("ftjob-") and out["file_id"].startswith("file-")
        stats = srv.stats()
        assert stats["files"][out["file_id"]]["purpose"] == "fine-tune"
        status = {}
        for _ in range(5):
            status = finetune_status(out["job_id"], base_url=srv.openai_base)
            if status["status"] == "succeeded":
                break
        assert status["status"] == "succeeded"
        assert status["simulator_spec"].startswith("openai/ft:gpt-4.1-2025-04-14:") and "cocoeval-k5" in status["simulator_spec"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n')
    with pytest.raises(ConfigError, match="not a valid fine-tuning file"):
        start_finetune(bad, "gpt-4.1", base_url="http://127.0.0.1:9/v1")


def test_finetune_sends_the_openai_key_only_to_openai_and_maps_errors(tmp_path, monkeypatch):
    from cocoeval import ConfigError
    from cocoeval.errors import FatalLLMError
    from cocoeval.sft import finetune_status, start_finetune
    from tests.fakes.server import FakeServer

    export_sft([instance(f"d/c{i}/0") for i in range(3)], tmp_path, ks=(5,))
    key = "sk-ft-" + "k" * 20
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeServer() as srv:
        # without the loopback opt-in the key may not go to a server that is not OpenAI's
        monkeypatch.delenv("COCOEVAL_ALLOW_KEY_TO_LOOPBACK", raising=False)
        with pytest.raises(ConfigError, match="OPENAI_API_KEY is sent only to openai's own hosts"):
            start_finetune(tmp_path / "sft_k5.jsonl", "gpt-4.1", base_url=srv.openai_base)
        with pytest.raises(ConfigError, match="OPENAI_API_KEY is sent only to openai's own hosts"):
            finetune_status("ftjob-1", base_url=srv.openai_base)
        assert srv.stats()["by_path"] == {}
        # a rejected key is a clear, redacted error, not a traceback
        monkeypatch.setenv("COCOEVAL_ALLOW_KEY_TO_LOOPBACK", "1")
        srv.configure(faults=[{"path": "/v1/files", "kind": "echo_key", "status": 401, "times": -1}])
        with pytest.raises(FatalLLMError) as e:
            start_finetune(tmp_path / "sft_k5.jsonl", "gpt-4.1", base_url=srv.openai_base)
        assert "HTTP 401" in str(e.value) and key not in str(e.value) and "OPENAI_API_KEY" in str(e.value)
