"""Judging through the fake provider server (scripted and malformed answers) and ids."""

from __future__ import annotations

import json

from cocoeval.core.schema import Continuation
from cocoeval.core.targets import behaviour_counts
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import JudgeConfig
from cocoeval.judge.engine import judge
from cocoeval.llm import LLMConfig, Runner

from ..sim_helpers import instance

TAX = load_taxonomy()


def fine_answer(n, labels=None):
    labels = labels or {}
    return json.dumps(
        {
            "turns": [
                {"turn": i, "behaviours": [{"behaviour": b, "evidence": "because"} for b in labels.get(i, [])]}
                for i in range(1, n + 1)
            ]
        }
    )


OVERALL = json.dumps({"consistency": 6, "collaborativeness": 4, "rationale": "drifts"})


def setup_run(n=4):
    inst = instance("d/c/0", n_hist=4, n_ref=n)
    cont = Continuation(instance_id=inst.id, setup_id="abc", setup_name="sim", turns=inst.reference[::-1])
    bad = Continuation(instance_id=inst.id, setup_id="bad", setup_name="broken", status="invalid", reason="x")
    return [inst], {"sim": [cont], "broken": [bad]}


def run(tmp_path, judges, n=4):
    insts, conts = setup_run(n)
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    return judge(insts, conts, judges, r)


def jc(srv, **kw):
    return JudgeConfig(name="j", model=f"openai/gpt-4.1@{srv.openai_base}", **kw)


def test_reference_and_continuations_judged_with_the_same_judge(srv, tmp_path):
    srv.configure(
        answers=[
            {"match": "Continuation to annotate", "text": fine_answer(4, {2: ["Repetition"], 4: ["Off-topic"]})},
            {"match": "Continuation to evaluate", "text": OVERALL},
        ]
    )
    [js] = run(tmp_path, [jc(srv)]).values()
    assert sorted((j.target_name, j.kind) for j in js) == [
        ("reference", "fine_grained"),
        ("reference", "overall"),
        ("sim", "fine_grained"),
        ("sim", "overall"),
    ]
    fine = next(j for j in js if j.kind == "fine_grained" and j.target_name == "sim")
    assert fine.status == "repaired" and "'Off-topic' read as 'Off topic'" in fine.repairs[0]
    assert [lb.behaviours for lb in fine.labels] == [[], ["repetition"], [], ["off_topic"]]
    assert fine.labels[1].evidence == {"repetition": "because"}
    counts = behaviour_counts(fine, TAX)
    assert counts["repetition"] == 1 and counts["off_topic"] == 1 and sum(counts.values()) == 2
    ov = next(j for j in js if j.kind == "overall" and j.target_name == "reference")
    assert (ov.consistency, ov.collaborativeness, ov.status) == (6, 4, "ok")
    assert fine.target == "abc" and ov.target == "reference" and fine.taxonomy_hash == TAX.hash
    assert srv.stats()["requests"] == 4  # the invalid continuation is not judged
    hashes = {j.instance_hash for j in js}  # the instance the judge saw, for the stale rule
    assert len(hashes) == 1 and None not in hashes


def test_malformed_then_reasked(srv, tmp_path):
    srv.configure(
        answers=[
            {"match": "could not be used", "text": fine_answer(4)},
            {"match": "Continuation to annotate", "text": '{"turns": [{"turn": 1, "behaviours": []}]}'},
        ]
    )
    [js] = run(tmp_path, [jc(srv, kind=["fine_grained"])]).values()
    assert all(j.status == "ok" and j.attempts == 2 and len(j.calls) == 2 for j in js)
    body = srv.stats()["bodies_last"]
    assert "turns missing from the answer: 2, 3, 4" in body["messages"][-1]["content"]


def test_always_malformed_is_invalid_with_reason_and_raw_never_zero(srv, tmp_path):
    srv.configure(answers=[{"match": "", "text": "The turns look fine to me."}])
    [js] = run(tmp_path, [jc(srv, kind=["fine_grained"], max_attempts=3)]).values()
    for j in js:
        assert j.status == "invalid" and j.reason == "no JSON object in the answer"
        assert j.raw == "The turns look fine to me." and j.attempts == 3 and j.labels == []
        assert behaviour_counts(j, TAX) is None
    assert srv.stats()["requests"] == 6


