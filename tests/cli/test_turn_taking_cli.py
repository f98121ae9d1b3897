"""Turn-taking through the real ``cocoeval`` command line, offline on the in-process mock model:
``cocoeval run`` with an agents setup of each new policy (round robin, addressee, self-selection)
beside the oracle, judged; then ``cocoeval report --html`` has the next-speaker, run-length,
per-speaker fidelity and self-selection tables (Markdown, CSV and in the HTML page), each marked
beyond the paper, with values that follow from the policies."""

from __future__ import annotations

import csv
import itertools
import json
import random
from pathlib import Path

import yaml

from cocoeval import build

from ..conftest import write_json
from .test_documented_walkthroughs import cocoeval
from .test_simulators_cli import FINE

PEOPLE = ["Project Manager", "Marketing", "User Interface"]


def meeting(seed: int, n: int = 90) -> dict:
    """A QMSum-shaped meeting whose speakers take turns at random, some turns naming the next."""
    rng = random.Random(seed)
    turns, s = [], 0
    for i in range(n):
        nxt = rng.choice([p for p in range(3) if p != s] + [s])
        said = f"{PEOPLE[nxt]}, your view on item {i}?" if rng.random() < 0.5 and nxt != s else f"Point {i} on budget."
        turns.append({"speaker": PEOPLE[s], "content": said})
        s = nxt
    return {
        "topic_list": [{"topic": "Budget", "relevant_text_span": [["0", str(n - 1)]]}],
        "meeting_transcripts": turns,
    }


SCRIPT = {
    "answers": [
        {"match": "Continuation to annotate", "text": FINE},
        {
            "match": "Continuation to evaluate",
            "text": json.dumps({"consistency": 7, "collaborativeness": 6, "rationale": "fine"}),
        },
        # self-selection: Marketing passes, the others speak (naming Marketing)
        {"match": "single word PASS", "context": "You are Marketing", "text": "PASS"},
        {"match": "single word PASS", "text": "Marketing, what do you think?"},
        # an agent's turn: Project Manager hands over to User Interface, the others name no one
        {"match": "It is Project Manager's turn", "text": "User Interface, over to you."},
        {"match": "'s turn", "text": "I see the point about the budget."},
    ]
}


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_each_new_policy_runs_and_the_report_shows_the_turn_taking_tables(tmp_path):
    for i in range(4):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", meeting(i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    model = f"mock/{tmp_path / 'script.yaml'}"
    policies = ["oracle", "round_robin", "addressee", "self_selection"]
    (tmp_path / "p.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "instances": {"per_dataset": 3},
                "judges": [{"name": "j", "model": model}],
                "setups": [
                    {
                        "name": f"ag-{p.replace('_', '-')}",
                        "simulator": "agents",
                        "model": model,
                        "options": {"policy": p},
                    }
                    for p in policies
                ],
                "llm": {"cache": "cache.sqlite"},
            },
            sort_keys=False,
        )
    )
    out = cocoeval(tmp_path, "run", "p.yaml", "--no-progress").stdout
    for p in policies:
        assert f"ag-{p.replace('_', '-')}" in out
    run = tmp_path / "runs" / "p"
    conts = {
        p: [json.loads(x) for x in (run / "continuations" / f"ag-{p.replace('_', '-')}.jsonl").read_text().splitlines()]
        for p in policies
    }
    assert all(c["status"] == "ok" for cs in conts.values() for c in cs), conts
    # self-selection: Marketing always passes, so never speaks; its passes are noted
    assert all(t["speaker"] != "Marketing" for c in conts["self_selection"] for t in c["turns"])
    # addressee: after Project Manager's "User Interface, over to you." User Interface speaks
    for c in conts["addressee"]:
        for a, b in itertools.pairwise(c["turns"]):
            if a["speaker"] == "Project Manager":
                assert b["speaker"] == "User Interface"
    # round robin: M's order (as the builder listed the participants of each instance), one after the other
    order = {
        i["id"]: [x["name"] for x in i["metadata"]["participants"]]
        for i in map(json.loads, (run / "instances.jsonl").read_text().splitlines())
    }
    for c in conts["round_robin"]:
        m = order[c["instance_id"]]
        sp = [t["speaker"] for t in c["turns"]]
        assert all(m.index(b) == (m.index(a) + 1) % len(m) for a, b in itertools.pairwise(sp))

    cocoeval(tmp_path, "report", "runs/p", "--out", "report", "--html", "--resamples", "100", "--min-n", "2")
    rep = tmp_path / "report"
    index = (rep / "index.md").read_text()
    judge_free = index[index.index("## Judge-free statistics") : index.index("## Leaderboard of simulators")]
    for name in ("next_speaker", "run_lengths", "run_lengths_per_speaker", "self_selection"):
        assert f"[{name}.csv]" in judge_free and f"[{name}.md]" in judge_free, name
        assert (rep / f"{name}.md").read_text().startswith("# Beyond the paper")
    assert "[speaker_fidelity.csv]" in index  # judge-based: listed with the judge's tables
    assert (rep / "next_speaker.png").is_file() and (rep / "run_lengths.svg").is_file()

    acc = {r["predictor"]: r for r in _csv(rep / "next_speaker.csv")}
    assert {"same_as_previous", "most_frequent", "history", "round_robin", "addressee"} <= set(acc)
    assert acc["ag-oracle"]["accuracy"] == "1.0"  # the oracle's speakers are the reference's
    assert "free-running" in acc["ag-round-robin"]["kind"] and acc["round_robin"]["kind"] == "teacher-forced"
    assert acc["ag-self-selection"]["what"] == "agents, policy self_selection"
    runs = {r["target"]: r for r in _csv(rep / "run_lengths.csv")}
    assert float(runs["ag-round-robin"]["mean_run"]) == 1.0 and float(runs["ag-round-robin"]["share_1"]) == 1.0
    assert float(runs["ag-oracle"]["mean_run"]) == float(runs["reference"]["mean_run"])
    [sel] = _csv(rep / "self_selection.csv")
    assert sel["setup"] == "ag-self-selection" and int(sel["malformed"]) == 0
    assert int(sel["passes"]) > 0 and int(sel["turns_chosen"]) == 30 * len(conts["self_selection"])
    fid = _csv(rep / "speaker_fidelity.csv")
    assert {r["setup"] for r in fid} >= {"ag-oracle", "ag-addressee"} and all(r["judge"] == "j" for r in fid)
    html = (rep / "index.html").read_text()
    assert "next_speaker" in html and "run_lengths" in html and "Beyond the paper: next-speaker accuracy" in html
