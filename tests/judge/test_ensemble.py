"""Judge ensembles (beyond the paper): the majority and invalid rules checked by hand, the params
checks, and an ensemble in a run: written by the judge stage with no call, in the frames like any
judge, stale when a member's judge id changes."""

from __future__ import annotations

import json

import pytest
import yaml

from cocoeval.analysis.frames import run_frames
from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import write_jsonl
from cocoeval.core.schema import Judgment, TurnLabel
from cocoeval.core.targets import NO_TURNS
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import EnsembleConfig, JudgeConfig, judge_ids
from cocoeval.judge.ensemble import combine, round_half_up
from cocoeval.run import Run, load_params
from cocoeval.run.params import read_params
from tests.sim_helpers import instance

TAX = load_taxonomy()
ENS = EnsembleConfig(name="ens", ensemble=["a", "b", "c"])
IDS = {"fine_grained": "ens-f", "overall": "ens-o"}


def fine(
    member: str, labels: dict[int, list[str]], status: str = "ok", reason: str | None = None, iid: str = "i1"
) -> Judgment:
    return Judgment(
        instance_id=iid,
        target="reference",
        target_name="reference",
        judge_id=f"id-{member}",
        judge_name=member,
        kind="fine_grained",
        taxonomy_hash=TAX.hash,
        status=status,
        reason=reason,
        judged_turns=[0, 1, 2],
        labels=[] if status == "invalid" else [TurnLabel(turn=t, behaviours=labels.get(t, [])) for t in range(3)],
    )


def overall(member: str, c: int | None, k: int | None, status: str = "ok") -> Judgment:
    return Judgment(
        instance_id="i1",
        target="reference",
        judge_id=f"id-{member}",
        kind="overall",
        taxonomy_hash=TAX.hash,
        consistency=c,
        collaborativeness=k,
        status=status,
        reason="bad answer" if status == "invalid" else None,
    )


def by_turn(j: Judgment) -> dict[int, list[str]]:
    return {lb.turn: lb.behaviours for lb in j.labels}


def test_majority_per_turn_and_behaviour_by_hand():
    members = {
        "a": [fine("a", {0: ["repetition"], 1: ["off_topic"]})],
        "b": [fine("b", {0: ["repetition"], 2: ["unclear_intent"]})],
        "c": [fine("c", {1: ["off_topic", "unclear_intent"]})],
    }
    [j] = combine(ENS, members, IDS, TAX)
    assert j.status == "ok" and j.judge_id == "ens-f" and j.judge_name == "ens" and j.calls == []
    # repetition on turn 0: a, b (2 of 3); off topic on turn 1: a, c; unclear intent once each on 1 and 2: no
    assert by_turn(j) == {0: ["repetition"], 1: ["off_topic"], 2: []}
    assert j.labels[1].evidence["off_topic"] == "2 of 3 members: a, c"


def test_mean_of_likert_scores_rounded_halves_up():
    members = {"a": [overall("a", 7, 5)], "b": [overall("b", 8, 6)], "c": [overall("c", 8, 6)]}
    [j] = combine(ENS, members, IDS, TAX)
    assert (j.consistency, j.collaborativeness) == (8, 6)  # 7.67 -> 8, 5.67 -> 6
    assert "7.66667" in (j.rationale or "")
    assert round_half_up(7.5) == 8 and round_half_up(7.49) == 7
    members["c"] = [overall("c", None, None, status="invalid")]
    [j] = combine(ENS, members, IDS, TAX)  # one of three invalid: the mean of the two valid ones
    assert (j.consistency, j.collaborativeness) == (8, 6)  # 7.5 -> 8, 5.5 -> 6


def test_invalid_where_the_majority_of_members_is_invalid():
    members = {
        "a": [fine("a", {0: ["repetition"]})],
        "b": [fine("b", {}, "invalid", "truncated at 600 tokens")],
        "c": [],
    }  # c has no judgment of the target: counted invalid
    [j] = combine(ENS, members, IDS, TAX)
    assert j.status == "invalid"
    assert j.reason == (
        "2 of 3 members invalid for this target: b: truncated at 600 tokens; c: no judgment by this member"
    )
    # one invalid of three: the two valid ones decide, and a tie (1 of 2) is no majority
    members["c"] = [fine("c", {0: ["repetition"], 1: ["off_topic"]})]
    [j] = combine(ENS, members, IDS, TAX)
    assert j.status == "ok" and by_turn(j) == {0: ["repetition"], 1: [], 2: []}
    # nothing to judge for every member: skipped, not invalid
    skip = {m: [fine(m, {}, "invalid", NO_TURNS)] for m in "abc"}
    [j] = combine(ENS, skip, IDS, TAX)
    assert j.reason == NO_TURNS