def padded(text, n):
    """The answer text padded with trailing spaces to n characters (the fake server cuts an
    answer at max_tokens * 4 characters)."""
    assert len(text) < n
    return text + " " * (n - len(text))


def test_cut_off_answer_is_asked_again_with_twice_the_budget_and_counts(srv, tmp_path):
    # budget 200 + 10 * 4 = 240 tokens = 960 characters: the answer (1,200) is cut off once
    srv.configure(answers=[{"match": "", "text": padded(fine_answer(4, {3: ["Repetition"]}), 1200)}])
    judge_ = JudgeConfig(
        name="j", model=f"openai/o4-mini@{srv.openai_base}", kind=["fine_grained"], max_tokens_per_turn=10
    )
    [js] = run(tmp_path, [judge_]).values()
    assert len(js) == 2 and srv.stats()["requests"] == 4
    for j in js:
        assert (j.status, j.attempts, j.max_tokens) == ("ok", 2, 480)
        assert [(c.max_tokens, c.finish_reason) for c in j.calls] == [(240, "length"), (480, "stop")]
        assert behaviour_counts(j, TAX)["repetition"] == 1
    # a reasoning model's budget is max_completion_tokens; the re-ask is the same question
    body = srv.stats()["bodies_last"]
    assert body["max_completion_tokens"] == 480 and len(body["messages"]) == 2


def test_cut_off_at_the_cap_is_invalid_with_the_budget_never_dropped(srv, tmp_path):
    srv.configure(answers=[{"match": "", "text": padded(fine_answer(4), 4000)}])
    [js] = run(tmp_path, [jc(srv, kind=["fine_grained"], max_tokens_per_turn=10, max_tokens_cap=600)]).values()
    assert len(js) == 2  # both targets keep a judgment: invalid, with the reason
    for j in js:
        assert (j.status, j.reason, j.attempts) == ("invalid", "truncated at 600 tokens", 3)
        assert [c.max_tokens for c in j.calls] == [240, 480, 600] and j.max_tokens == 600
        assert j.raw and behaviour_counts(j, TAX) is None
    assert srv.stats()["requests"] == 6


def test_cut_off_overall_answer_of_claude_is_asked_again(srv, tmp_path):
    srv.configure(answers=[{"match": "", "text": padded(OVERALL, 70)}])  # 10 tokens = 40 characters
    judge_ = JudgeConfig(
        name="j",
        model=f"anthropic/claude-opus-4-20250514@{srv.anthropic_base}",
        kind=["overall"],
        max_tokens_overall=10,
    )
    [js] = run(tmp_path, [judge_]).values()
    for j in js:
        assert (j.status, j.consistency, j.attempts, j.max_tokens) == ("ok", 6, 2, 20)
        assert [(c.max_tokens, c.finish_reason) for c in j.calls] == [(10, "max_tokens"), (20, "tool_use")]


def test_failed_calls_are_invalid_at_once(srv, tmp_path):
    srv.configure(faults=[{"match": "", "kind": "context_length", "times": -1}])
    [js] = run(tmp_path, [jc(srv, kind=["overall"])]).values()
    assert all(j.status == "invalid" and j.reason == "call failed: context_length" and j.attempts == 1 for j in js)


def test_only_user_turns_are_judged_in_chats(srv, tmp_path):
    inst = instance("chat/c/0", n_hist=4, n_ref=6, chat=True)
    srv.configure(answers=[{"match": "", "text": fine_answer(3, {3: ["Unclear intent"]})}])
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    [js] = judge([inst], {}, [jc(srv, kind=["fine_grained"])], r).values()
    [j] = js
    users = [i for i, t in enumerate(inst.reference) if t.speaker == "user"]
    assert j.judged_turns == users and [lb.turn for lb in j.labels] == users
    assert j.labels[2].behaviours == ["unclear_intent"]
    prompt = srv.stats()["bodies_last"]["messages"][1]["content"]
    assert "(assistant, context only)" in prompt and "[3] user:" in prompt


