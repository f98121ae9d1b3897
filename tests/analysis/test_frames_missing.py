"""Frames count what is absent (expected by the run's params, not in the run directory) and what
had nothing to judge (a target without a turn to judge): never silently, never a valid zero."""

from __future__ import annotations

import json

import polars as pl
import pytest

from cocoeval.analysis.frames import (
    NO_CONTINUATION,
    NOT_JUDGED,
    NOT_SIMULATED,
    invalid_rates,
    run_frames,
)
from cocoeval.analysis.stats import mean_occurrences
from cocoeval.core.errors import InputError
from cocoeval.core.schema import Continuation, Judgment, TurnLabel
from cocoeval.core.targets import NO_TURNS
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import JudgeConfig
from cocoeval.judge.engine import judge
from cocoeval.llm import LLMConfig, Runner
from cocoeval.run import Run
from cocoeval.run.recorded import RecordedParams

from ..sim_helpers import instance, write_run_dir

TAX = load_taxonomy()
KINDS = ("overall", "fine_grained")


def judgment(iid, target, target_id, kind, *, judge_name="J", n_turns=3, rep=1):
    if kind == "overall":
        return Judgment(
            instance_id=iid,
            target=target_id,
            target_name=target,
            judge_id="jid",
            judge_name=judge_name,
            kind="overall",
            taxonomy_hash=TAX.hash,
            consistency=6,
            collaborativeness=5,
            judged_turns=list(range(n_turns)),
        )
    return Judgment(
        instance_id=iid,
        target=target_id,
        target_name=target,
        judge_id="jid",
        judge_name=judge_name,
        kind="fine_grained",
        taxonomy_hash=TAX.hash,
        judged_turns=list(range(n_turns)),
        labels=[TurnLabel(turn=t, behaviours=["repetition"] if t < rep else []) for t in range(n_turns)],
    )


def complete_run(n=3, judges=None):
    """n instances, setup sim simulated ok on each, judge J's two kinds of every target: complete."""
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=3) for i in range(n)]
    conts = {
        "sim": [Continuation(instance_id=i.id, setup_id="sid", setup_name="sim", turns=i.reference) for i in insts]
    }
    js = [
        judgment(i.id, t, tid, k)
        for i in insts
        for t, tid in (("reference", "reference"), ("sim", "sid"))
        for k in KINDS
    ]
    params = {
        "name": "r",
        "bench": "b",
        "setups": [{"name": "sim", "model": "openai/m", "turns_per_call": 3}],
        "judges": [{"name": "J", "model": "openai/j", "kind": list(KINDS)}] if judges is None else judges,
    }
    return Run.model_validate(
        {"manifest": {"params": params}, "instances": insts, "continuations": conts, "judgments": {"J": js}}
    )


def rates(run):
    r = invalid_rates(run_frames(run))
    return {(x["stage"], x["judge"], x["target"], x["kind"]): x for x in r.to_dicts()}


def test_a_complete_run_directory_has_nothing_missing(tmp_path):
    write_run_dir(tmp_path, complete_run(), {"params": complete_run().manifest.params.model_dump(mode="json")})
    r = rates(Run.open(tmp_path))
    assert set(r) == {("simulate", None, "sim", None)} | {
        ("judge", "J", t, k) for t in ("reference", "sim") for k in KINDS
    }
    assert all(x["missing"] == 0 for x in r.values()) and all(x["n"] == 3 for x in r.values())
    assert r[("judge", "J", "sim", "overall")]["no_continuation"] == 0
    assert run_frames(Run.open(tmp_path)).missing.is_empty()


def test_a_judgment_absent_from_the_run_directory_counts_as_missing(tmp_path):
    run = complete_run()
    write_run_dir(tmp_path, run, {"params": run.manifest.params.model_dump(mode="json")})
    path = tmp_path / "judgments" / "J.jsonl"
    lines = path.read_text().splitlines()
    gone = [x for x in lines if json.loads(x)["target_name"] == "sim" and json.loads(x)["kind"] == "fine_grained"][1]
    path.write_text("\n".join(x for x in lines if x != gone) + "\n")  # e.g. killed before it was judged
    f = run_frames(Run.open(tmp_path))
    r = rates(Run.open(tmp_path))
    row = r[("judge", "J", "sim", "fine_grained")]
    assert (row["n"], row["missing"], row["no_continuation"], row["invalid"]) == (2, 1, 0, 0)
    assert sum(x["missing"] for x in r.values()) == 1
    assert f.missing.select("stage", "judge", "target", "kind", "instance_id", "reason").rows() == [
        ("judge", "J", "sim", "fine_grained", json.loads(gone)["instance_id"], NOT_JUDGED)
    ]
    # the means use the judgments that exist, and the table says one is missing
    assert mean_occurrences(f, resamples=50, min_n=2).filter(pl.col("target") == "sim")["n"].unique().to_list() == [2]


