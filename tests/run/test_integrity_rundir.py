"""What a run directory holds that cocoeval never writes is never silently counted (issue #24):
a repeated record is refused by ``Run.open`` (file, record, fix); an ok continuation without the
reference's number of turns is invalid; continuations and judgments of instances not in
instances.jsonl are stale and said; a manifest of another cocoeval version is said."""

from __future__ import annotations

import json

import pytest

from cocoeval import __version__
from cocoeval.analysis.frames import invalid_rates, run_frames
from cocoeval.analysis.report import write_report
from cocoeval.cli import main
from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import write_jsonl
from cocoeval.core.schema import Continuation, Judgment, TurnLabel
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run
from cocoeval.run.rundir import READ_INVALID, UNKNOWN_INSTANCE

from ..sim_helpers import instance, write_run_dir

TAX = load_taxonomy()


def fine(iid: str, target: str, tid: str, n: int = 3, judge: str = "J") -> Judgment:
    return Judgment(
        instance_id=iid,
        target=tid,
        target_name=target,
        judge_id="jid" if judge == "J" else f"human:{judge}",
        judge_name=judge,
        kind="fine_grained",
        taxonomy_hash=TAX.hash,
        judged_turns=list(range(n)),
        labels=[TurnLabel(turn=t, behaviours=["repetition"] if t == 0 else []) for t in range(n)],
    )


def overall(iid: str, target: str, tid: str) -> Judgment:
    return Judgment(
        instance_id=iid,
        target=tid,
        target_name=target,
        judge_id="jid",
        judge_name="J",
        kind="overall",
        taxonomy_hash=TAX.hash,
        consistency=6,
        collaborativeness=5,
        judged_turns=[0, 1, 2],
    )


def small_run(n: int = 3) -> Run:
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=3) for i in range(n)]
    conts = {
        "sim": [Continuation(instance_id=i.id, setup_id="sid", setup_name="sim", turns=i.reference) for i in insts]
    }
    js = [
        f(i.id, t, tid)
        for i in insts
        for t, tid in (("reference", "reference"), ("sim", "sid"))
        for f in (fine, overall)
    ]
    return Run.model_validate({"instances": insts, "continuations": conts, "judgments": {"J": js}})


def write(d, run=None, manifest=None):
    write_run_dir(d, run or small_run(), manifest if manifest is not None else {"status": "complete"})
    return d


def lines(path):
    return path.read_text().splitlines()


def test_a_valid_run_directory_has_no_warning(tmp_path):
    run = Run.open(write(tmp_path, manifest={"status": "complete", "cocoeval_version": __version__, "instances": 3}))
    assert run.integrity_warnings() == []
    f = run_frames(run)
    assert set(f.continuations["status"]) == {"ok"} and set(f.judgments["status"]) == {"ok"}


# ------------------------------------------------------------------ 1. a record twice
def test_a_continuation_file_with_an_instance_twice_is_refused_naming_file_line_and_fix(tmp_path):
    path = write(tmp_path) / "continuations" / "sim.jsonl"
    ls = lines(path)
    path.write_text("\n".join([*ls, ls[1]]) + "\n")  # a hand-made merge: d/c1/0 on lines 2 and 4
    with pytest.raises(InputError) as e:
        Run.open(tmp_path)
    msg = str(e.value)
    assert str(path) in msg and "record line 4" in msg and "lines 2 and 4" in msg and "'d/c1/0'" in msg
    assert "counted twice" in msg and "remove the extra line" in (e.value.hint or "")


def test_a_judgments_file_with_a_judgment_twice_is_refused(tmp_path):
    path = write(tmp_path) / "judgments" / "J.jsonl"
    ls = lines(path)
    path.write_text("\n".join([*ls, ls[0]]) + "\n")
    with pytest.raises(InputError) as e:
        Run.open(tmp_path)
    assert str(path) in str(e.value) and f"record line {len(ls) + 1}" in str(e.value)
    assert f"lines 1 and {len(ls) + 1}" in str(e.value) and "judgment of" in str(e.value)
    # the same instance, target and kind under another judge's file is no repeat: one per judge


def test_a_human_store_with_a_judgment_twice_is_refused(tmp_path):
    run = small_run()
    write(tmp_path, run)
    path = tmp_path / "judgments" / "human" / "ann.jsonl"
    write_jsonl(path, [fine(i.id, "reference", "reference", judge="ann") for i in run.instances])
    assert path.exists() and Run.open(tmp_path).human["ann"]
    path.write_text(path.read_text() + lines(path)[0] + "\n")
    with pytest.raises(InputError, match="is here twice"):
        Run.open(tmp_path)


