"""The judge-free classifier test through the command line, as docs/analysis.md gives it:
``cocoeval run`` a small run against the fake provider, then ``cocoeval report --html``: the
report's judge-free section lists the ``detectability`` table and figure, the leaderboard has the
``auc`` columns beside the distance (the floor row's from humans against humans), the HTML report
shows the section."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import yaml

from cocoeval import build
from tests.fakes.server import FakeServer

from ..conftest import qmsum_meeting, write_json

SPEAKERS = ["Project Manager", "Marketing", "User Interface"]
CANNED = "\n".join(f"{SPEAKERS[i % 3]}: I think point number {i} is good!" for i in range(30))
FINE = json.dumps({"turns": [{"turn": i, "behaviours": []} for i in range(1, 31)]})
ANSWERS = [
    {"match": "Continuation to annotate", "text": FINE},
    {"match": "Continuation to evaluate", "text": json.dumps({"consistency": 7, "collaborativeness": 6})},
    {"match": "", "text": CANNED},
]


def cli(*args):
    out = subprocess.run(
        [sys.executable, "-m", "cocoeval", *map(str, args)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def _csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_run_and_report_show_the_classifier_test_beside_the_leaderboards_distance(tmp_path):
    for i in range(12):  # 11 meetings of the eval split, most with two windows
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(150 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    with FakeServer() as srv:
        srv.configure(answers=ANSWERS)
        model = f"openai-compatible/fake@{srv.openai_base}"
        params = tmp_path / "p.yaml"
        params.write_text(
            yaml.safe_dump(
                {
                    "name": "p",
                    "out": "runs/p",
                    "bench": "bench",
                    "setups": [{"name": "canned", "model": model, "turns_per_call": 30}],
                    "judges": [{"name": "j", "model": model, "kind": ["fine_grained"]}],
                    "llm": {"cache": "cache.sqlite"},
                }
            )
        )
        cli("run", params, "--no-progress")
    run = tmp_path / "runs" / "p"
    cli("report", run, "--out", tmp_path / "report", "--html")
    rep = tmp_path / "report"
    rows = {r["target"]: r for r in _csv(rep / "detectability.csv")}
    floor = rows["floor: humans vs humans"]
    assert floor["comparison"] == "humans vs humans: other windows of the same conversations"
    assert float(floor["auc"]) < 0.9 and int(floor["n"]) >= 10  # the humans' windows: no canned difference
    canned = rows["canned"]
    assert float(canned["auc"]) == 1.0 and float(canned["p"]) <= 0.01 and int(canned["conversations"]) == 11
    assert canned["continuations_ok"] == canned["continuations"] == canned["n"]
    index = (rep / "index.md").read_text()
    free = index[index.index("## Judge-free statistics") : index.index("## Leaderboard of simulators")]
    assert "**detectability**: Beyond the paper" in free and "[detectability.csv]" in free
    assert (rep / "detectability.svg").exists() or (rep / "detectability.png").exists()
    board = {r["setup"]: r for r in _csv(rep / "leaderboard.csv")}
    assert float(board["canned"]["auc"]) == 1.0 and board["canned"]["distance"] != ""
    assert board["floor: two halves of the humans"]["auc"] == floor["auc"]
    html = (rep / "index.html").read_text()
    assert "detectability" in html and "Beyond the paper: can a classifier tell" in html
