"""Every answer of tests/data/judge_answers.yaml served by the fake provider server to the real
judge: the stored judgment has the corpus's exact outcome, an unusable answer is re-asked with
its exact reason and then stored invalid, and the run's frames count it as invalid, never as
zero behaviours.

Each case is its own instance (``d/<case id>/0``), answered by matching the instance id in the
prompt; a re-ask is answered by matching "could not be used: <the expected reason>." with an
answer that has that reason, so a re-ask that carried another reason gets no scripted answer and
the case fails. All cases of a kind and output budget are judged in one run.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from cocoeval.analysis.frames import invalid_rates, run_frames
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import JudgeConfig
from cocoeval.judge.engine import judge
from cocoeval.llm import LLMConfig, Runner
from cocoeval.run import Run

from ..conftest import TEST_KEY
from ..sim_helpers import instance
from .test_judge_parse import CORPUS, NAMES

TAX = load_taxonomy()


def reason(case: dict) -> str | None:
    r = case["expect"].get("reason")
    return r.replace("{names}", NAMES) if r else None


def judged_reason(case: dict) -> str | None:
    """The judgment's reason: a cut-off answer (served with a cap no larger than the budget, so
    that it is not asked again with a larger one) is "truncated at N tokens"."""
    if reason(case) == "truncated":
        return f"truncated at {200 + case.get('turns', 3) if case['kind'] == 'fine' else 10} tokens"
    return reason(case)


@pytest.fixture(scope="module")
def served(server, tmp_path_factory):
    """{case id: (instance, judgment)} and the frames of all of them."""
    groups: dict[tuple[str, bool], list[dict]] = defaultdict(list)
    for c in CORPUS:
        groups[(c["kind"], c.get("finish") == "length")].append(c)
    out, insts, judgments = {}, [], []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", TEST_KEY)
        for (kind, cut), cases in groups.items():
            server.reset()
            answers = [{"match": f" of d/{c['id']}/0", "text": c["answer"], "times": 1} for c in cases]
            answers += [
                {"match": f"could not be used: {reason(c)}.", "text": c["answer"]}
                for c in cases
                if reason(c) not in (None, "truncated")
            ]
            server.configure(answers=answers)
            batch = {c["id"]: instance(f"d/{c['id']}/0", n_hist=4, n_ref=c.get("turns", 3)) for c in cases}
            if cut:  # a small output budget makes the server cut the answer
                limit = [200 + c.get("turns", 3) if kind == "fine" else 10 for c in cases]
                assert all(len(c["answer"]) > 4 * n for c, n in zip(cases, limit, strict=True)), (
                    "lengthen the answer so that it is cut"
                )
            jc = JudgeConfig(
                name="j",
                model=f"openai/gpt-4.1@{server.openai_base}",
                max_attempts=2,
                kind=["fine_grained" if kind == "fine" else "overall"],
                max_tokens_per_turn=1 if cut else 80,
                max_tokens_overall=10 if cut else 600,
                max_tokens_cap=1 if cut else 32_000,
            )
            runner = Runner(LLMConfig(cache=str(tmp_path_factory.mktemp("cache") / "c.sqlite"), progress=False))
            [js] = judge(list(batch.values()), {}, [jc], runner).values()
            by_inst = {j.instance_id: j for j in js}
            out.update({cid: (inst, by_inst[inst.id]) for cid, inst in batch.items()})
            insts += batch.values()
            judgments += js
    server.reset()
    return out, run_frames(
        Run.model_validate({"instances": insts, "continuations": {}, "judgments": {"j": judgments}}), TAX
    )


@pytest.mark.parametrize("case", CORPUS, ids=[c["id"] for c in CORPUS])
def test_served_answer_ends_as_the_corpus_says(served, case):
    exp, (results, f) = case["expect"], served
    inst, j = results[case["id"]]
    [row] = f.judgments.filter(instance_id=inst.id).to_dicts()
    counts = {r["behaviour"]: r["count"] for r in f.counts.filter(instance_id=inst.id).to_dicts()}
    likert = f.likert.filter(instance_id=inst.id).select("consistency", "collaborativeness").rows()
    if exp["status"] == "invalid":
        assert (j.status, j.reason, j.labels) == ("invalid", judged_reason(case), [])
        assert j.consistency is None and j.collaborativeness is None
        # re-asked once with the reason (the scripted re-ask answer matched it), unless cut off
        assert j.attempts == len(j.calls) == (1 if reason(case) == "truncated" else 2)
        same = {c["answer"] for c in CORPUS if c["kind"] == case["kind"] and reason(c) == reason(case)}
        assert j.raw in same if reason(case) != "truncated" else case["answer"].startswith(j.raw)
        assert (row["status"], row["reason"]) == ("invalid", judged_reason(case))
        assert counts == {} and likert == []  # absent from the statistics, never zero
        return
    assert (j.status, j.reason, j.attempts) == (exp["status"], None, 1)
    assert j.repairs == exp.get("repairs", [])
    assert j.raw == (None if exp["status"] == "ok" else case["answer"])
    assert row["status"] == exp["status"]
    if case["kind"] == "fine":
        assert [lb.behaviours for lb in j.labels] == exp["behaviours"]
        assert [lb.turn for lb in j.labels] == j.judged_turns
        assert counts == {b: sum(b in turn for turn in exp["behaviours"]) for b in TAX.ids}
    else:
        assert [j.consistency, j.collaborativeness] == exp["scores"]
        assert j.rationale == exp.get("rationale")
        assert likert == [tuple(exp["scores"])]


def test_invalid_rates_count_every_invalid_answer(served):
    _, f = served
    rates = {r["kind"]: (r["n"], r["invalid"]) for r in invalid_rates(f).filter(stage="judge").to_dicts()}
    for kind, name in (("fine", "fine_grained"), ("overall", "overall")):
        cases = [c for c in CORPUS if c["kind"] == kind]
        assert rates[name] == (len(cases), sum(c["expect"]["status"] == "invalid" for c in cases))