def test_the_report_command_refuses_a_repeated_record_with_exit_2(tmp_path, capsys):
    path = write(tmp_path / "run") / "continuations" / "sim.jsonl"
    path.write_text(path.read_text() + lines(path)[0] + "\n")
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep"), "--resamples", "20"]) == 2
    assert "is here twice" in capsys.readouterr().err


def test_a_run_written_by_a_newer_format_is_refused_and_one_without_a_format_is_read(tmp_path, capsys):
    from cocoeval.run.rundir import RUN_FORMAT

    write(tmp_path / "old")  # a manifest without "format": written before the format was versioned
    assert Run.open(tmp_path / "old").manifest.format == RUN_FORMAT
    write(tmp_path / "new", manifest={"status": "complete", "format": RUN_FORMAT + 1, "cocoeval_version": "9.0"})
    assert main(["report", str(tmp_path / "new"), "--out", str(tmp_path / "rep"), "--resamples", "20"]) == 2
    err = capsys.readouterr().err
    assert "manifest.json" in err and f"format {RUN_FORMAT + 1}, written by a newer cocoeval (9.0)" in err
    assert "upgrade cocoeval" in err


# ------------------------------------------------------------------ 2. ok with too few turns
@pytest.mark.parametrize("keep", [0, 1, 5])
def test_an_ok_continuation_without_the_references_number_of_turns_is_read_as_invalid(tmp_path, keep):
    path = write(tmp_path) / "continuations" / "sim.jsonl"
    ls = lines(path)
    c = json.loads(ls[0])
    c["turns"] = (c["turns"] * 2)[:keep]  # hand-edited: status still ok
    path.write_text("\n".join([json.dumps(c), *ls[1:]]) + "\n")
    run = Run.open(tmp_path)
    [bad] = [x for x in run.continuations["sim"] if x.instance_id == "d/c0/0"]
    assert bad.status == "invalid" and bad.reason.startswith(READ_INVALID)
    assert f"has {keep} turn(s) where the reference has 3" in bad.reason
    f = run_frames(run)
    sim = invalid_rates(f).filter(stage="simulate").row(0, named=True)
    assert (sim["n"], sim["invalid"]) == (3, 1)  # counted invalid, never a valid (empty) conversation
    # its judgments judge no current ok continuation: stale, in no mean
    js = f.judgments.filter(instance_id="d/c0/0", target="sim")
    assert set(js["status"]) == {"stale"}
    assert f.likert.filter(instance_id="d/c0/0", target="sim").is_empty()
    assert any("counted invalid" in w for w in run.integrity_warnings())


def test_the_judge_stage_reads_continuation_files_the_same_way(tmp_path):
    from cocoeval.run.rundir import checked_turns, read_continuations

    path = write(tmp_path) / "continuations" / "sim.jsonl"
    ls = lines(path)
    c = json.loads(ls[0])
    c["turns"] = []
    path.write_text("\n".join([json.dumps(c), *ls[1:]]) + "\n")
    [first, *_] = [checked_turns(x, 3) for x in read_continuations(path)]
    assert first.status == "invalid"
    path.write_text(path.read_text() + ls[1] + "\n")
    with pytest.raises(InputError, match="is here twice"):
        read_continuations(path)


# ------------------------------------------------------------------ 3. not the run's instances, other versions
def test_continuations_and_judgments_of_instances_not_in_the_run_are_stale_and_said(tmp_path):
    write(tmp_path)
    path = tmp_path / "instances.jsonl"
    path.write_text("\n".join(lines(path)[:2]) + "\n")  # d/c2/0 removed after the run
    run = Run.open(tmp_path)
    f = run_frames(run)
    gone = f.continuations.filter(instance_id="d/c2/0").row(0, named=True)
    assert (gone["status"], gone["reason"]) == ("stale", UNKNOWN_INSTANCE)
    js = f.judgments.filter(instance_id="d/c2/0")
    assert js.height == 4 and set(js["status"]) == {"stale"} and set(js["reason"]) == {UNKNOWN_INSTANCE}
    rates = invalid_rates(f)
    assert rates.filter(stage="simulate")["n"].item() == 2 and rates.filter(stage="simulate")["stale"].item() == 1
    assert (rates.filter(stage="judge")["stale"] == 1).all()
    assert "d/c2/0" not in set(f.likert["instance_id"]) | set(f.counts["instance_id"])
    w = run.integrity_warnings()
    assert any(
        x.startswith("continuations/sim.jsonl: 1 continuation(s) of instances not in instances.jsonl") for x in w
    )
    assert any(x.startswith("judgments/J.jsonl: 4 judgment(s) of instances not in instances.jsonl") for x in w)


def test_an_instances_file_of_another_size_than_the_manifest_says_is_said(tmp_path):
    write(tmp_path, manifest={"status": "complete", "instances": 4})
    [w] = Run.open(tmp_path).integrity_warnings()
    assert "says the run has 4 instances, instances.jsonl holds 3" in w