def test_ensemble_id_derives_from_members_ids_and_rule():
    a, b = JudgeConfig(name="a", model="openai/x"), JudgeConfig(name="b", model="openai/y")
    e = EnsembleConfig(name="e", ensemble=["a", "b"])
    ids = judge_ids([a, b, e], TAX)
    assert ids["e"]["fine_grained"].startswith("ens-") and ids["e"]["fine_grained"] != ids["e"]["overall"]
    a2 = a.model_copy(update={"temperature": 0.5})
    assert judge_ids([a2, b, e], TAX)["e"] != ids["e"] and judge_ids([a, b, e], TAX) == ids


def _write(tmp_path, judges, probes=None):
    p = tmp_path / "p.yaml"
    data = {"name": "x", "bench": "bench", "judges": judges}
    if probes is not None:
        data["probes"] = probes
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(
    "judges, probes, msg",
    [
        (
            [{"name": "a", "model": "openai/x"}, {"name": "e", "ensemble": ["a", "zz"]}],
            None,
            "judges[1].ensemble: no judge named 'zz' in judges (LLM judges: a)",
        ),
        (
            [
                {"name": "a", "model": "openai/x", "kind": ["overall"]},
                {"name": "b", "model": "openai/y"},
                {"name": "e", "ensemble": ["a", "b"]},
            ],
            None,
            "judge 'a' does not make fine_grained judgments",
        ),
        (
            [
                {"name": "a", "model": "openai/x"},
                {"name": "b", "model": "openai/y"},
                {"name": "e", "ensemble": ["a", "b"]},
                {"name": "f", "ensemble": ["a", "e"]},
            ],
            None,
            "'e' is an ensemble",
        ),
        ([{"name": "a", "model": "openai/x"}, {"name": "e", "ensemble": ["a", "a"]}], None, "more than once"),
        (
            [{"name": "a", "model": "openai/x"}, {"name": "e", "ensemble": ["a"]}],
            None,
            "judges.1.ensemble: List should",
        ),
        ([{"name": "a", "model": "openai/x"}], {"judges": ["nope"]}, "probes.judges: no LLM judge named 'nope'"),
        ([{"name": "a", "model": "openai/x"}], {"kinds": ["names", "names"]}, "more than once"),
    ],
)
def test_params_refuse_bad_ensembles_and_probes(tmp_path, judges, probes, msg):
    with pytest.raises(InputError) as e:
        read_params(_write(tmp_path, judges, probes))
    assert msg in str(e.value)


FINE = json.dumps(
    {
        "turns": [
            {"turn": t, "behaviours": [{"behaviour": "Repetition", "evidence": "x"}] if t == 1 else []}
            for t in range(1, 5)
        ]
    }
)
OVERALL = json.dumps({"consistency": 7, "collaborativeness": 6, "rationale": "fine"})


def _params(tmp_path, url, temp_a=0.0):
    write_jsonl(tmp_path / "bench" / "eval.jsonl", [instance(f"d/c{k}/0", n_hist=3, n_ref=4) for k in range(3)])
    model = f"openai-compatible/fake@{url}"
    p = tmp_path / "exp.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "exp",
                "out": "runs/exp",
                "bench": "bench",
                "judges": [
                    {"name": "a", "model": model, "temperature": temp_a},
                    {"name": "b", "model": model, "temperature": 0.1},
                    {"name": "c", "model": model, "temperature": 0.2, "kind": ["fine_grained"]},
                    {"name": "ens", "ensemble": ["a", "b", "c"], "kind": ["fine_grained"]},
                ],
                "llm": {"cache": "cache.sqlite"},
            }
        )
    )
    return load_params(p)


