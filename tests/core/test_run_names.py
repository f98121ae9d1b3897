"""Names that become file names, orphan continuation files, and the exit status of cocoeval run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from cocoeval import build
from cocoeval.cli import main
from cocoeval.core.errors import ConfigError
from cocoeval.core.names import child_path
from cocoeval.run import Run, load_params
from cocoeval.simulate.setup import Setup

from ..conftest import qmsum_meeting, write_json

ANSWER = (
    "\n".join(f"{s}: point number {i}" for i, s in enumerate(["Project Manager", "Marketing", "User Interface"] * 2))
    + "\n"
)
OVERALL = '{"consistency": 8, "collaborativeness": 7, "rationale": "fine"}'
FINE = json.dumps({"turns": [{"turn": i, "behaviours": []} for i in range(1, 31)]})


def _bench(tmp_path):
    for i in range(2):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")


def _write(tmp_path, doc, name="p"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(
        yaml.safe_dump({"name": name, "out": f"runs/{name}", "bench": "bench", "llm": {"cache": "cache.sqlite"}, **doc})
    )
    return p


def _cli(params, *flags):
    return subprocess.run(
        [sys.executable, "-m", "cocoeval", "run", str(params), "--no-progress", *flags],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize(
    "doc,key,problem",
    [
        ({"setups": [{"name": "../x", "model": "openai/gpt-4.1"}]}, "setups[0].name", "cannot be a file name"),
        (
            {"setups": [{"name": "ok", "model": "openai/gpt-4.1"}, {"name": "a/b", "model": "openai/gpt-4.1"}]},
            "setups[1].name",
            "cannot be a file name",
        ),
        ({"setups": [{"name": "", "model": "openai/gpt-4.1"}]}, "setups[0].name", "cannot be a file name"),
        ({"setups": [{"name": ".", "model": "openai/gpt-4.1"}]}, "setups[0].name", "cannot be a file name"),
        ({"setups": [{"name": "a..b", "model": "openai/gpt-4.1"}]}, "setups[0].name", "cannot be a file name"),
        ({"setups": [{"name": "x\n", "model": "openai/gpt-4.1"}]}, "setups[0].name", "cannot be a file name"),
        ({"setups": [{"name": "Reference", "model": "openai/gpt-4.1"}]}, "setups[0].name", "reserved"),
        ({"judges": [{"name": "human", "model": "openai/o4-mini"}]}, "judges[0].name", "reserved for human"),
        ({"judges": [{"name": "Human", "model": "openai/o4-mini"}]}, "judges[0].name", "reserved for human"),
        ({"judges": [{"name": "human:ann1", "model": "openai/o4-mini"}]}, "judges[0].name", "cannot be a file name"),
        (
            {"judges": [{"name": "j", "model": "openai/o4-mini"}, {"name": "J", "model": "openai/o4-mini"}]},
            "judges",
            "unique (ignoring case); repeated: J, j",
        ),
        ({"name": "../x"}, "name", "run name '../x' cannot be a file name"),
    ],
)
@pytest.mark.parametrize("command", ["check", "run"])
def test_unsafe_names_are_refused_with_exit_2_naming_file_key_and_fix(tmp_path, capsys, doc, key, problem, command):
    p = _write(tmp_path, doc)
    assert main([command, str(p)]) == 2
    err = capsys.readouterr().err
    assert str(p) in err and key in err and problem in err, err
    if "file name" in problem:
        assert "letters, digits" in err  # the fix: what a name may be made of
    assert not (tmp_path / "runs").exists() and not (tmp_path / "x").exists()


def test_a_name_set_after_loading_cannot_write_outside_the_run_directory(tmp_path):
    p = _write(tmp_path, {"setups": [{"name": "ok", "model": "openai/gpt-4.1"}]})
    exp = load_params(p)
    exp.params.setups.append(Setup(name="../../escaped", model="openai/gpt-4.1"))
    with pytest.raises(ConfigError, match=r"p\.yaml: setup name '\.\./\.\./escaped' cannot be a file name"):
        exp.run()
    exp.params.setups[-1] = Setup(name="OK", model="openai/gpt-4.1")  # collides with 'ok' on some file systems
    with pytest.raises(ConfigError, match="unique"):
        exp.run()
    assert not (tmp_path / "runs").exists() and not list(tmp_path.rglob("escaped*"))
    with pytest.raises(ConfigError, match="reserved"):
        child_path(tmp_path / "judgments", "human", kind="judge")
    assert child_path(tmp_path / "c", "gpt41-vanilla-30") == tmp_path / "c" / "gpt41-vanilla-30.jsonl"


def test_run_exits_3_with_a_summary_when_something_ended_invalid_or_failed_and_0_when_allowed(tmp_path, srv):
    _bench(tmp_path)
    model = f"openai-compatible/fake@{srv.openai_base}"
    srv.configure(
        faults=[{"match": "next 5 turns", "kind": "context_length", "times": -1}],
        answers=[
            {"match": "Continuation to annotate", "text": "no JSON here, sorry"},
            {"match": "Continuation to evaluate", "text": OVERALL},
            {"match": "", "text": ANSWER * 5},
        ],
    )
    p = _write(
        tmp_path,
        {
            "setups": [{"name": "k30", "model": model}, {"name": "k5", "model": model, "turns_per_call": 5}],
            "judges": [{"name": "judge1", "model": model, "max_attempts": 1}],
        },
    )
    out = _cli(p)
    assert out.returncode == 3, out.stderr
    n = len(Run.open(tmp_path / "runs" / "p").instances)
    err = out.stderr
    assert f"summary: {n + 2 * n} continuation(s) or judgment(s) ended invalid or failed" in err
    assert f"setup k5: 0 ok, 0 invalid, {n} failed of {n}" in err
    assert f"{n} x call failed at turn N: context_length" in err
    assert f"judge judge1: {2 * n} ok, {2 * n} invalid, 0 failed of {4 * n}" in err  # fine-grained ones
    assert "a re-run sends them again" in err and "exit status 3" in err and "--allow-invalid" in err
    assert "setup k30" not in err  # all ok: not in the summary of problems
    m = Run.open(tmp_path / "runs" / "p").manifest
    assert m.status == "complete" and m.summary["simulate"]["k5"]["failed"] == n

    srv.reset()
    srv.configure(faults=[{"match": "next 5 turns", "kind": "context_length", "times": -1}])
    again = _cli(p, "--allow-invalid")
    assert again.returncode == 0, again.stderr
    assert "exit status 0: --allow-invalid" in again.stderr and f"setup k5: 0 ok, 0 invalid, {n} failed" in again.stderr
    assert srv.stats()["requests"] == n  # only the failed calls were sent again; invalid answers are cached


def test_judge_stage_judges_every_setup_file_and_reports_files_no_setup_names(tmp_path, srv):
    _bench(tmp_path)
    model = f"openai-compatible/fake@{srv.openai_base}"
    srv.configure(
        answers=[
            {"match": "Continuation to annotate", "text": FINE},
            {"match": "Continuation to evaluate", "text": OVERALL},
            {"match": "", "text": ANSWER * 5},
        ]
    )
    v1 = _write(tmp_path, {"setups": [{"name": "old", "model": model}, {"name": "k30", "model": model}]}, "v")
    assert _cli(v1).returncode == 0
    cdir = tmp_path / "runs" / "v" / "continuations"
    (cdir / "a").mkdir()
    shutil.copy(cdir / "k30.jsonl", cdir / "a" / "b.jsonl")  # as the former 'a/b' setup name wrote it
    v2 = _write(
        tmp_path,
        {
            "setups": [{"name": "k30", "model": model}, {"name": "fresh", "model": model}],
            "judges": [{"name": "judge1", "model": model}],
        },
        "v",
    )
    out = _cli(v2, "--stage", "judge")
    assert out.returncode == 0, out.stderr
    run = Run.open(tmp_path / "runs" / "v")
    n = len(run.instances)
    js = run.judgments["judge1"]
    assert sorted({j.target_name for j in js}) == ["k30", "reference"] and len(js) == 2 * n * 2
    warnings = run.manifest.summary["warnings"]
    assert any(
        w.startswith("continuations/old.jsonl: continuations of no setup in") and "not judged" in w for w in warnings
    )
    assert any(w.startswith("continuations/a/b.jsonl: continuations of no setup") for w in warnings)
    assert any(w.startswith("setup fresh: no continuations/fresh.jsonl") for w in warnings)
    assert len(warnings) == 3
    for w in warnings:
        assert f"warning: {w}" in out.stderr
    assert "3 warning(s)" in out.stderr
    assert run.manifest.summary["simulate_from_files"] is True
    assert run.manifest.summary["simulate"]["k30"]["ok"] == n