def test_an_edited_reference_length_makes_its_continuation_invalid(tmp_path):
    write(tmp_path)
    path = tmp_path / "instances.jsonl"
    ls = lines(path)
    inst = json.loads(ls[0])
    inst["reference"] = inst["reference"][:2]  # edited after the continuations were made
    path.write_text("\n".join([json.dumps(inst), *ls[1:]]) + "\n")
    [c] = [x for x in Run.open(tmp_path).continuations["sim"] if x.instance_id == "d/c0/0"]
    assert c.status == "invalid" and "where the reference has 2" in c.reason


def test_a_manifest_of_another_version_is_a_warning_in_the_report(tmp_path, capsys):
    write(tmp_path / "run", manifest={"status": "complete", "cocoeval_version": "0.0.1"})
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep"), "--resamples", "20"]) == 0
    err = capsys.readouterr().err
    assert f"warning: manifest.json was written by cocoeval 0.0.1, this is cocoeval {__version__}" in err
    index = (tmp_path / "rep" / "index.md").read_text()
    assert "**Warnings about this run directory**" in index and "cocoeval 0.0.1" in index
    rep = write_report(tmp_path / "run", tmp_path / "rep2", resamples=20)
    assert len(rep.warnings) == 1


def test_a_valid_run_reports_no_warning(tmp_path, capsys):
    write(tmp_path / "run", manifest={"status": "complete", "cocoeval_version": __version__})
    rep = write_report(tmp_path / "run", tmp_path / "rep", resamples=20)
    assert rep.warnings == () and "Warnings" not in (tmp_path / "rep" / "index.md").read_text()


def test_a_continuation_or_judgment_of_an_instance_edited_since_is_stale(tmp_path):
    """An instance edited in instances.jsonl after it was simulated and judged: what was made
    from the old version is stale (its instance hash differs), never counted."""
    from cocoeval.analysis.frames import invalid_rates, run_frames
    from cocoeval.core import Continuation, Judgment
    from cocoeval.core.jsonio import write_jsonl
    from cocoeval.run import Run

    from ..sim_helpers import instance

    inst = instance("d/c/0")
    made = inst.content_hash()
    cont = Continuation(instance_id=inst.id, setup_id="s1", setup_name="s", turns=inst.reference, instance_hash=made)
    judg = Judgment(
        instance_id=inst.id,
        target="reference",
        target_name="reference",
        judge_id="j1",
        judge_name="J",
        kind="overall",
        taxonomy_hash="t",
        consistency=5,
        collaborativeness=5,
        instance_hash=made,
    )
    d = tmp_path / "run"
    (d / "continuations").mkdir(parents=True)
    (d / "judgments").mkdir()
    (d / "manifest.json").write_text('{"status": "complete"}')
    write_jsonl(d / "continuations" / "s.jsonl", [cont])
    write_jsonl(d / "judgments" / "J.jsonl", [judg])
    write_jsonl(d / "instances.jsonl", [inst])
    run = Run.open(d)
    assert run.stale_reason("s", run.continuations["s"][0]) is None
    assert run.stale_reason("J", run.judgments["J"][0]) is None

    edited = inst.model_copy(update={"summary": inst.summary.model_copy(update={"text": "another summary"})})
    assert edited.content_hash() != made
    run.instances[0] = edited  # edited in memory (a notebook), in the same list: hashed again
    assert "edited after it was made" in (run.stale_reason("s", run.continuations["s"][0]) or "")
    write_jsonl(d / "instances.jsonl", [edited])
    run = Run.open(d)
    why = run.stale_reason("s", run.continuations["s"][0])
    assert why is not None and "edited after it was made" in why
    assert "edited after it was made" in (run.stale_reason("J", run.judgments["J"][0]) or "")
    assert run.current_continuations == {"s": []}
    rates = invalid_rates(run_frames(run))
    row = rates.filter((rates["judge"] == "J") & (rates["target"] == "reference")).row(0, named=True)
    assert row["stale"] == 1


def test_files_without_an_instance_hash_are_not_made_stale_by_it(tmp_path):
    from cocoeval.core import Continuation
    from cocoeval.run import Run

    from ..sim_helpers import instance

    inst = instance("d/c/0")
    run = Run(
        instances=[inst], continuations={"s": [Continuation(instance_id=inst.id, setup_id="s1", turns=inst.reference)]}
    )
    assert run.stale_reason("s", run.continuations["s"][0]) is None


# ------------------------------------------------------------------ 4. what the hostile campaign found (benchmarks/hostile.py)
def test_an_instances_file_with_an_instance_twice_is_refused_naming_file_and_lines(tmp_path):
    path = write(tmp_path) / "instances.jsonl"
    path.write_text(path.read_text() + lines(path)[0] + "\n")
    with pytest.raises(InputError) as e:
        Run.open(tmp_path)
    assert str(path) in str(e.value) and "lines 1 and 4" in str(e.value) and "'d/c0/0'" in str(e.value)