def test_an_ensemble_in_a_run_makes_no_call_and_enters_the_frames(srv, tmp_path):
    srv.configure(
        answers=[
            {"match": "Continuation to annotate", "text": FINE},
            {"match": "Continuation to evaluate", "text": OVERALL},
        ]
    )
    exp = _params(tmp_path, srv.openai_base)
    ens = exp.params.ensembles[0]
    assert (
        ens.judge_id("fine_grained", exp.taxonomy) == judge_ids(exp.params.judges, exp.taxonomy)["ens"]["fine_grained"]
    )
    from cocoeval.run.estimate import forecast

    rows = forecast(exp, exp.prepare_instances(write=False))
    assert {r.name.split(":")[0] for r in rows} == {"a", "b", "c"}  # an ensemble makes no call
    exp.run(("judge",), progress=False)
    assert srv.stats()["requests"] == 3 * (2 + 2 + 1)  # the members' calls only
    run = Run.open(exp.run_dir)
    assert run.manifest.judges["ens"]["fine_grained"].startswith("ens-")
    assert len(run.judgments["ens"]) == 3 and {j.status for j in run.judgments["ens"]} == {"ok"}
    f = run_frames(run)
    counts = f.counts.filter((f.counts["judge"] == "ens") & (f.counts["behaviour"] == "repetition"))
    assert counts["count"].to_list() == [1, 1, 1]
    assert f.expected.filter(f.expected["judge"] == "ens")["reason"].null_count() == 3
    # a member's settings change and only another stage runs: the ensemble's judgments are stale
    _params(tmp_path, srv.openai_base, temp_a=0.7).run(("simulate",), progress=False)
    f = run_frames(Run.open(exp.run_dir))
    assert set(f.judgments.filter(f.judgments["judge"] == "ens")["status"]) == {"stale"}


# ------------------------------------------------------------------ the boundaries, by hand

FOUR = EnsembleConfig(name="ens4", ensemble=["a", "b", "c", "d"])


def test_an_ensemble_is_valid_at_exactly_half_its_members_invalid_and_invalid_above_half():
    """The rule is a strict majority of invalid members: 2 of 4 invalid is no majority, so the two
    valid members decide; 3 of 4 is."""
    members = {
        "a": [fine("a", {0: ["repetition"], 1: ["off_topic"]})],
        "b": [fine("b", {0: ["repetition"], 2: ["unclear_intent"]})],
        "c": [fine("c", {}, "invalid", "truncated")],
        "d": [],
    }  # no judgment of the target: invalid
    [j] = combine(FOUR, members, IDS, TAX)
    # 2 of 4 invalid: valid; repetition on turn 0 by a and b (2 of 2 valid: a majority), the rest
    # by one of the two (1 of 2: a tie, no majority)
    assert j.status == "ok" and j.reason is None
    assert by_turn(j) == {0: ["repetition"], 1: [], 2: []}
    assert j.labels[0].evidence == {"repetition": "2 of 2 members: a, b"}
    members["b"] = [fine("b", {}, "invalid", "unparseable")]
    [j] = combine(FOUR, members, IDS, TAX)  # 3 of 4 invalid: a strict majority
    assert j.status == "invalid" and j.labels == []
    assert j.reason == (
        "3 of 4 members invalid for this target: b: unparseable; c: truncated; d: no judgment by this member"
    )
    # two members: one invalid is exactly half (valid, the other decides alone), both invalid is not
    pair = EnsembleConfig(name="ens2", ensemble=["a", "b"])
    [j] = combine(pair, {"a": [fine("a", {1: ["off_topic"]})], "b": []}, IDS, TAX)
    assert j.status == "ok" and by_turn(j) == {0: [], 1: ["off_topic"], 2: []}
    [j] = combine(pair, {"a": [fine("a", {}, "invalid", "x")], "b": []}, IDS, TAX)
    assert j.status == "invalid"


def test_an_ensembles_likert_mean_of_exactly_a_half_rounds_up_never_to_the_even_score():
    """Halves up, as documented: 6.5 -> 7 and 2.5 -> 3, where Python's round() (to even) would
    give 6 and 2."""
    for x, want in ((0.5, 1), (1.5, 2), (2.5, 3), (4.5, 5), (6.5, 7), (8.5, 9), (9.5, 10), (6.49, 6)):
        assert round_half_up(x) == want, x
    # 2 of 4 members invalid: the mean of the two valid ones, (6 + 7) / 2 = 6.5 and (2 + 3) / 2 = 2.5
    members = {
        "a": [overall("a", 6, 2)],
        "b": [overall("b", 7, 3)],
        "c": [overall("c", None, None, status="invalid")],
        "d": [],
    }
    [j] = combine(FOUR, members, IDS, TAX)
    assert j.status == "ok" and (j.consistency, j.collaborativeness) == (7, 3)
    assert j.rationale == "mean of 2 member(s) (a, b): consistency 6.5, collaborativeness 2.5"
    # three valid members: (4 + 4 + 5) / 3 = 4.33 -> 4 and (1 + 1 + 2) / 3 = 1.33 -> 1 (not up: no half)
    [j] = combine(ENS, {"a": [overall("a", 4, 1)], "b": [overall("b", 4, 1)], "c": [overall("c", 5, 2)]}, IDS, TAX)
    assert (j.consistency, j.collaborativeness) == (4, 1)
