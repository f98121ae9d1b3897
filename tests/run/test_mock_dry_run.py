"""A dry run of a params file on the mock model: every stage runs in this process, no socket."""

from __future__ import annotations

import json

import yaml

from cocoeval import build
from cocoeval.cli import main
from cocoeval.llm.providers.mock import MockProvider
from cocoeval.run import Run

from ..conftest import qmsum_meeting, write_json

SPEAKERS = ["Project Manager", "Marketing", "User Interface"]


def test_a_params_file_on_the_mock_model_runs_every_stage_and_a_rerun_sends_nothing(tmp_path, monkeypatch):
    MockProvider.reset()
    for i in range(2):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    fine = json.dumps({"turns": [{"turn": i, "behaviours": []} for i in range(1, 31)]})
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "answers": [
                    {"match": "Continuation to annotate", "text": fine},
                    {
                        "match": "Continuation to evaluate",
                        "text": '{"consistency": 8, "collaborativeness": 7, "rationale": "ok"}',
                    },
                    {"match": "", "text": "\n".join(f"{SPEAKERS[i % 3]}: point {i}" for i in range(30))},
                ]
            }
        )
    )
    params = tmp_path / "dry.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "name": "dry",
                "out": "runs/dry",
                "bench": "bench",
                "setups": [{"name": "s", "model": f"mock/{script}"}],
                "judges": [{"name": "j", "model": f"mock/{script}"}],
                "llm": {"cache": "cache.sqlite"},
            }
        )
    )
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(params), "--no-progress"]) == 0
    run = Run.open(tmp_path / "runs" / "dry")
    n = len(run.instances)
    assert n > 0 and all(c.status == "ok" and len(c.turns) == 30 for c in run.continuations["s"])
    assert len(run.judgments["j"]) == n * 2 * 2 and all(j.status == "ok" for j in run.judgments["j"])
    usage = json.loads((tmp_path / "runs" / "dry" / "usage.json").read_text())
    assert usage["requests_sent"] == n + n * 2 * 2 and usage["all_invocations"]["cost_usd"] == 0
    assert main(["run", str(params), "--no-progress"]) == 0  # resumed: every answer from the call cache
    usage = json.loads((tmp_path / "runs" / "dry" / "usage.json").read_text())
    assert usage["requests_sent"] == 0 and usage["cache"]["hits"] == n + n * 2 * 2
