from __future__ import annotations

import json

import pytest

from cocoeval.core.errors import InputError
from cocoeval.simulate.sft import (
    PAPER_TOTAL,
    DatasetTake,
    export_sft,
    select_training_set,
    sft_examples,
    training_set,
    validate_sft_file,
)

from ..sim_helpers import instance

BASE = instance("d/c/0")


def train_split(spec, chats=0):
    """{dataset: (conversations, instances)} -> train instances, spread over the conversations."""
    out = []
    for ds, (n_conv, n_inst) in spec.items():
        for i in range(n_inst):
            conv = f"{ds}-c{i % n_conv}"
            out.append(
                BASE.model_copy(
                    update={
                        "id": f"{ds}/{conv}/{i}",
                        "dataset": ds,
                        "split": "train",
                        "provenance": BASE.provenance.model_copy(update={"conversation_id": conv}),
                    }
                )
            )
    return out + [instance(f"chat/c{i}/0", chat=True) for i in range(chats)]


SPLIT = {"a": (30, 900), "b": (25, 300), "c": (20, 600), "d": (10, 200), "e": (5, 1000)}


def test_training_set_is_1450_from_the_four_datasets_with_most_train_conversations():
    insts = train_split(SPLIT, chats=3)
    chosen, rep = select_training_set(insts, seed=0)
    assert PAPER_TOTAL == 1450 and len(chosen) == rep.total == 1450 and len({i.id for i in chosen}) == 1450
    # ranked by conversations (e has the most instances but the fewest conversations); chats left out
    assert rep.datasets == ["a", "b", "c", "d"] and rep.left_out == {"e": 1000}
    assert all(i.dataset in "abcd" for i in chosen) and rep.shortfall is None
    avail = sum(SPLIT[d][1] for d in "abcd")
    for d in "abcd":
        taken = sum(i.dataset == d for i in chosen)
        share = 1450 * SPLIT[d][1] / avail  # in proportion to the train instances
        assert rep.per_dataset[d] == DatasetTake(conversations=SPLIT[d][0], available=SPLIT[d][1], taken=taken)
        assert int(share) <= taken <= int(share) + 1
    assert [i.id for i in select_training_set(insts, seed=0)[0]] == [i.id for i in chosen]  # seeded
    assert {i.id for i in select_training_set(insts, seed=1)[0]} != {i.id for i in chosen}
    assert training_set(insts, seed=0)[1] == rep.to_json()  # the JSON form the RQ4 notebook reads


def test_training_set_datasets_given_short_or_unknown():
    insts = train_split(SPLIT)
    chosen, rep = select_training_set(insts, datasets=["e", "d"])
    assert len(chosen) == 1200 and rep.datasets == ["e", "d"] and rep.rule == "given (sft.datasets)"
    assert "only 1200 train instances in e, d, fewer than the 1450" in (rep.shortfall or "")
    assert len(select_training_set(insts, n_datasets=2, total=None)[0]) == 1200  # a and b, all of them
    with pytest.raises(InputError, match="no train instances of dataset\\(s\\) zz") as e:
        select_training_set(insts, datasets=["a", "zz"])
    assert "a, b, c, d, e" in e.value.hint


def test_export_uses_the_same_instances_for_every_k(tmp_path):
    insts = train_split({"a": (5, 12), "b": (4, 9), "c": (3, 6), "d": (2, 3), "e": (1, 30)})
    report = export_sft(insts, tmp_path, ks=(1, 5, 30), total=20)
    assert report.selection.datasets == ["a", "b", "c", "d"] and report.instances == 20
    ids = {}
    for k in ("1", "5", "30"):
        assert report.files[k].examples == 20
        lines = (tmp_path / f"sft_k{k}.jsonl").read_text().splitlines()
        ids[k] = sorted(json.loads(ln)["messages"][1]["content"].split(" of ")[-1].split(" ")[0] for ln in lines)
    assert ids["1"] == ids["5"] == ids["30"] and not any(i.startswith("e/") for i in ids["1"])
    assert json.loads((tmp_path / "sft_report.json").read_text()) == report.to_json()
    assert list(report.to_json()) == ["instances", "selection", "prompt", "seed", "files"]
    assert report.to_json()["selection"]["total"] == 20 and "shortfall" not in report.to_json()["selection"]


def test_example_shapes_for_k_1_5_30(tmp_path):
    insts = [instance(f"d/c{i}/0") for i in range(12)]
    report = export_sft(insts, tmp_path, ks=(1, 5, 30), seed=4)
    for k in (1, 5, 30):
        f = report.files[str(k)]
        assert f.valid and f.examples == 12 and f.tokens > 0
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


@pytest.mark.parametrize(
    "line,needle",
    [
        ('{"prompt": "x"}', "no 'messages'"),
        ('{"messages": [{"role": "robot", "content": "x"}]}', "need a role"),
        ('{"messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": "a"}]}', "non-empty"),
        ('{"messages": [{"role": "user", "content": "q"}]}', "end with the assistant"),
        (
            '{"messages": [{"role": "user", "content": "' + "w " * 400 + '"}, {"role": "assistant", "content": "a"}]}',
            "over the 50-token limit",
        ),
    ],
)
def test_validation_finds_each_problem(tmp_path, line, needle):
    p = tmp_path / "bad.jsonl"
    p.write_text(line + "\n")
    rep = validate_sft_file(p, max_example_tokens=50)
    assert not rep.valid and any(needle in x and "line 1" in x for x in rep.problems), rep.problems


