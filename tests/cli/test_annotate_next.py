"""docs/judging.md, "Validating a judge", the loop with annotate-next (beyond the paper, issue #46
items 2-3), run command by command through the real ``cocoeval`` command line, offline: a random
round exported and imported, ``annotate-next --budget`` drawing the next round with recorded
inclusion probabilities, that round imported, and the report's corrected rates weighting each
label by 1/π with intervals."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import yaml

from cocoeval import build
from cocoeval.analysis.active import FLOOR, Round, design_estimate

from ..conftest import qmsum_meeting, write_json
from .test_documented_walkthroughs import _csv, cocoeval
from .test_simulators_cli import ANSWERS

MEETINGS = 26  # of ~200 turns: about 3 windows each, so windows of one meeting are clustered


def _world(tmp_path: Path, srv) -> Path:
    for i in range(MEETINGS):
        write_json(tmp_path / "src" / ("product" if i % 2 else "academic") / f"M{i}.json", qmsum_meeting(200 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    srv.configure(answers=ANSWERS)
    model = f"openai-compatible/fake@{srv.openai_base}"
    (tmp_path / "p.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "judges": [{"name": "j", "model": model, "kind": ["fine_grained"]}],
                "setups": [{"name": "k30", "turns_per_call": 30, "model": model}],
                "llm": {"cache": "cache.sqlite"},
            }
        )
    )
    return tmp_path


def _fill(template: Path, out: Path, annotator: str) -> None:
    """An annotator's copy of ``template.csv``: Repetition on some turns, more on some items than
    on others (so the humans' counts vary over conversations), ``none`` on the rest."""
    rows = list(csv.DictReader(template.open(newline="")))
    for r in rows:
        r["annotator"] = annotator
        k = int(r["item_id"], 16)
        r["behaviours"] = "Repetition" if (k % 7 + int(r["turn"])) % (3 + k % 4) == 0 else "none"
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_the_annotate_next_loop_runs_step_by_step_and_the_corrected_rates_use_its_probabilities(tmp_path, srv):
    cwd = _world(tmp_path, srv)
    cocoeval(cwd, "run", "p.yaml", "--no-progress")
    run = Path("runs/p")
    n = len((cwd / run / "instances.jsonl").read_text().splitlines())
    assert n >= 60, n
    record_file = cwd / run / "annotation" / "random_draws.json"

    # 1. a random round, annotated and imported
    cocoeval(cwd, "annotate-export", run, "--out", "annotate/", "--random", 20)
    _fill(cwd / "annotate" / "template.csv", cwd / "filled1.csv", "ann1")
    cocoeval(cwd, "annotate-import", "filled1.csv", run, "--key", "annotate/key.json")

    # 2. annotate-next: the next 20 of each target, drawn with recorded inclusion probabilities
    out = cocoeval(cwd, "annotate-next", run, "--budget", 20, "--out", "next-1/", "--html").stdout
    assert (cwd / "next-1" / "annotate.html").is_file() and "next-1/annotate.html: the annotation page" in out
    assert "annotate-next (beyond the paper): 20 conversation(s) of each target for judge j" in out
    for target in ("reference", "k30"):
        assert f"  {target}: 20 of {n - 20} not yet labelled" in out
        assert "no corrected interval yet (20 labelled)" in out  # below MIN_LABELLED
    assert "recorded as draw 2 in runs/p/annotation/random_draws.json" in out
    first, second = json.loads(record_file.read_text())["draws"]
    assert second["mode"] == "active" and second["judge"] == "j" and "Zrnic and Candès" in second["method"]
    drawn = {tuple(x) for x in second["targets"]}
    assert len(drawn) == 40 and not drawn & {tuple(x) for x in first["targets"]}
    for target in ("reference", "k30"):
        pi = second["inclusion"][target]
        assert len(pi) == n - 20 and abs(sum(pi.values()) - 20) < 1e-6
        assert min(pi.values()) >= FLOOR * 20 / (n - 20) - 1e-9 and max(pi.values()) <= 1
        assert all(i in pi for i, t in drawn if t == target)
    key = json.loads((cwd / "next-1" / "key.json").read_text())
    assert sorted((k["instance_id"], k["target"]) for k in key.values()) == sorted(drawn)

    # 3. that round annotated and imported
    _fill(cwd / "next-1" / "template.csv", cwd / "filled2.csv", "ann1")
    cocoeval(cwd, "annotate-import", "filled2.csv", run, "--key", "next-1/key.json")

    # 4. the report's corrected rates: both rounds, each label weighted by 1/π, with intervals
    cocoeval(cwd, "report", run, "--out", "report")
    rows = [r for r in _csv(cwd / "report" / "corrected_rates.csv") if r["behaviour"] == "repetition"]
    assert {r["target"] for r in rows} == {"reference", "k30"}
    for r in rows:
        assert r["draw"] == "active (recorded)" and r["n_labelled"] == "40", r
        assert "weighted by 1/π" in r["note"] and "clustered by source conversation" in r["note"]
        assert r["corrected_low"] and r["corrected_high"]
        assert float(r["corrected_low"]) <= float(r["corrected"]) <= float(r["corrected_high"])
    # the same numbers from the record and the imported labels, outside judge_check
    inst = [json.loads(x) for x in (cwd / run / "instances.jsonl").read_text().splitlines()]
    units = sorted(i["id"] for i in inst)
    cluster = {i["id"]: f"{i['dataset']}/{i['provenance']['conversation_id']}" for i in inst}
    labels = {}
    for line in (cwd / run / "judgments" / "human" / "ann1.jsonl").read_text().splitlines():
        j = json.loads(line)
        if j["target_name"] == "reference":
            labels[j["instance_id"]] = float(sum("repetition" in t["behaviours"] for t in j["labels"]))
    f = np.array([7.0] * len(units))  # the fake judge marks Repetition on turns 4, 8, ..., 28 of each
    ref_first = frozenset(i for i, t in first["targets"] if t == "reference")
    strata = {k.split("|")[1]: v for k, v in first["per_stratum"].items() if k.startswith("reference|")}
    dataset = {i["id"]: i["dataset"] for i in inst}
    rounds = [
        Round(frozenset(units), {u: strata[dataset[u]][0] / strata[dataset[u]][1] for u in units}, ref_first),
        Round(
            frozenset(second["inclusion"]["reference"]),
            second["inclusion"]["reference"],
            frozenset(i for i, t in second["targets"] if t == "reference"),
            "active",
        ),
    ]
    want = design_estimate(units, [cluster[u] for u in units], f, labels, rounds)
    [ref] = [r for r in rows if r["target"] == "reference"]
    assert abs(float(ref["corrected_raw"]) - want.estimate) < 1e-6
    assert abs(float(ref["corrected_high"]) - want.high) < 1e-6

    # 5. the next round: the widths now and the labels a halved width would take
    out = cocoeval(cwd, "annotate-next", run, "--budget", 10, "--out", "next-2/").stdout
    assert "now (widest: " in out and "40 labelled); about ±" in out and "more labels for ±" in out
    assert "(approximate: Kish's effective n of their weights)" in out
    assert json.loads((cwd / "next-1" / "key.json").read_text()) == key  # a folder per round: round 1's key kept
    assert "recorded as draw 3" in out
    err = cocoeval(cwd, "annotate-next", run, "--budget", 5, "--judge", "nope", code=2).stderr
    assert "no valid judgments of the judge 'nope'" in err and "judges with valid judgments: j" in err
    help_text = cocoeval(cwd, "annotate-next", "--help").stdout
    assert "--budget" in help_text and "1/π" in help_text
