"""A judge's k samples (beyond the paper): the majority rule checked by hand, the judge id (the same
for one sample, another for k > 1), and through the fake server: k calls per target cached apart,
an invalid sample recorded with its reason and counted, a judge raised from 1 to 3 samples pays only
the new ones, and a run made again sends no request."""

from __future__ import annotations

import json

import pytest

from cocoeval.core.schema import Continuation, Judgment, TurnLabel
from cocoeval.core.targets import NO_TURNS
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import JudgeConfig
from cocoeval.judge.engine import judge, plan_judgments
from cocoeval.judge.samples import combine_samples
from cocoeval.llm import LLMConfig, Runner

from ..sim_helpers import instance

TAX = load_taxonomy()


def sample(labels: dict[int, list[str]], status: str = "ok", reason: str | None = None) -> Judgment:
    return Judgment(
        instance_id="i1",
        target="reference",
        judge_id="jid",
        judge_name="j",
        kind="fine_grained",
        taxonomy_hash=TAX.hash,
        status=status,
        reason=reason,
        judged_turns=[0, 1, 2],
        labels=[] if status == "invalid" else [TurnLabel(turn=t, behaviours=labels.get(t, [])) for t in range(3)],
    )


def test_the_label_is_the_strict_majority_of_the_valid_samples_and_every_sample_is_kept():
    parts = [
        sample({0: ["repetition"], 1: ["off_topic"]}),
        sample({0: ["repetition"], 1: ["off_topic", "interruption"]}),
        sample({0: ["repetition"]}),
    ]
    j = combine_samples(parts, TAX.ids)
    assert [lb.behaviours for lb in j.labels] == [["repetition"], ["off_topic"], []]
    assert j.labels[1].evidence["off_topic"] == "2 of 3 valid samples"
    assert j.status == "ok" and j.samples is not None and len(j.samples) == 3


def test_an_invalid_sample_is_left_out_of_the_majority_counted_and_a_tie_is_no_label():
    parts = [
        sample({0: ["repetition"], 1: ["off_topic"]}),
        sample({}, status="invalid", reason="turn 2: behaviours missing"),
        sample({0: ["repetition"]}),
    ]
    j = combine_samples(parts, TAX.ids)
    # two valid samples: repetition 2 of 2 is a majority, off topic 1 of 2 is a tie, so no label
    assert [lb.behaviours for lb in j.labels] == [["repetition"], [], []]
    assert "1 invalid sample(s) left out" in j.labels[0].evidence["repetition"]
    assert j.samples is not None and j.samples[1].reason == "turn 2: behaviours missing"


def test_every_sample_invalid_is_an_invalid_judgment_with_their_reasons_never_no_behaviour():
    j = combine_samples([sample({}, "invalid", "bad json"), sample({}, "invalid", "cut off")], TAX.ids)
    assert j.status == "invalid" and j.labels == []
    assert "sample 0: bad json" in (j.reason or "") and "sample 1: cut off" in (j.reason or "")
    skipped = combine_samples([sample({}, "invalid", NO_TURNS)] * 3, TAX.ids)
    assert skipped.reason == NO_TURNS


def test_overall_scores_are_the_mean_of_the_valid_samples_rounded_halves_up():
    def ov(c: int, k: int) -> Judgment:
        return Judgment(
            instance_id="i1", target="reference", judge_id="x", kind="overall", taxonomy_hash=TAX.hash,
            consistency=c, collaborativeness=k,
        )  # fmt: skip

    j = combine_samples([ov(7, 4), ov(8, 5), ov(8, 5)], TAX.ids)
    assert (j.consistency, j.collaborativeness) == (8, 5)  # 7.67 -> 8, 4.67 -> 5
    assert "7.66667" in (j.rationale or "")


def test_the_judge_id_is_unchanged_for_one_sample_and_changes_with_k():
    one = JudgeConfig(name="a", model="openai/o4-mini")
    assert one.judge_id("fine_grained", TAX) == JudgeConfig(name="a", model="openai/o4-mini", samples=1).judge_id(
        "fine_grained", TAX
    )
    three = JudgeConfig(name="a", model="openai/o4-mini", samples=3).judge_id("fine_grained", TAX)
    five = JudgeConfig(name="a", model="openai/o4-mini", samples=5).judge_id("fine_grained", TAX)
    assert len({one.judge_id("fine_grained", TAX), three, five}) == 3


def test_samples_is_validated():
    with pytest.raises(ValueError):
        JudgeConfig(name="a", model="openai/o4-mini", samples=0)
    with pytest.raises(ValueError):
        JudgeConfig(name="a", model="openai/o4-mini", samples="3")  # type: ignore[arg-type]


def fine_answer(n: int, labels: dict[int, list[str]] | None = None) -> str:
    labels = labels or {}
    return json.dumps(
        {
            "turns": [
                {"turn": i, "behaviours": [{"behaviour": b, "evidence": "e"} for b in labels.get(i, [])]}
                for i in range(1, n + 1)
            ]
        }
    )