def test_judge_ids_change_with_anything_that_changes_the_output():
    base = JudgeConfig(name="a", model="openai/o4-mini")
    i = base.judge_id("fine_grained", TAX)
    assert i == JudgeConfig(name="renamed", model="openai/o4-mini").judge_id("fine_grained", TAX)
    assert i != base.judge_id("overall", TAX)
    assert i != JudgeConfig(name="a", model="openai/gpt-5.1").judge_id("fine_grained", TAX)
    assert i != JudgeConfig(name="a", model="openai/o4-mini", reasoning_effort="high").judge_id("fine_grained", TAX)
    other = TAX.model_copy(update={"behaviours": TAX.behaviours[:5]})
    assert i != base.judge_id("fine_grained", other)


def test_fine_schema_fixes_the_turn_count_and_caps_behaviours():
    from cocoeval.judge.config import fine_schema

    s = fine_schema(TAX, 6, 2)
    turns = s["properties"]["turns"]
    assert turns["minItems"] == turns["maxItems"] == 6
    beh = turns["items"]["properties"]["behaviours"]
    assert beh["maxItems"] == 2 and beh["items"]["properties"]["behaviour"]["enum"] == [b.name for b in TAX.behaviours]
    assert fine_schema(TAX)["properties"]["turns"].get("minItems") is None
    a = JudgeConfig(name="a", model="local/smollm2")
    assert a.judge_id("fine_grained", TAX) != JudgeConfig(
        name="a", model="local/smollm2", max_behaviours_per_turn=2
    ).judge_id("fine_grained", TAX)


def test_overall_rubric_keeps_every_element_of_the_papers_definitions():
    """Section 3: consistency includes coherence with previous utterances, adherence to the
    persona, correctness with respect to world knowledge and the avoidance of unnecessary
    redundancy and repetition; collaborativeness is support for shared objectives without
    delaying or impeding progress and agreement."""
    from cocoeval.prompts.files import load_prompt

    system = " ".join(load_prompt("judge_overall").system.split())
    consistency = system[system.index("Consistency:") : system.index("Collaborativeness:")]
    collab = system[system.index("Collaborativeness:") :]
    for words in (
        "coherence with the previous utterances",
        "persona",
        "world knowledge",
        "unnecessary redundancy and repetition",
    ):
        assert words in consistency, words
    for words in (
        "support the shared objectives",
        "help the other participants achieve their goals",
        "without delaying or impeding progress and agreement",
    ):
        assert words in collab, words


PAPER_SETUPS = (
    {f"{m}-{p}-{k}" for m in ("gpt41", "gpt51") for p in ("vanilla", "taxonomy") for k in (1, 5, 30)}
    | {f"opus4-{p}-{k}" for p in ("vanilla", "taxonomy") for k in (1, 5)}
    | {"gpt41-user-sim"}
)
SFT_SETUPS = {"gpt41-sft-1", "gpt41-sft-5", "gpt41-sft-30", "gpt41-sft-copy-pp-1"}


