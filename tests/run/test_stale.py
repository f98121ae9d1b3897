"""Settings changed after a run: what the run directory still holds from the earlier settings is
stale in the frames (never counted under the new settings), whichever stage ran last."""

from __future__ import annotations

import json

from cocoeval.analysis.convstats import conversation_frame
from cocoeval.analysis.frames import invalid_rates, run_frames
from cocoeval.run import Run, load_params

from ..conftest import ROOT
from ..sim_helpers import fake_params_file

SPEAKERS = ["Project Manager", "Marketing", "User Interface"]
WHOLE = "\n".join(f"{SPEAKERS[i % 3]}: point number {i}" for i in range(30))
FINE = json.dumps({"turns": [{"turn": i, "behaviours": []} for i in range(1, 31)]})
OVERALL = json.dumps({"consistency": 7, "collaborativeness": 5, "rationale": "fine"})


def _params(tmp_path, srv, setup_temp=0.0, judge_temp=0.0, prompt="vanilla"):
    return load_params(fake_params_file(tmp_path, srv, setup_temp, judge_temp, prompt))


def _script(srv):
    srv.configure(
        answers=[
            {"match": "Continuation to annotate", "text": FINE},
            {"match": "Continuation to evaluate", "text": OVERALL},
            {"match": "", "text": WHOLE},
        ]
    )


def _counted(f, stage):
    rates = invalid_rates(f)
    return rates.filter(rates["stage"] == stage)


def test_a_judge_changed_then_only_simulate_run_leaves_its_old_judgments_stale(srv, tmp_path):
    _script(srv)
    _params(tmp_path, srv).run(progress=False)
    f = run_frames(Run.open(tmp_path / "runs" / "exp"))
    assert set(f.judgments["status"]) == {"ok"} and len(f.likert) == 2 * len(f.instances)
    _params(tmp_path, srv, judge_temp=0.5).run(("simulate",), progress=False)  # the judge is not run again
    f = run_frames(Run.open(tmp_path / "runs" / "exp"))
    assert set(f.judgments["status"]) == {"stale"}
    assert all("judge" in r for r in f.judgments["reason"])
    assert f.likert.is_empty() and f.counts.is_empty()  # never counted under the new judge settings
    j = _counted(f, "judge")
    assert j["n"].sum() == 0 and j["missing"].sum() == j["stale"].sum() == f.judgments.height


def test_a_setup_changed_then_only_judge_run_leaves_its_old_continuations_stale(srv, tmp_path):
    _script(srv)
    _params(tmp_path, srv).run(progress=False)
    _params(tmp_path, srv, setup_temp=0.5).run(("judge",), progress=False)  # not simulated again
    run = Run.open(tmp_path / "runs" / "exp")
    assert all(c.setup_id != run.manifest.setups["s"] for c in run.continuations["s"])
    f = run_frames(run)
    assert set(f.continuations["status"]) == {"stale"}
    s = _counted(f, "simulate")
    assert (s["n"].sum(), s["stale"].sum(), s["missing"].sum()) == (0, len(f.instances), len(f.instances))
    # their judgments are stale too; the human reference's are current
    js = f.judgments
    assert set(js.filter(js["target"] == "s")["status"]) == {"stale"}
    assert set(js.filter(js["target"] == "reference")["status"]) == {"ok"}
    assert set(f.likert["target"]) == {"reference"}
    # nor do the judge-free statistics count them
    assert set(conversation_frame(run)["target"]) == {"reference"}


def test_a_changed_prompt_file_makes_the_old_continuations_stale(srv, tmp_path):
    _script(srv)
    prompt = tmp_path / "mine.yaml"
    prompt.write_text(
        (ROOT / "cocoeval" / "prompts" / "vanilla.yaml").read_text().replace("name: vanilla", "name: mine")
    )
    _params(tmp_path, srv, prompt=str(prompt)).run(progress=False)
    prompt.write_text(prompt.read_text().replace("human-like", "lifelike"))
    _params(tmp_path, srv, prompt=str(prompt)).run(("judge",), progress=False)
    f = run_frames(Run.open(tmp_path / "runs" / "exp"))
    assert set(f.continuations["status"]) == {"stale"}
    assert f.likert.filter(f.likert["target"] == "s").is_empty()


def test_a_prompt_file_edited_in_a_running_session_is_read_again(tmp_path):
    """In a notebook the same process loads the prompt before and after the edit."""
    from cocoeval.prompts.files import load_prompt

    prompt = tmp_path / "mine.yaml"
    prompt.write_text("name: mine\nversion: 1\nsystem: Continue the meeting.\nuser: go\n")
    before = load_prompt(str(prompt))
    prompt.write_text("name: mine\nversion: 1\nsystem: Continue the meeting, briefly.\nuser: go\n")
    after = load_prompt(str(prompt))
    assert after.system == "Continue the meeting, briefly." and after.ref != before.ref


def test_a_setup_and_judge_that_select_no_instance_leave_a_readable_run(srv, tmp_path):
    _script(srv)
    exp = _params(tmp_path, srv)
    exp.params.setups[0].datasets = ["no_such_dataset"]
    exp.params.judges[0].datasets = ["no_such_dataset"]
    exp.run(progress=False)
    run = Run.open(tmp_path / "runs" / "exp")  # no empty file, which no reader accepts
    assert run.continuations == {} and run.judgments == {} and srv.stats()["requests"] == 0