@pytest.mark.parametrize(
    "field,value", [("consistency", True), ("consistency", "7"), ("consistency", 7.0), ("judged_turns", [True, 1, 2])]
)
def test_a_judgment_with_true_or_a_string_for_a_number_is_refused_never_read_as_1(tmp_path, field, value):
    path = write(tmp_path) / "judgments" / "J.jsonl"
    ls = lines(path)
    i = next(n for n, ln in enumerate(ls) if json.loads(ln)["kind"] == "overall")
    j = json.loads(ls[i])
    j[field] = value
    ls[i] = json.dumps(j)
    path.write_text("\n".join(ls) + "\n")
    with pytest.raises(InputError) as e:
        Run.open(tmp_path)
    assert str(path) in str(e.value) and f"line {i + 1}" in str(e.value) and field in str(e.value)


@pytest.mark.parametrize(
    "edit,why",
    [
        (
            lambda j: j["labels"].__setitem__(0, {**j["labels"][0], "turn": 10**20}),
            "turn 100000000000000000000 is labelled",
        ),
        (lambda j: j["labels"].append(j["labels"][0]), "a turn is labelled twice"),
        (lambda j: j.__setitem__("judged_turns", [0, 1, 7]), "outside the target's 3 turns"),
        (lambda j: j.__setitem__("judged_turns", [0, 0, 1]), "a judged turn is listed twice"),
        (lambda j: (j.__setitem__("judged_turns", []), j.__setitem__("labels", [])), "no judged turn"),
    ],
)
def test_a_fine_grained_judgment_marked_ok_that_cocoeval_never_writes_is_counted_invalid(tmp_path, edit, why):
    path = write(tmp_path) / "judgments" / "J.jsonl"
    ls = lines(path)
    i = next(n for n, ln in enumerate(ls) if json.loads(ln)["kind"] == "fine_grained")
    j = json.loads(ls[i])
    edit(j)
    ls[i] = json.dumps(j)
    path.write_text("\n".join(ls) + "\n")
    run = Run.open(tmp_path)
    [bad] = [x for x in run.judgments["J"] if x.status == "invalid"]
    assert bad.reason.startswith(READ_INVALID) and why in bad.reason
    f = run_frames(run)
    assert f.counts.filter(instance_id=bad.instance_id, target=bad.target_name).is_empty()
    assert any("judgment(s) marked ok are not what cocoeval stores" in w for w in run.integrity_warnings())


def test_an_overall_judgment_marked_ok_without_its_scores_is_counted_invalid(tmp_path):
    path = write(tmp_path) / "judgments" / "J.jsonl"
    ls = lines(path)
    i = next(n for n, ln in enumerate(ls) if json.loads(ln)["kind"] == "overall")
    j = json.loads(ls[i])
    del j["consistency"]
    ls[i] = json.dumps(j)
    path.write_text("\n".join(ls) + "\n")
    [bad] = [x for x in Run.open(tmp_path).judgments["J"] if x.status == "invalid"]
    assert "without both scores" in bad.reason


def test_an_ok_continuation_with_a_turn_longer_than_its_setups_budget_is_counted_invalid(tmp_path):
    params = {"setups": [{"name": "sim", "model": "openai/gpt-4.1", "turns_per_call": 1, "max_tokens_per_turn": 50}]}
    path = write(tmp_path, manifest={"status": "complete", "params": params}) / "continuations" / "sim.jsonl"
    ls = lines(path)
    c = json.loads(ls[0])
    c["turns"][1]["text"] = "w" * 2_000_000  # a server that ignored max_tokens, or a hand edit
    path.write_text("\n".join([json.dumps(c), *ls[1:]]) + "\n")
    run = Run.open(tmp_path)
    [bad] = [x for x in run.continuations["sim"] if x.status == "invalid"]
    assert "turn 2 has 2000000 characters" in bad.reason and bad.reason.startswith(READ_INVALID)
    assert invalid_rates(run_frames(run)).filter(stage="simulate")["invalid"].item() == 1
    # a turn of a usual length is no problem, nor is a setup the manifest does not describe
    c["turns"][1]["text"] = "w" * 400
    path.write_text("\n".join([json.dumps(c), *ls[1:]]) + "\n")
    assert {x.status for x in Run.open(tmp_path).continuations["sim"]} == {"ok"}


def test_a_named_pipe_in_place_of_a_run_file_is_refused_never_waited_on(tmp_path):
    import os

    write(tmp_path)
    (tmp_path / "manifest.json").unlink()
    os.mkfifo(tmp_path / "manifest.json")
    with pytest.raises(InputError, match="named pipe"):
        Run.open(tmp_path)