def test_paper_params_setups_and_judges_are_the_papers(tmp_path):
    """params/paper.yaml: the paper's setups and its judge run as they are; the SFT setups (they
    need fine-tuned ids) and the alternative judges of B.2 are ready to uncomment."""
    import re

    from cocoeval import build
    from cocoeval.run import load_params
    from cocoeval.run.estimate import forecast
    from cocoeval.simulate.sft import SFTConfig
    from cocoeval.sources.demo import write_demo_data

    from ..conftest import ROOT

    text = (ROOT / "params" / "paper.yaml").read_text()
    paper = load_params(ROOT / "params" / "paper.yaml")
    assert {s.name for s in paper.params.setups} == PAPER_SETUPS
    assert [(j.name, j.model, j.reasoning_effort) for j in paper.params.judges] == [
        ("o4-mini", "openai/o4-mini-2025-04-16", "medium")
    ]
    assert paper.params.sft == SFTConfig() and SFTConfig().total == 1450 and SFTConfig().n_epochs == 1
    paths = write_demo_data(tmp_path / "demo")
    build([f"{k}:{p}" for k, p in paths.items()], tmp_path / "bench")
    paper.params = paper.params.model_copy(update={"bench": str(tmp_path / "bench")})
    rows = forecast(paper, paper.prepare_instances(write=False))
    assert {r.name for r in rows} == PAPER_SETUPS | {"o4-mini:overall", "o4-mini:fine_grained"}

    # uncomment the paper's commented lines (not those marked "not in the paper" or "beyond the paper")
    ready = (
        re.sub(r"(?m)^  # (- \{name: (?!gpt41-copy-pp-1\b|gpt41-agents-|mine\b))", r"  \1", text)
        .replace("ORG", "org")
        .replace(":ID", ":x1")
    )
    (tmp_path / "paper.yaml").write_text(ready)
    full = load_params(tmp_path / "paper.yaml").params
    setups = {s.name: s for s in full.setups}
    assert set(setups) == PAPER_SETUPS | SFT_SETUPS
    pp, sft1 = setups["gpt41-sft-copy-pp-1"], setups["gpt41-sft-1"]
    assert (pp.model, pp.prompt, pp.presence_penalty, pp.n_copy, pp.turns_per_call) == (
        sft1.model,
        "copy_then_continue",
        2.0,
        5,
        1,
    )
    assert sft1.model.startswith("openai/ft:gpt-4.1-2025-04-14:")
    assert {k: setups[f"gpt41-sft-{k}"].turns_per_call for k in (1, 5, 30)} == {1: 1, 5: 5, 30: 30}
    assert {j.name: (j.model, j.reasoning_effort, set(j.kind)) for j in full.judges} == {
        "o4-mini": ("openai/o4-mini-2025-04-16", "medium", {"overall", "fine_grained"}),
        "gpt51-instant": ("openai/gpt-5.1-chat-latest", None, {"overall", "fine_grained"}),
        "gpt51-high": ("openai/gpt-5.1-2025-11-13", "high", {"overall", "fine_grained"}),
        "opus4": ("anthropic/claude-opus-4-20250514", None, {"overall", "fine_grained"}),
    }
    assert all(j.max_tokens_cap >= 2 * j.max_tokens_overall for j in full.judges)


def test_a_judge_capped_per_dataset_judges_what_a_capped_setup_simulated(srv, tmp_path):
    from cocoeval.simulate.setup import Setup

    insts = [instance(f"{ds}/c{i}/0", n_hist=4, n_ref=2) for ds in ("a", "b") for i in range(3)]
    for i in insts:
        i.dataset = i.id.split("/")[0]
    capped = Setup(name="s", model="openai/m", turns_per_call=2, max_per_dataset=1)
    assert [i.id for i in capped.select(insts)] == ["a/c0/0", "b/c0/0"]
    assert capped.setup_id(TAX) == Setup(name="s", model="openai/m", turns_per_call=2).setup_id(TAX)
    only_b = Setup(name="s", model="openai/m", turns_per_call=2, datasets=["b"], max_per_dataset=2)
    assert [i.id for i in only_b.select(insts)] == ["b/c0/0", "b/c1/0"]

    srv.configure(answers=[{"match": "Continuation to evaluate", "text": OVERALL}])
    conts = {
        "s": [
            Continuation(instance_id=i.id, setup_id="x", setup_name="s", turns=i.reference)
            for i in capped.select(insts)
        ]
    }
    judge_cfg = jc(srv, kind=["overall"], max_per_dataset=1)
    assert judge_cfg.judge_id("overall", TAX) == jc(srv, kind=["overall"]).judge_id("overall", TAX)
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    [js] = judge(insts, conts, [judge_cfg], r).values()
    assert sorted((j.instance_id, j.target_name) for j in js) == [
        ("a/c0/0", "reference"),
        ("a/c0/0", "s"),
        ("b/c0/0", "reference"),
        ("b/c0/0", "s"),
    ]
    r2 = Runner(LLMConfig(cache=str(tmp_path / "c2.sqlite"), progress=False))
    [js] = judge(insts, conts, [jc(srv, kind=["overall"], datasets=["b"])], r2).values()
    assert sorted((j.instance_id, j.target_name) for j in js) == [
        ("b/c0/0", "reference"),
        ("b/c0/0", "s"),
        ("b/c1/0", "reference"),
        ("b/c2/0", "reference"),
    ]