def test_finetune_helper_against_the_fake_server(tmp_path, monkeypatch):
    from cocoeval import ConfigError
    from cocoeval.simulate.sft import finetune_status, start_finetune
    from tests.fakes.server import FakeServer

    export_sft([instance(f"d/c{i}/0") for i in range(3)], tmp_path, ks=(5,))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ft-" + "z" * 20)
    with FakeServer() as srv:
        out = start_finetune(
            tmp_path / "sft_k5.jsonl", "gpt-4.1-2025-04-14", suffix="cocoeval-k5", seed=1, base_url=srv.openai_base
        )
        assert out["job_id"].startswith("ftjob-") and out["file_id"].startswith("file-")
        stats = srv.stats()
        assert stats["files"][out["file_id"]]["purpose"] == "fine-tune"
        # one epoch (A.4), the other hyperparameters left to the provider's defaults
        sent = stats["job_requests"][out["job_id"]]
        assert sent["method"] == {"type": "supervised", "supervised": {"hyperparameters": {"n_epochs": 1}}}
        assert stats["jobs"][out["job_id"]]["hyperparameters"] == {
            "n_epochs": 1,
            "batch_size": "auto",
            "learning_rate_multiplier": "auto",
        }
        assert sent["model"] == "gpt-4.1-2025-04-14" and out["hyperparameters"] == {"n_epochs": 1}
        auto = start_finetune(tmp_path / "sft_k5.jsonl", "gpt-4.1", n_epochs=None, base_url=srv.openai_base)
        assert srv.stats()["jobs"][auto["job_id"]]["hyperparameters"]["n_epochs"] == "auto"
        status = {}
        for _ in range(5):
            status = finetune_status(out["job_id"], base_url=srv.openai_base)
            if status["status"] == "succeeded":
                break
        assert status["status"] == "succeeded"
        assert (
            status["simulator_spec"].startswith("openai/ft:gpt-4.1-2025-04-14:")
            and "cocoeval-k5" in status["simulator_spec"]
        )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n')
    with pytest.raises(ConfigError, match="not a valid fine-tuning file"):
        start_finetune(bad, "gpt-4.1", base_url="http://127.0.0.1:9/v1")


def test_finetune_sends_the_openai_key_only_to_openai_and_maps_errors(tmp_path, monkeypatch):
    from cocoeval import ConfigError
    from cocoeval.core.errors import FatalLLMError
    from cocoeval.simulate.sft import finetune_status, start_finetune
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


def test_sft_export_cli_reads_the_params_sft_section_and_prints_the_datasets(tmp_path, capsys):
    from cocoeval.cli import main
    from cocoeval.core.jsonio import write_jsonl

    bench = tmp_path / "bench"
    write_jsonl(bench / "train.jsonl", train_split({"a": (5, 12), "b": (4, 9), "c": (3, 6), "d": (2, 3), "e": (1, 30)}))
    params = tmp_path / "p.yaml"
    params.write_text("name: p\nbench: bench\nsft: {total: 10, ks: [5], seed: 3}\n")
    assert main(["sft-export", str(params), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "training set: 10 instances from a, b, c, d (the 4 datasets with the most train conversations" in out
    assert "left out: e (30 instances)" in out and "--n-epochs 1" in out
    assert len((tmp_path / "out" / "sft_k5.jsonl").read_text().splitlines()) == 10
    assert not (tmp_path / "out" / "sft_k1.jsonl").exists()
    # options override the params file; a short training set is said, not hidden
    assert main(["sft-export", str(params), "--out", str(tmp_path / "o2"), "--datasets", "e", "--total", "40"]) == 0
    cap = capsys.readouterr()
    assert "30 instances from e (given (sft.datasets)" in cap.out
    assert "warning: only 30 train instances in e, fewer than the 40 asked for" in cap.err
    assert main(["sft-export", str(params), "--out", str(tmp_path / "o3"), "--datasets", "zz"]) == 2
    assert "no train instances of dataset(s) zz" in capsys.readouterr().err


@pytest.mark.parametrize("ks", [[True, 5], [5, False], [0], [-1], [1001], [10**12], ["5"], [5.0], [None], []])
def test_sft_ks_are_strict_whole_numbers_in_range(ks):
    """Issue #24: ``ks: [true, 5]`` is not k=1 and 5; each k is a whole number of turns per call
    from 1 to 1,000 (a setup's ``turns_per_call``), and at least one k is asked for."""
    from pydantic import ValidationError

    from cocoeval.simulate.sft import SFTConfig

    with pytest.raises(ValidationError):
        SFTConfig.model_validate({"ks": ks})
    assert SFTConfig.model_validate({"ks": [1, 5, 1000]}).ks == [1, 5, 1000]


def test_sft_ks_from_a_params_file_refuse_a_bool(tmp_path):
    from cocoeval.run.stages import load_params

    (tmp_path / "bench").mkdir()
    params = tmp_path / "p.yaml"
    params.write_text("name: p\nbench: bench\nsft: {ks: [true, 5]}\n")
    with pytest.raises(InputError, match=r"sft\.ks\.0: Input should be a valid integer"):
        load_params(params)
