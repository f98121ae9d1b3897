"""``cocoeval run`` SIGKILLed at points through simulation and judging (judge re-asks included),
then resumed: no completed call is sent twice, and the run ends as an uninterrupted one does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from cocoeval import build
from cocoeval.analysis.frames import invalid_rates, run_frames
from cocoeval.run import Run
from tests.fakes.server import FakeServer

from ..conftest import cached_keys as _keys
from ..conftest import qmsum_meeting, write_json

SPEAKERS = ["Project Manager", "Marketing", "User Interface"]
N_INST = 2
"""Instances of the run (the benchmark's split puts some meetings aside)."""
N_TURNS = 30


def _fine(n: int) -> str:
    return json.dumps(
        {
            "turns": [
                {"turn": i, "behaviours": [{"behaviour": "Repetition", "evidence": "again"}] if i % 3 == 0 else []}
                for i in range(1, n + 1)
            ]
        }
    )


def _answers() -> list[dict]:
    whole = "\n".join(f"{SPEAKERS[i % 3]}: point number {i}" for i in range(N_TURNS))
    return [
        # judge: every first answer is unusable, every re-ask (it quotes the error) is good
        {"match": "could not be used", "context": "Continuation to annotate", "text": _fine(N_TURNS)},
        {
            "match": "could not be used",
            "context": "Continuation to evaluate",
            "text": json.dumps({"consistency": 7, "collaborativeness": 5, "rationale": "fine"}),
        },
        {"match": "Continuation to annotate", "text": '{"turns": [{"turn": 1, "behaviours": []}]}'},
        {"match": "Continuation to evaluate", "text": '{"consistency": 12, "collaborativeness": 5, "rationale": "x"}'},
        # simulation: one turn per call, or all 30 at once
        {"match": "next 1 turn", "text": "Marketing: one more point"},
        {"match": "", "text": whole},
    ]


def _setup(tmp_path, url: str, name: str):
    if not (tmp_path / "bench").exists():
        for i in range(6):
            write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
        build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    model = f"openai-compatible/fake@{url}"
    p = tmp_path / f"{name}.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "out": f"runs/{name}",
                "bench": "bench",
                "instances": {"per_dataset": N_INST},
                "setups": [
                    {"name": "k1", "model": model, "turns_per_call": 1},
                    {"name": "k30", "model": model, "turns_per_call": 30},
                ],
                "judges": [{"name": "j", "model": model, "max_attempts": 2}],
                "llm": {"cache": f"cache-{name}.sqlite", "concurrency": 2},
            }
        )
    )
    return p


def _strip(run: Run) -> tuple:
    """Continuations and judgments without their calls and ids (the model spec, hashed into
    them, names the fake server's port)."""
    conts = {k: [c.model_dump(exclude={"calls", "setup_id"}) for c in v] for k, v in run.continuations.items()}
    judg = {
        k: sorted(
            (j.model_dump(exclude={"calls", "target", "judge_id"}) for j in v),
            key=lambda d: (d["instance_id"], d["target_name"], d["kind"]),
        )
        for k, v in run.judgments.items()
    }
    return conts, judg


