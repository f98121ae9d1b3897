"""Ctrl-C during ``cocoeval run``: one line on stderr saying what was kept and how to resume, exit
130, a manifest that does not claim "complete", and the same command run again finishes the run
without sending any call that had completed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import yaml

from cocoeval import build
from tests.fakes.server import FakeServer

from ..conftest import cached_keys as _keys
from ..conftest import qmsum_meeting, write_json

N_INST, N_TURNS = 2, 30
TOTAL = N_INST * N_TURNS + N_INST * 2  # one call per simulated turn, then one judge call per target


def test_ctrl_c_during_a_run_prints_one_line_exits_130_and_the_same_command_resumes_it(tmp_path):
    for i in range(6):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    answers = [
        {
            "match": "Continuation to evaluate",
            "text": json.dumps({"consistency": 7, "collaborativeness": 5, "rationale": "fine"}),
        },
        {"match": "", "text": "Marketing: one more point"},
    ]
    with FakeServer(latency_s=0.03) as srv:
        srv.configure(answers=answers)
        model = f"openai-compatible/fake@{srv.openai_base}"
        params = tmp_path / "p.yaml"
        params.write_text(
            yaml.safe_dump(
                {
                    "name": "p",
                    "out": "runs/p",
                    "bench": "bench",
                    "instances": {"per_dataset": N_INST},
                    "setups": [{"name": "k1", "model": model, "turns_per_call": 1}],
                    "judges": [{"name": "j", "model": model, "kind": ["overall"], "max_attempts": 1}],
                    "llm": {"cache": "cache.sqlite", "concurrency": 2},
                }
            )
        )
        cmd = [sys.executable, "-m", "cocoeval", "run", str(params), "--no-progress"]
        cache = tmp_path / "cache.sqlite"
        p = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while len(_keys(cache)) < TOTAL // 3 and time.time() < deadline and p.poll() is None:
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert err.startswith("interrupted: ") and "call cache" in err and f"cocoeval run {params}" in err
        done = _keys(cache)
        assert TOTAL // 3 <= len(done) < TOTAL
        manifest = json.loads((tmp_path / "runs" / "p" / "manifest.json").read_text())
        assert manifest["status"] == "interrupted" and not manifest.get("summary")
        srv.reset()
        srv.configure(answers=answers)
        again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert len(_keys(cache)) == TOTAL
        assert srv.stats()["requests"] == TOTAL - len(done)  # no completed call is sent again
    manifest = json.loads((tmp_path / "runs" / "p" / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert (
        manifest["summary"]["simulate"]["k1"]["ok"] == N_INST and manifest["summary"]["judge"]["j"]["ok"] == 2 * N_INST
    )