def test_k_samples_are_k_calls_cached_apart_and_raising_k_pays_only_the_new_ones(srv, tmp_path):
    insts = [instance("d/c/0", n_hist=3, n_ref=3)]
    conts: dict[str, list[Continuation]] = {}
    srv.configure(
        answers=[
            {"match": "Continuation to annotate", "times": 1, "text": fine_answer(3, {1: ["Repetition"]})},
            {"match": "Continuation to annotate", "times": 1, "text": "not json at all"},
            {"match": "Continuation to annotate", "text": fine_answer(3, {1: ["Repetition"], 2: ["Off topic"]})},
        ]
    )
    cfg = LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)

    def judged(k: int) -> Judgment:
        j = JudgeConfig(
            name="j", model=f"openai/gpt-4.1@{srv.openai_base}", kind=["fine_grained"], samples=k, max_attempts=1,
            temperature=1.0,
        )  # fmt: skip
        [[out]] = judge(insts, conts, [j], Runner(cfg)).values()
        return out

    one = judged(1)
    assert srv.stats()["requests"] == 1 and one.samples is None
    three = judged(3)
    assert srv.stats()["requests"] == 3  # sample 0 from the cache, samples 1 and 2 sent
    assert three.samples is not None and sorted(s.status for s in three.samples) == ["invalid", "ok", "ok"]
    assert three.samples[0].status == "ok"  # sample 0 is the one-sample judge's answer, from the cache
    [bad] = [s for s in three.samples if s.status == "invalid"]
    assert bad.reason and bad.raw == "not json at all"
    # two valid samples: repetition on turn 1 in both; off topic on turn 2 in one of two, a tie: no label
    assert [lb.behaviours for lb in three.labels] == [["repetition"], [], []]
    assert three.status == "ok" and len(three.calls) == 3
    again = judged(3)
    assert srv.stats()["requests"] == 3  # a run made again sends nothing
    assert again.labels == three.labels and again.samples == three.samples
    plan = plan_judgments(insts, conts, [JudgeConfig(name="j", model="openai/o4-mini", samples=4)], TAX)["j"]
    assert sorted(t.sample for t in plan) == [0, 0, 1, 1, 2, 2, 3, 3]  # overall and fine-grained, 4 each


def test_the_stability_probe_of_a_sampled_judge_asks_a_sample_the_run_did_not():
    from cocoeval.core.targets import targets_for
    from cocoeval.judge.probes import ProbeSection
    from cocoeval.run.probes import plan_probes

    insts = [instance(f"d/c{k}/0", n_hist=3, n_ref=3) for k in range(3)]
    sec = ProbeSection(kinds=["stability"], targets=3)
    for k, expected in ((1, 1), (3, 3)):
        j = JudgeConfig(name="j", model="openai/o4-mini", kind=["fine_grained"], samples=k)
        items = plan_probes(sec, [j], targets_for(insts, {}), TAX)["j"]
        assert {it.sample for it in items} == {expected}  # samples: 3 asks 0, 1, 2: the probe asks 3
        assert {it.next_call().request.sample for it in items} == {expected}


def test_a_sample_whose_call_failed_makes_the_judgment_failed_and_a_rerun_sends_only_that_sample(tmp_path, srv):
    import subprocess
    import sys

    import yaml

    from cocoeval import build
    from cocoeval.run import Run

    from ..conftest import qmsum_meeting, write_json

    write_json(tmp_path / "src" / "product" / "M0.json", qmsum_meeting(80))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    model = f"openai-compatible/fake@{srv.openai_base}"
    fine = json.dumps({"turns": [{"turn": i, "behaviours": []} for i in range(1, 31)]})
    answers = [{"match": "Continuation to annotate", "text": fine}]
    srv.configure(faults=[{"match": "Continuation to annotate", "kind": "500", "times": 1}], answers=answers)
    judge_doc = {"name": "j", "model": model, "kind": ["fine_grained"], "samples": 3, "temperature": 1.0}
    p = tmp_path / "p.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "llm": {"cache": "cache.sqlite", "max_retries": 0},
                "judges": [judge_doc],
            }
        )
    )

    def cli() -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "cocoeval", "run", str(p), "--no-progress"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180)

    out = cli()
    n = len(Run.open(tmp_path / "runs" / "p").instances)
    assert out.returncode == 3, out.stderr
    assert f"judge j: {n - 1} ok, 0 invalid, 1 failed of {n}" in out.stderr
    assert "call failed in N of N samples" in out.stderr and "a re-run sends them again" in out.stderr
    assert srv.stats()["requests"] == 3 * n
    [bad] = [x for x in Run.open(tmp_path / "runs" / "p").judgments["j"] if x.status != "ok"]
    assert bad.reason and bad.reason.startswith("call failed in 1 of 3 samples: sample ")
    assert bad.labels == [] and bad.samples and sum(s.status == "ok" for s in bad.samples) == 2

    srv.reset()
    srv.configure(answers=answers)
    again = cli()
    assert again.returncode == 0, again.stderr
    assert srv.stats()["requests"] == 1  # only the failed sample is sent again; the other two are cached
    assert all(x.status == "ok" for x in Run.open(tmp_path / "runs" / "p").judgments["j"])


def test_every_sample_failed_is_a_failed_judgment_not_an_invalid_one():
    parts = [sample({}, "invalid", "call failed: server_error") for _ in range(3)]
    out = combine_samples(parts, TAX.ids)
    assert out.status == "invalid" and out.reason and out.reason.startswith("call failed in 3 of 3 samples")
    from cocoeval.run.outcome import tally

    assert tally([out]).failed == 1 and tally([out]).invalid == 0