# calls: k1 2 x 30, k30 2; judge: (2 references + 4 continuations) x 2 kinds, each asked twice: 24
TOTAL = N_INST * N_TURNS + N_INST + 6 * N_INST * 2
KILL_AT = {"mid k1 continuation": 25, "first judge asks": N_INST * (N_TURNS + 1) + 6, "judge re-asks": TOTAL - 4}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """An uninterrupted run of the same params (its own cache): what every resumed run must equal."""
    tmp = tmp_path_factory.mktemp("clean")
    with FakeServer() as srv:
        srv.configure(answers=_answers())
        params = _setup(tmp, srv.openai_base, "clean")
        out = subprocess.run(
            [sys.executable, "-m", "cocoeval", "run", str(params), "--no-progress"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        assert srv.stats()["requests"] == TOTAL
    run = Run.open(tmp / "runs" / "clean")
    assert len(run.instances) == N_INST
    assert all(c.status == "ok" for cs in run.continuations.values() for c in cs)
    assert {(j.status, j.attempts) for j in run.judgments["j"]} == {("ok", 2)}
    return run


@pytest.mark.parametrize("where", list(KILL_AT))
def test_sigkill_then_resume_sends_no_completed_call_twice(tmp_path, clean, where):
    with FakeServer(latency_s=0.03) as srv:
        srv.configure(answers=_answers())
        params = _setup(tmp_path, srv.openai_base, "exp")
        cmd = [sys.executable, "-m", "cocoeval", "run", str(params), "--no-progress"]
        cache = tmp_path / "cache-exp.sqlite"
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while len(_keys(cache)) < KILL_AT[where] and time.time() < deadline and p.poll() is None:
            time.sleep(0.01)
        p.send_signal(signal.SIGKILL)
        assert p.wait(timeout=60) == -signal.SIGKILL
        done = _keys(cache)
        first = srv.stats()["requests"]
        assert KILL_AT[where] <= len(done) < TOTAL and first >= len(done)
        # what the killed run left: nothing failed, so nothing is invalid; what it had not
        # finished is missing (never an invalid continuation or judgment)
        killed = run_frames(Run.open(tmp_path / "runs" / "exp"))
        assert invalid_rates(killed)["invalid"].sum() == 0
        if where == "mid k1 continuation":
            assert set(killed.missing.filter(killed.missing["stage"] == "simulate")["target"]) == {"k1"}
        srv.reset()
        srv.configure(answers=_answers())
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        everything = _keys(cache)
        assert len(everything) == TOTAL
        # the resumed run sends each call that had not completed once, and nothing else
        assert srv.stats()["requests"] == len(everything - done)
        resumed = Run.open(tmp_path / "runs" / "exp")
    assert _strip(resumed) == _strip(clean)
    usage = json.loads((tmp_path / "runs" / "exp" / "usage.json").read_text())
    assert usage["totals"]["calls"] == TOTAL and usage["totals"]["cache_hits"] == len(done)
    # what the killed invocation paid is counted too (from the usage journal), not dropped
    [killed] = [e for e in usage["earlier_invocations"] if e.get("not_in_usage_json")]
    assert usage["all_invocations"]["invocations"] == 2
    assert len(done) - 2 <= killed["totals"]["calls"] <= first  # a kill may fall between caching and counting
    assert (
        usage["all_invocations"]["input_tokens"] == usage["totals"]["input_tokens"] + killed["totals"]["input_tokens"]
    )


def test_agents_run_killed_mid_way_resumes_without_repeating_a_call(tmp_path):
    """``simulator: agents`` (one call per turn, the moderator's calls too) SIGKILLed mid-run: the
    resumed run sends only the calls that had not completed, and ends as an uninterrupted run."""
    answers = [{"match": "Who speaks next", "text": "Marketing"}, {"match": "", "text": "I would add one thing."}]
    per_run = N_INST * N_TURNS * 2  # a moderator call and an agent call per turn

    def params(name: str, url: str):
        p = _setup(tmp_path, url, name)
        data = yaml.safe_load(p.read_text())
        data.update(
            setups=[
                {
                    "name": "ag",
                    "simulator": "agents",
                    "model": f"openai-compatible/fake@{url}",
                    "options": {"policy": "moderator"},
                }
            ],
            judges=[],
        )
        p.write_text(yaml.safe_dump(data))
        return p

    with FakeServer() as srv:
        srv.configure(answers=answers)
        out = subprocess.run(
            [sys.executable, "-m", "cocoeval", "run", str(params("clean", srv.openai_base)), "--no-progress"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        assert srv.stats()["requests"] == per_run
    clean = Run.open(tmp_path / "runs" / "clean")
    with FakeServer(latency_s=0.03) as srv:
        srv.configure(answers=answers)
        cmd = [sys.executable, "-m", "cocoeval", "run", str(params("exp", srv.openai_base)), "--no-progress"]
        cache = tmp_path / "cache-exp.sqlite"
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while len(_keys(cache)) < per_run // 2 and time.time() < deadline and p.poll() is None:
            time.sleep(0.01)
        p.send_signal(signal.SIGKILL)
        assert p.wait(timeout=60) == -signal.SIGKILL
        done = _keys(cache)
        assert per_run // 2 <= len(done) < per_run
        srv.reset()
        srv.configure(answers=answers)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert len(_keys(cache)) == per_run
        assert srv.stats()["requests"] == per_run - len(done)  # nothing completed is sent again
    resumed = Run.open(tmp_path / "runs" / "exp")
    assert _strip(resumed)[0] == _strip(clean)[0]
    assert all(c.status == "ok" and len(c.calls) == 2 * N_TURNS for c in resumed.continuations["ag"])
