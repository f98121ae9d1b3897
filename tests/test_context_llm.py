"""cocoeval build --metadata/--summary/--clean through the fake provider server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cocoeval import BuildConfig, build, load_instances
from cocoeval.context_llm import LLMContextOptions
from cocoeval.llm import LLMConfig, Runner
from cocoeval.llm.fakeserver import FakeServer

from .conftest import qmsum_meeting, write_json


@pytest.fixture
def srv(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ctx-" + "y" * 20)
    with FakeServer() as s:
        yield s


def _src(tmp_path):
    for i in range(2):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(90))
    return [f"qmsum:{tmp_path / 'src'}"]


def test_llm_metadata_and_summary(srv, tmp_path):
    meta = {"goals": ["Agree the budget"], "participants": [
        {"name": "project manager", "role": "runs the meeting"}, {"name": "Ghost", "role": "x"}]}
    srv.configure(answers=[{"match": "Transcript excerpt", "text": json.dumps(meta)},
                           {"match": "Conversation so far", "text": "They discussed the budget at length."}])
    model = f"openai/gpt-4.1@{srv.openai_base}"
    runner = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    report = build(_src(tmp_path), tmp_path / "b", BuildConfig(per_dataset=1),
                   llm_context=LLMContextOptions(metadata=model, summary=model), runner=runner)
    inst = load_instances(tmp_path / "b")[0]
    assert inst.metadata.method == "llm" and inst.metadata.model == model
    assert inst.metadata.goals == ["Agree the budget"]
    roles = {p.name: p.role for p in inst.metadata.participants}
    assert roles["Project Manager"] == "runs the meeting"  # matched to the real speaker name
    assert "Ghost" not in roles and {"Marketing", "User Interface"} <= set(roles)  # none lost
    assert inst.summary.method == "llm" and inst.summary.text == "They discussed the budget at length."
    assert report["llm_context"]["eval"]["metadata"]["ok"] == 1
    body = next(b for b in [srv.stats()["bodies_last"]])
    assert body["model"] == "gpt-4.1"


def test_unusable_answers_keep_the_extractive_context_and_say_why(srv, tmp_path):
    srv.configure(answers=[{"match": "Transcript excerpt", "text": "not json at all"}],
                  faults=[{"match": "Conversation so far", "kind": "context_length", "times": -1}])
    model = f"openai/gpt-4.1@{srv.openai_base}"
    report = build(_src(tmp_path), tmp_path / "b", BuildConfig(per_dataset=1),
                   llm_context=LLMContextOptions(metadata=model, summary=model),
                   runner=Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)))
    inst = load_instances(tmp_path / "b")[0]
    assert inst.metadata.method == "extractive" and inst.summary.method == "extractive"
    ev = report["llm_context"]["eval"]
    assert ev["metadata"]["failed"][0]["reason"] == "JSON without goals/participants lists"
    assert ev["summary"]["failed"][0]["reason"] == "context_length"


def test_clean_keeps_turn_count_and_speakers(srv, tmp_path):
    src = _src(tmp_path)
    plain = build(src, tmp_path / "plain", BuildConfig(per_dataset=1))
    assert plain["totals"]["eval_instances"] == 1
    inst = load_instances(tmp_path / "plain")[0]
    turns = [*inst.history, *inst.reference]
    good = {"turns": [{"speaker": t.speaker, "text": t.text.replace("Turn", "Cleaned turn")} for t in turns]}
    srv.configure(answers=[{"match": "", "text": json.dumps(good)}])
    model = f"openai/gpt-4.1@{srv.openai_base}"
    build(src, tmp_path / "b", BuildConfig(per_dataset=1), llm_context=LLMContextOptions(clean=model),
          runner=Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)))
    cleaned = load_instances(tmp_path / "b")[0]
    assert all(t.text.startswith("Cleaned turn") and t.raw_text for t in cleaned.history + cleaned.reference)
    srv.configure(answers=[{"match": "", "text": json.dumps({"turns": good["turns"][:-1]})}])
    rep = build(src, tmp_path / "c", BuildConfig(per_dataset=1, seed=0), llm_context=LLMContextOptions(clean=model),
                runner=Runner(LLMConfig(cache=None, progress=False)))
    assert "turn count changed" in rep["llm_context"]["eval"]["clean"]["failed"][0]["reason"]
    assert load_instances(tmp_path / "c")[0].history == inst.history


def test_build_batch_sends_metadata_and_summaries_through_the_batch_api(srv, tmp_path):
    meta = {"goals": ["Agree the budget"], "participants": [{"name": "Marketing", "role": "sells"}]}
    srv.configure(answers=[{"match": "Transcript excerpt", "text": json.dumps(meta)},
                           {"match": "Conversation so far", "text": "They discussed the budget."}])
    model = f"openai/gpt-4.1@{srv.openai_base}"
    out = subprocess.run([sys.executable, "-m", "cocoeval", "build", "--source", *_src(tmp_path), "--out", str(tmp_path / "b"),
                          "--per-dataset", "1", "--metadata", model, "--summary", model, "--batch",
                          "--batch-poll", "0.01", "--llm-cache", str(tmp_path / "c.sqlite")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    inst = load_instances(tmp_path / "b")[0]
    assert inst.metadata.method == "llm" and inst.summary.text == "They discussed the budget."
    stats = srv.stats()
    assert stats["batches"] and "/v1/chat/completions" not in stats["by_path"]  # nothing live
    assert "submitted batch" in out.stderr