def test_a_judge_file_absent_makes_every_expected_judgment_missing(tmp_path):
    run = complete_run(
        judges=[
            {"name": "J", "model": "openai/j", "kind": list(KINDS)},
            {"name": "K", "model": "openai/k", "kind": ["overall"], "max_per_dataset": 2},
        ]
    )
    write_run_dir(tmp_path, run, {"params": run.manifest.params.model_dump(mode="json")})
    r = rates(Run.open(tmp_path))
    # K judges the first 2 instances of the dataset, overall only: 2 per target, nothing judged
    assert {k: (x["n"], x["missing"]) for k, x in r.items() if k[1] == "K"} == {
        ("judge", "K", "reference", "overall"): (0, 2),
        ("judge", "K", "sim", "overall"): (0, 2),
    }
    assert r[("judge", "K", "sim", "overall")]["invalid_rate"] is None  # nothing to divide: no rate, not 0


def test_a_missing_continuation_makes_its_judgments_missing_with_no_continuation():
    run = complete_run(n=4)
    insts = run.instances
    # instance 1: the setup's continuation is invalid; instance 2: never simulated (killed run)
    run.continuations["sim"] = [
        run.continuations["sim"][0],
        Continuation(instance_id=insts[1].id, setup_id="sid", status="invalid", reason="x"),
        run.continuations["sim"][3],
    ]
    run.judgments["J"] = [
        j for j in run.judgments["J"] if not (j.target == "sid" and j.instance_id in (insts[1].id, insts[2].id))
    ]
    f = run_frames(run)
    r = rates(run)
    sim = r[("simulate", None, "sim", None)]
    assert (sim["n"], sim["invalid"], sim["missing"], sim["no_continuation"]) == (3, 1, 1, None)
    for k in KINDS:
        row = r[("judge", "J", "sim", k)]
        assert (row["n"], row["missing"], row["no_continuation"]) == (2, 2, 2)
        assert r[("judge", "J", "reference", k)]["missing"] == 0
    reasons = dict(
        f.missing.group_by("stage", "reason")
        .len()
        .select(pl.concat_str("stage", "reason", separator=": "), "len")
        .rows()
    )
    assert reasons == {f"simulate: {NOT_SIMULATED}": 1, f"judge: {NO_CONTINUATION}": 4}


def test_a_stale_judgment_leaves_the_current_continuation_missing():
    run = complete_run()
    run.continuations["sim"][0] = run.continuations["sim"][0].model_copy(update={"setup_id": "sid-v2"})
    r = rates(run)
    row = r[("judge", "J", "sim", "overall")]
    assert (row["n"], row["stale"], row["missing"], row["no_continuation"]) == (2, 1, 1, 0)


def test_without_params_missing_is_unknown_never_zero():
    run = complete_run()
    run.manifest.params = RecordedParams()
    r = rates(run)
    assert all(x["missing"] is None for x in r.values())
    # a judge the params do not name (an earlier params version): unknown as well
    run = complete_run(judges=[])
    assert {k: x["missing"] for k, x in rates(run).items() if k[0] == "judge"} == dict.fromkeys(
        [("judge", "J", t, k) for t in ("reference", "sim") for k in KINDS]
    )


def test_unreadable_params_name_the_manifest_record():
    run = complete_run(judges=[{"name": "J", "model": "openai/j", "kind": ["overal"]}])
    with pytest.raises(InputError) as e:
        run_frames(run)
    assert "params.judges[0]" in str(e.value) and "manifest.json" in str(e.value)


# ------------------------------------------------------------------ targets with no turn to judge
def chat_without_user_turn():
    # a chat whose reference window is one chatbot turn: no user turn, nothing the judges judge
    inst = instance("chat/c/0", n_hist=3, n_ref=1, chat=True)
    assert [t.speaker for t in inst.reference] == ["assistant"]
    return inst


