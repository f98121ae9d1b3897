"""Every answer of tests/data/judge_answers.yaml served by the fake provider server to the real
judge: the stored judgment has the corpus's exact outcome, an unusable answer is re-asked with
its reason and then stored invalid, and the run's frames count it as invalid, never as zero."""

from __future__ import annotations

import pytest

from cocoeval.frames import invalid_rates, run_frames
from cocoeval.judge import JudgeConfig, judge
from cocoeval.llm import LLMConfig, Runner
from cocoeval.taxonomy import load_taxonomy

from .sim_helpers import instance
from .test_judge_parse import CORPUS, NAMES

TAX = load_taxonomy()


def judge_once(srv, tmp_path, case: dict):
    """Serve the case's answer (to the question and to the re-ask) and judge one reference."""
    n = case.get("turns", 3)
    inst = instance("d/c/0", n_hist=4, n_ref=n)
    fine = case["kind"] == "fine"
    cut = case.get("finish") == "length"  # a small output budget makes the server cut the answer
    jc = JudgeConfig(name="j", model=f"openai/gpt-4.1@{srv.openai_base}",
                     kind=["fine_grained" if fine else "overall"], max_attempts=2,
                     max_tokens_per_turn=1 if cut else 80, max_tokens_overall=10 if cut else 600)
    if cut:
        assert len(case["answer"]) > 4 * (200 + n if fine else 10), "lengthen the answer so that it is cut"
    srv.configure(answers=[{"match": "", "text": case["answer"]}])
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    [js] = judge([inst], {}, [jc], r).values()
    return inst, js


@pytest.mark.parametrize("case", CORPUS, ids=[c["id"] for c in CORPUS])
def test_served_answer_ends_as_the_corpus_says(srv, tmp_path, case):
    exp = case["expect"]
    inst, [j] = judge_once(srv, tmp_path, case)
    f = run_frames({"instances": [inst], "continuations": {}, "judgments": {"j": [j]}}, TAX)
    [rate] = invalid_rates(f).filter(stage="judge").to_dicts()
    if exp["status"] == "invalid":
        reason = exp["reason"].replace("{names}", NAMES)
        assert (j.status, j.reason, j.labels) == ("invalid", reason, [])
        assert j.consistency is None and j.collaborativeness is None
        if reason == "truncated":
            assert j.attempts == 1
        else:  # re-asked once with the reason, then stored with the last raw answer
            assert j.attempts == 2 and j.raw == case["answer"]
            asked = srv.stats()["bodies_last"]["messages"][-1]["content"]
            assert asked.startswith(f"Your answer could not be used: {reason}.")
        assert (rate["n"], rate["invalid"]) == (1, 1)
        assert f.counts.height == 0 and f.likert.height == 0  # absent, never zero
        return
    assert (j.status, j.reason, j.attempts) == (exp["status"], None, 1)
    assert j.repairs == exp.get("repairs", [])
    assert j.raw == (None if exp["status"] == "ok" else case["answer"])
    assert (rate["n"], rate["invalid"]) == (1, 0)
    if case["kind"] == "fine":
        assert [lb.behaviours for lb in j.labels] == exp["behaviours"]
        assert [lb.turn for lb in j.labels] == j.judged_turns
        counts = {r["behaviour"]: r["count"] for r in f.counts.to_dicts()}
        assert set(counts) == set(TAX.ids)
        for b in TAX.ids:
            assert counts[b] == sum(b in turn for turn in exp["behaviours"])
    else:
        assert [j.consistency, j.collaborativeness] == exp["scores"]
        assert j.rationale == exp.get("rationale")
        assert f.likert.select("consistency", "collaborativeness").rows() == [tuple(exp["scores"])]
