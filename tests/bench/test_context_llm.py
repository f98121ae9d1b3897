"""Benchmark inputs as the paper made them (§3.2, A.3, E.1), through the loopback fake server:
the clean-up of QMSum Product and Academic, M from the whole conversation, S before x."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cocoeval import BuildConfig, build, load_instances
from cocoeval.bench.config import LLMContextOptions
from cocoeval.llm import LLMConfig, Runner
from cocoeval.prompts.files import load_prompt
from cocoeval.run import load_params

from ..conftest import ROOT, write_json

SPEAKERS = ("Project Manager", "Marketing", "User Interface")


def meeting(tag: str, n: int = 90) -> dict:
    """A QMSum meeting whose every turn is unique to ``tag``, with fillers and special tokens."""
    return {
        "topic_list": [{"topic": "Budget", "relevant_text_span": [["0", str(n - 1)]]}],
        "meeting_transcripts": [
            {
                "speaker": SPEAKERS[i % 3],
                "content": f"Um {{disfmarker}} {tag} turn {i} uh about the the budget {{vocalsound}} .",
            }
            for i in range(n)
        ],
    }


def cleaned_answer(tag: str, n: int = 90, empty: tuple[int, ...] = ()) -> str:
    return json.dumps(
        {
            "turns": [
                {"speaker": SPEAKERS[i % 3], "text": "" if i in empty else f"{tag} turn {i} about the budget."}
                for i in range(n)
            ]
        }
    )


def chunk_answers(tag: str) -> list[dict]:
    """Scripted clean-up answers for a 90-turn meeting sent 30 turns per call."""
    full = json.loads(cleaned_answer(tag))["turns"]
    return [
        {
            "match": f"[1] {SPEAKERS[a % 3]}: Um {{disfmarker}} {tag} turn {a} ",
            "text": json.dumps({"turns": full[a : a + 30]}),
        }
        for a in (0, 30, 60)
    ]


def _runner(tmp_path, cache=True):
    return Runner(LLMConfig(cache=str(tmp_path / "c.sqlite") if cache else None, progress=False))


def _model(srv):
    return f"openai/o4-mini@{srv.openai_base}"


def _prompts(srv, marker):
    return [p for p in srv.stats()["prompts"] if marker in p]


def test_metadata_sees_every_utterance_of_the_conversation_once_per_conversation(srv, tmp_path):
    for tag in ("P0", "P1", "P2", "P3"):
        write_json(tmp_path / "src" / "product" / f"{tag}.json", meeting(tag))
    meta = {
        "goals": ["Agree the budget"],
        "participants": [{"name": "project manager", "role": "runs the meeting"}, {"name": "Ghost", "role": "x"}],
    }
    srv.configure(
        answers=[
            {"match": "Transcript of the conversation", "text": json.dumps(meta)},
            {"match": "Conversation so far", "text": "They discussed the budget at length."},
        ]
    )
    m = _model(srv)
    report = build(
        [f"qmsum:{tmp_path / 'src'}"],
        tmp_path / "b",
        BuildConfig(per_dataset=1),
        llm_context=LLMContextOptions(metadata=m, summary=m),
        runner=_runner(tmp_path),
    )
    insts = load_instances(tmp_path / "b", None)
    assert len(insts) == 4
    asked = _prompts(srv, "Transcript of the conversation")
    assert (
        len(asked)
        == 4
        == report["llm_context"]["eval"]["metadata"]["calls"] + report["llm_context"]["train"]["metadata"]["calls"]
    )
    for inst in insts:
        tag = inst.provenance.conversation_id
        [prompt] = [p for p in asked if f"{tag} turn 0 " in p]
        # the whole conversation, past the reference too, with every utterance
        assert all(f"{tag} turn {i} " in prompt for i in range(90)) and "(90 turns)" in prompt
        assert inst.metadata.method == "llm" and inst.metadata.model == m
        assert inst.metadata.prompt == load_prompt("metadata").ref
        roles = {p.name: p.role for p in inst.metadata.participants}
        assert roles["Project Manager"] == "runs the meeting"  # matched to the real speaker name
        assert "Ghost" not in roles and {"Marketing", "User Interface"} <= set(roles)  # none lost
        assert inst.summary.method == "llm" and inst.summary.text == "They discussed the budget at length."
        assert inst.provenance.text_method == "rule"  # no clean-up asked
    # S sees the turns before x, and only those
    inst = insts[0]
    tag, start = inst.provenance.conversation_id, inst.provenance.start_index
    [s] = [p for p in _prompts(srv, "Conversation so far") if f"{tag} turn 0 " in p and f"{tag} turn {start - 1} " in p]
    assert f"{tag} turn {start} " not in s
    assert report["context"]["metadata"] == f"llm ({m})"


def test_clean_up_rewrites_product_and_academic_only_and_keeps_the_raw_text(srv, tmp_path):
    src = tmp_path / "qmsum" / "data"
    write_json(src / "Product" / "train" / "PA.json", meeting("PA"))
    write_json(src / "Academic" / "val" / "AC.json", meeting("AC"))
    write_json(src / "Committee" / "test" / "CO.json", meeting("CO"))
    write_json(src / "ALL" / "train" / "PA.json", meeting("PA"))
    chats = [
        {
            "id": "long",
            "messages": [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"CH msg {i} um"} for i in range(70)
            ],
        }
    ]
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(c) for c in chats), encoding="utf-8")
    srv.configure(
        answers=[
            {"match": "PA turn 0 ", "text": cleaned_answer("PA", empty=(5,))},
            {"match": "AC turn 0 ", "text": cleaned_answer("AC", empty=(7,))},
        ]
    )
    m = _model(srv)
    report = build(
        [f"qmsum:{src}", f"chat:{tmp_path / 'chat.jsonl'}#sharechat"],
        tmp_path / "b",
        BuildConfig(per_dataset=1),
        llm_context=LLMContextOptions(clean=m, clean_turns_per_call=100),
        runner=_runner(tmp_path),
    )
    by_ds = {i.dataset: i for i in load_instances(tmp_path / "b", None)}
    assert set(by_ds) == {"qmsum_product", "qmsum_academic", "qmsum_committee", "sharechat"}
    asked = _prompts(srv, "turns to clean")
    assert len(asked) == 2 and not any("CO turn" in p or "CH msg" in p for p in asked)
    assert all("{disfmarker}" in p for p in asked)  # the model sees the source text, special tokens too
    for ds, tag in (("qmsum_product", "PA"), ("qmsum_academic", "AC")):
        inst = by_ds[ds]
        p = inst.provenance
        assert (p.text_method, p.text_model, p.text_prompt) == ("llm", m, load_prompt("clean").ref)
        for t in inst.history + inst.reference:
            n = int(t.text.split()[2])
            assert t.text == f"{tag} turn {n} about the budget."
            assert t.raw_text == f"Um {{disfmarker}} {tag} turn {n} uh about the the budget {{vocalsound}} ."
    for ds in ("qmsum_committee", "sharechat"):
        assert by_ds[ds].provenance.text_method == "rule"
    assert by_ds["qmsum_committee"].history[0].text.startswith("Um CO turn")  # the rule-based text
    assert by_ds["sharechat"].history[0].text.endswith(" um")
    c = report["llm_context"]["clean"]
    assert (c["conversations_cleaned"], c["turns_emptied"], c["failed"]) == (2, 2, [])
    assert "llm clean-up" in report["context"]["turns"] and report["context"]["metadata"].startswith("extractive")


def test_a_failed_clean_up_leaves_the_conversation_out_with_the_reason(srv, tmp_path):
    src = tmp_path / "src"
    write_json(src / "product" / "PA.json", meeting("PA"))
    write_json(src / "academic" / "AC.json", meeting("AC"))
    write_json(src / "committee" / "CO.json", meeting("CO"))
    srv.configure(
        answers=[{"match": "PA turn 0 ", "text": cleaned_answer("PA", n=89)}],
        faults=[{"match": "AC turn 0 ", "kind": "context_length", "times": -1}],
    )
    m = _model(srv)
    report = build(
        [f"qmsum:{src}"],
        tmp_path / "b",
        BuildConfig(per_dataset=1),
        llm_context=LLMContextOptions(clean=m, clean_turns_per_call=100),
        runner=_runner(tmp_path),
    )
    assert {i.dataset for i in load_instances(tmp_path / "b", None)} == {"qmsum_committee"}  # never uncleaned
    reasons = {s["conversation"]: s["reason"] for s in report["skipped_conversations"]}
    assert reasons["PA"] == "LLM clean-up failed on turns 0-89: turn count changed (89 for 90)"
    assert reasons["AC"].startswith("LLM clean-up failed on turns 0-89: call failed: context_length")
    assert report["datasets"].keys() == {"qmsum_committee"}
    # a failed call is not cached: a rebuild sends it again; an unusable answer is (the same again)
    srv.reset()
    srv.configure(
        answers=[
            {"match": "PA turn 0 ", "text": cleaned_answer("PA")},
            {"match": "AC turn 0 ", "text": cleaned_answer("AC")},
        ]
    )
    report = build(
        [f"qmsum:{src}"],
        tmp_path / "b2",
        BuildConfig(per_dataset=1),
        llm_context=LLMContextOptions(clean=m, clean_turns_per_call=100),
        runner=_runner(tmp_path),
    )
    assert report["llm_context"]["clean"]["conversations_cleaned"] == 1
    assert [f["conversation"] for f in report["llm_context"]["clean"]["failed"]] == ["PA"]
    assert {i.dataset for i in load_instances(tmp_path / "b2", None)} == {"qmsum_committee", "qmsum_academic"}


def test_clean_up_in_chunks_keeps_turn_order(srv, tmp_path):
    write_json(tmp_path / "src" / "product" / "PA.json", meeting("PA"))
    srv.configure(answers=chunk_answers("PA"))
    report = build(
        [f"qmsum:{tmp_path / 'src'}"],
        tmp_path / "b",
        BuildConfig(per_dataset=1),
        llm_context=LLMContextOptions(clean=_model(srv), clean_turns_per_call=30),
        runner=_runner(tmp_path),
    )
    assert report["llm_context"]["clean"]["calls"] == 3
    inst = load_instances(tmp_path / "b")[0]
    s = inst.provenance.start_index
    assert [t.text for t in inst.history] == [f"PA turn {i} about the budget." for i in range(s, s + 30)]


@pytest.mark.parametrize("on_failure", ["skip", "extractive"])
def test_unusable_m_or_s_is_never_silently_replaced(srv, tmp_path, on_failure):
    write_json(tmp_path / "src" / "product" / "PA.json", meeting("PA"))
    srv.configure(
        answers=[{"match": "Transcript of the conversation", "text": "not json at all"}],
        faults=[{"match": "Conversation so far", "kind": "context_length", "times": -1}],
    )
    m = _model(srv)
    report = build(
        [f"qmsum:{tmp_path / 'src'}"],
        tmp_path / "b",
        BuildConfig(per_dataset=1),
        llm_context=LLMContextOptions(metadata=m, summary=m, on_failure=on_failure),
        runner=_runner(tmp_path),
    )
    ev = report["llm_context"]["eval"]
    assert ev["metadata"]["failed"][0]["reason"] == "JSON without goals/participants lists"
    insts = load_instances(tmp_path / "b")
    if on_failure == "skip":
        assert insts == [] and ev["skipped_instances"] == [ev["metadata"]["failed"][0]["instance"]]
        assert "eval_shortfall" in report["datasets"]["qmsum_product"]
        assert report["totals"]["eval_instances"] == 0
    else:
        [inst] = insts
        assert inst.metadata.method == "extractive" and inst.summary.method == "extractive"
        assert ev["summary"]["failed"][0]["reason"] == "call failed: context_length"
        assert ev["kept_extractive"] == {inst.id: ["metadata", "summary"]}


def test_paper_params_build_the_inputs_as_the_paper_did():
    exp = load_params(ROOT / "params" / "paper.yaml")
    b = exp.params.build
    assert b is not None and exp.params.bench is None
    ctx = b.context
    assert (ctx.metadata, ctx.summary, ctx.clean) == ("openai/o4-mini-2025-04-16",) * 3  # C.1
    assert ctx.clean_datasets == ["qmsum_product", "qmsum_academic"] and ctx.on_failure == "skip"
    assert "qmsum:../data/qmsum/data" in b.sources and not any("ALL" in s for s in b.sources)
    assert {"tcr:../data/tcr/SIM.json#sim", "tcr:../data/tcr/NCPC.json#ncpc"} <= set(b.sources)
    o = b.options
    assert (o.history_turns, o.reference_turns, o.per_dataset) == (30, 30, 50)
    assert (o.chat.min_turns, o.chat.conversations) == (61, 25)
    assert exp.build_models() == {"openai/o4-mini-2025-04-16"}
    # the dated snapshot is priced as o4-mini (a dated snapshot matches its name in prices.yaml)
    from cocoeval.llm.usage import PriceTable

    prices = PriceTable.load()
    assert prices.price_for("openai/o4-mini-2025-04-16") == prices.price_for("openai/o4-mini") is not None


def test_build_batch_sends_the_context_calls_through_the_batch_api(srv, tmp_path):
    write_json(tmp_path / "src" / "product" / "PA.json", meeting("PA"))
    meta = {"goals": ["Agree the budget"], "participants": [{"name": "Marketing", "role": "sells"}]}
    srv.configure(
        answers=[
            {"match": "Transcript of the conversation", "text": json.dumps(meta)},
            {"match": "Conversation so far", "text": "They discussed the budget."},
            *chunk_answers("PA"),
        ]
    )
    m = _model(srv)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cocoeval",
            "build",
            "--source",
            f"qmsum:{tmp_path / 'src'}",
            "--out",
            str(tmp_path / "b"),
            "--per-dataset",
            "1",
            "--metadata",
            m,
            "--summary",
            m,
            "--clean",
            m,
            "--batch",
            "--batch-poll",
            "0.01",
            "--llm-cache",
            str(tmp_path / "c.sqlite"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    inst = load_instances(tmp_path / "b")[0]
    assert inst.metadata.method == "llm" and inst.summary.text == "They discussed the budget."
    assert inst.provenance.text_method == "llm"
    stats = srv.stats()
    assert stats["batches"] and "/v1/chat/completions" not in stats["by_path"]  # nothing live
    assert "submitted batch" in out.stderr
    assert "inputs: metadata: llm" in out.stdout and "clean-up by" in out.stdout
    shown = subprocess.run(
        [sys.executable, "-m", "cocoeval", "show", str(tmp_path / "b"), inst.id],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "turns: llm clean-up by" in shown.stdout and "Metadata (llm" in shown.stdout
    assert "Summary (llm" in shown.stdout


def test_the_simulated_user_gets_the_vanilla_prompt_with_m(srv, tmp_path):
    """D.1: the user turns are simulated "with the same vanilla prompting setup" (M, S, x), one
    user turn per call."""
    from cocoeval.simulate.engine import simulate
    from cocoeval.simulate.setup import Setup

    from ..sim_helpers import instance

    srv.configure(answers=[{"match": "Write the user's next message", "text": "and shorter?"}])
    inst = instance("sharechat/c1/0", n_hist=6, n_ref=1, chat=True)
    setup = Setup(name="users", model=f"openai/gpt-4.1@{srv.openai_base}", kind="human_ai")
    [c] = simulate([inst], [setup], _runner(tmp_path, cache=False))["users"]
    assert c.status == "ok" and c.turns[0].text == "and shorter?"
    system = srv.stats()["bodies_last"]["messages"][0]["content"]
    assert "# Conversation metadata" in system and "Decide the budget" in system and "user (member)" in system
    assert "Earlier they talked." in system and "utterance 5 of sharechat/c1/0" in system