def test_a_target_without_a_turn_to_judge_is_never_sent_and_recorded_with_its_reason(srv, tmp_path):
    empty, full = chat_without_user_turn(), instance("chat/c/1", n_hist=4, n_ref=2, chat=True)
    conts = {
        "bot": [
            Continuation(
                instance_id=i.id,
                setup_id="b",
                setup_name="bot",
                turns=[t.model_copy(update={"text": "simulated " + t.text}) for t in i.reference],
            )
            for i in (empty, full)
        ]
    }
    srv.configure(
        answers=[
            {"match": "Continuation to annotate", "text": json.dumps({"turns": [{"turn": 1, "behaviours": []}]})},
            {
                "match": "Continuation to evaluate",
                "text": json.dumps({"consistency": 6, "collaborativeness": 4, "rationale": "ok"}),
            },
        ]
    )
    runner = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    cfg = JudgeConfig(name="J", model=f"openai/gpt-4.1@{srv.openai_base}")
    [js] = judge([empty, full], conts, [cfg], runner).values()
    skipped = [j for j in js if j.instance_id == empty.id]
    assert len(skipped) == 4 and all(j.status == "invalid" and j.reason == NO_TURNS and not j.calls for j in skipped)
    assert srv.stats()["requests"] == 4  # only the other instance's reference and continuation, two kinds
    run = Run.model_validate({"instances": [empty, full], "continuations": conts, "judgments": {"J": js}})
    f = run_frames(run)
    assert set(f.judgments.filter(pl.col("instance_id") == empty.id)["status"]) == {"skipped"}
    assert empty.id not in set(f.counts["instance_id"]) and empty.id not in set(f.likert["instance_id"])
    r = rates(run)
    for t in ("reference", "bot"):
        for k in KINDS:
            assert (
                r[("judge", "J", t, k)]["n"],
                r[("judge", "J", t, k)]["skipped"],
                r[("judge", "J", t, k)]["invalid"],
            ) == (2, 1, 0)


def test_an_old_valid_all_zero_judgment_of_an_empty_target_is_skipped_not_a_zero():
    run = complete_run(n=3)
    empty = chat_without_user_turn()
    run.instances.append(empty)
    # an older run stored a valid fine-grained judgment with no turn (and a Likert score) for it
    run.judgments["J"] += [judgment(empty.id, "reference", "reference", k, n_turns=0) for k in KINDS]
    f = run_frames(run)
    assert empty.id not in set(f.counts["instance_id"]) and empty.id not in set(f.likert["instance_id"])
    m = (
        mean_occurrences(f, resamples=50, min_n=2)
        .filter((pl.col("target") == "reference") & (pl.col("behaviour") == "repetition"))
        .row(0, named=True)
    )
    assert (m["n"], m["mean"]) == (3, 1.0)  # not 4 conversations with a mean of 0.75
    r = rates(run)
    assert r[("judge", "J", "reference", "fine_grained")]["skipped"] == 1
    assert r[("judge", "J", "reference", "overall")]["skipped"] == 1
    # the judge selects the chat instance too (the setup does not: it is multi-party), and it exists
    assert r[("judge", "J", "reference", "fine_grained")]["missing"] == 0
    assert r[("judge", "J", "sim", "fine_grained")]["missing"] == 0


def test_the_report_shows_what_is_missing(tmp_path):
    from cocoeval.analysis.report import write_report

    run = complete_run(n=3)
    run.judgments["J"] = [
        j
        for j in run.judgments["J"]
        if not (j.target == "sid" and j.kind == "overall" and j.instance_id == run.instances[0].id)
    ]
    write_run_dir(tmp_path / "run", run, {"params": run.manifest.params.model_dump(mode="json")})
    write_report(tmp_path / "run", tmp_path / "rep", resamples=50, min_n=2)
    inv = pl.read_csv(tmp_path / "rep" / "invalid_rates.csv")
    assert inv.filter((pl.col("target") == "sim") & (pl.col("kind") == "overall"))["missing"].to_list() == [1]
    assert inv["missing"].sum() == 1
    md = (tmp_path / "rep" / "invalid_rates.md").read_text()
    assert "missing" in md and "no_continuation" in md and "skipped" in md


def test_a_target_without_a_turn_to_judge_is_reported_as_skipped_and_does_not_fail_the_run():
    from cocoeval.run.outcome import RunSummary, bad_count, describe, tally

    empty, full = chat_without_user_turn(), instance("chat/c/1", n_hist=4, n_ref=2, chat=True)
    js = [
        Judgment(
            instance_id=empty.id,
            target="reference",
            judge_id="J",
            judge_name="J",
            kind="fine_grained",
            taxonomy_hash="t",
            status="invalid",
            reason=NO_TURNS,
        ),
        Judgment(
            instance_id=full.id,
            target="reference",
            judge_id="J",
            judge_name="J",
            kind="fine_grained",
            taxonomy_hash="t",
            status="invalid",
            reason="no JSON in the answer",
        ),
    ]
    t = tally(js)
    assert (t.total, t.invalid, t.skipped) == (2, 1, 1) and NO_TURNS not in t.reasons
    summary = RunSummary.model_validate({"judge": {"J": t.to_json()}})  # as the manifest keeps it
    assert bad_count(summary) == 1
    assert f"  judge J: 1 skipped ({NO_TURNS}; in no statistic)" in describe(summary)
    assert bad_count(RunSummary(judge={"J": tally(js[:1])})) == 0
