"""A judge's reliability, tracked (beyond the paper): ECE and Brier score equal independent
computations, and through the CLI a judge with samples: 3 (forecast as k calls per target; a run
made again sends no request), annotated, reported with its calibration, reliability diagram and
vote fractions; the history beside the run grows by one entry per judge id, and a changed judge
shows whether agreement rose or fell, with the change's bootstrap interval."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import polars as pl
import pytest
import yaml
from sklearn.metrics import brier_score_loss

from cocoeval import cli
from cocoeval.analysis.calibration import (
    BOOTSTRAP_RULE,
    brier,
    ece,
    history_table,
    read_history,
    reliability_bins,
    reliability_chart,
)
from cocoeval.core.jsonio import write_jsonl
from cocoeval.run import load_params
from cocoeval.run.estimate import forecast
from tests.sim_helpers import instance

N_INST = 12
N_REF = 4
FINE_MARK = "Continuation to annotate"


def ece_by_hand(p, y, bins=10):
    """ECE with a loop over the bins, each a half-open interval (the last closed)."""
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(pi, yi) for pi, yi in zip(p, y, strict=True) if lo <= pi < hi or (b == bins - 1 and pi == 1.0)]
        if inside:
            gap = abs(sum(yi for _, yi in inside) / len(inside) - sum(pi for pi, _ in inside) / len(inside))
            total += len(inside) / len(p) * gap
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ece_and_brier_equal_independent_computations(seed):
    rng = np.random.default_rng(seed)
    p = rng.choice([0, 1 / 3, 0.5, 2 / 3, 0.95, 1.0], size=400)
    y = (rng.random(400) < p).astype(float)
    assert ece(p, y) == pytest.approx(ece_by_hand(p, y))
    assert brier(p, y) == pytest.approx(brier_score_loss(y, p))
    bins = reliability_bins(p, y)
    assert sum(n for _, n, _, _ in bins) == 400
    assert ece(np.array([0.0, 1.0]), np.array([0.0, 1.0])) == 0.0


def test_the_reliability_chart_is_a_chart_of_the_bins():
    bins = pl.DataFrame(
        {"judge": ["j", "j"], "bin": [0, 9], "low": [0.0, 0.9], "high": [0.1, 1.0], "n": [5, 3],
         "mean_fraction": [0.0, 1.0], "observed": [0.2, 0.6]}
    )  # fmt: skip
    spec = reliability_chart(bins).to_dict()
    assert len(spec["layer"]) == 2
    assert spec["layer"][1]["encoding"]["x"]["field"] == "mean_fraction"
    assert spec["layer"][1]["encoding"]["y"]["field"] == "observed"


def test_the_history_compares_with_the_latest_entry_of_another_judge_id():
    def e(jid, f1, date):
        return {"judge": "j", "judge_id": jid, "prompt": f"p@{jid}", "date": date, "run": "r", "design": "d",
                "measures": {"any behaviour": {"alpha_with_judge": None, "kappa": f1, "f1": f1}}}  # fmt: skip

    t = history_table([e("a", 0.5, "1"), e("b", 0.7, "2"), e("c", 0.6, "3"), e("c", 0.6, "4")], "j", "c")
    row = t.filter(pl.col("measure") == "f1").row(0, named=True)
    assert (row["previous_id"], row["previous"], row["current"], row["direction"]) == ("b", 0.7, 0.6, "fell")
    assert t.filter(pl.col("measure") == "alpha_with_judge")["direction"].to_list() == ["not comparable"]
    assert history_table([e("a", 0.5, "1")], "j", "a").is_empty()


def fine(labels: dict[int, list[str]]) -> str:
    return json.dumps(
        {
            "turns": [
                {"turn": t, "behaviours": [{"behaviour": b, "evidence": "x"} for b in labels.get(t, [])]}
                for t in range(1, N_REF + 1)
            ]
        }
    )


SAMPLES = [
    {1: ["Repetition"], 2: ["Repetition"], 3: ["Repetition"]},
    {1: ["Repetition"], 2: ["Repetition"]},
    {1: ["Repetition"]},
]
"""The three answers to each instance (any order): Repetition on turn 1 in 3 of 3, turn 2 in 2, turn 3 in 1."""


def human(k: int, t: int) -> bool:
    """The annotator marks Repetition on turn 1 always, on turn 2 in even instances."""
    return t == 1 or (t == 2 and k % 2 == 0)


def test_samples_calibration_and_history_through_the_cli(srv, tmp_path, capsys):
    write_jsonl(
        tmp_path / "bench" / "eval.jsonl", [instance(f"d/c{k}/0", n_hist=3, n_ref=N_REF) for k in range(N_INST)]
    )
    answers = []
    for k in range(N_INST):
        texts = [fine(s) for s in SAMPLES]
        if k == 0:
            texts[2] = "no JSON here"  # an invalid sample: counted, left out of the majority
        answers += [{"match": f"of d/c{k}/0", "context": FINE_MARK, "times": 1, "text": x} for x in texts]
    answers.append({"match": "", "context": FINE_MARK, "text": fine({})})  # a changed judge: labels nothing
    srv.configure(answers=answers)
    judge = {"name": "j", "model": f"openai-compatible/fake@{srv.openai_base}", "kind": ["fine_grained"],
             "samples": 3, "temperature": 1.0, "max_attempts": 1}  # fmt: skip
    params = {"name": "cal", "out": "runs/cal", "bench": "bench", "judges": [judge],
              "llm": {"cache": "cache.sqlite", "concurrency": 2}}  # fmt: skip
    p = tmp_path / "cal.yaml"
    p.write_text(yaml.safe_dump(params))
    run_dir = tmp_path / "runs" / "cal"

    exp = load_params(p)
    assert sum(r.calls for r in forecast(exp, exp.prepare_instances(write=False)) if r.stage == "judge") == 3 * N_INST
    assert cli.main(["run", str(p), "--no-progress"]) == 0
    assert srv.stats()["requests"] == 3 * N_INST
    assert cli.main(["run", str(p), "--no-progress"]) == 0
    assert srv.stats()["requests"] == 3 * N_INST  # resumed: every sample from the cache, 0 requests

    rows = [
        {"annotator": "ann", "instance_id": f"d/c{k}/0", "target": "reference", "turn": t,
         "behaviours": "Repetition" if human(k, t) else "none"}
        for k in range(N_INST) for t in range(1, N_REF + 1)
    ]  # fmt: skip
    with (tmp_path / "done.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert cli.main(["annotate-import", str(tmp_path / "done.csv"), str(run_dir)]) == 0

    out = tmp_path / "report"
    assert cli.main(["report", str(run_dir), "--out", str(out), "--resamples", "50"]) == 0
    cal = pl.read_csv(out / "judge_calibration.csv")
    # independent: the fractions built into the fake judge against the annotator's labels
    p_, y_ = [], []
    for k in range(N_INST):
        frac = {1: 1.0, 2: 1.0, 3: 0.5, 4: 0.0} if k == 0 else {1: 1.0, 2: 2 / 3, 3: 1 / 3, 4: 0.0}
        for t in range(1, N_REF + 1):
            for b in range(10):  # the taxonomy's ten behaviours; only repetition is ever labelled
                rep = b == 0
                p_.append(frac[t] if rep else 0.0)
                y_.append(float(human(k, t)) if rep else 0.0)
    pooled = cal.filter(pl.col("behaviour") == "all behaviours").row(0, named=True)
    assert pooled["turns"] == N_INST * N_REF * 10 and pooled["samples"] == 3
    assert pooled["ece"] == pytest.approx(ece_by_hand(p_, y_), abs=1e-9)
    assert pooled["brier"] == pytest.approx(brier_score_loss(y_, p_), abs=1e-9)
    assert pooled["brier_low"] <= pooled["brier"] <= pooled["brier_high"]  # 12 conversations: an interval
    votes = pl.read_csv(out / "judge_votes.csv")
    assert votes.filter((pl.col("instance_id") == "d/c0/0") & (pl.col("turn") == 2))["valid_samples"].to_list() == [2]
    assert sorted(votes.filter(pl.col("instance_id") == "d/c1/0")["fraction"].round(4).to_list()) == [
        0.3333,
        0.6667,
        1.0,
    ]
    index = (out / "index.md").read_text()
    assert "judge_calibration" in index and "reliability" in index
    acc = pl.read_csv(out / "judge_samples.csv").row(0, named=True)
    assert (acc["samples_per_target"], acc["samples"], acc["invalid_samples"]) == (3, 3 * N_INST, 1)
    history = tmp_path / "runs" / "judge_history.jsonl"
    [entry] = read_history(history)
    assert entry["judge"] == "j" and entry["samples"] == 3 and entry["conversations"] == N_INST
    assert entry["run"] == "cal" and entry["design"]  # relative to the history's folder, never absolute
    assert not (out / "judge_history.csv").exists()  # no earlier entry of another judge id

    assert cli.main(["report", str(run_dir), "--out", str(out), "--resamples", "50"]) == 0
    assert len(read_history(history)) == 1  # the same numbers again add nothing

    params["judges"][0]["temperature"] = 0.5  # another judge id; the fake judge now labels nothing
    p.write_text(yaml.safe_dump(params))
    assert cli.main(["run", str(p), "--stage", "judge", "--no-progress"]) == 0
    assert cli.main(["report", str(run_dir), "--out", str(out), "--resamples", "50"]) == 0
    first, second = read_history(history)
    assert first["judge_id"] != second["judge_id"]
    hist = pl.read_csv(out / "judge_history.csv")
    f1 = hist.filter((pl.col("behaviour") == "any behaviour") & (pl.col("measure") == "f1")).row(0, named=True)
    assert f1["previous_id"] == first["judge_id"] and f1["current_id"] == second["judge_id"]
    assert f1["direction"] == "fell" and f1["current"] < f1["previous"]
    # the change's paired bootstrap interval over the 12 conversations both judge ids labelled
    assert f1["rule"] == BOOTSTRAP_RULE and f1["n_conversations"] == N_INST and f1["ci_low"] <= f1["ci_high"] < 0
    assert len(second["per_conversation"]["conversations"]) == N_INST
    assert "ci_low" in (out / "judge_history.md").read_text()
    assert "judge_history" in (out / "index.md").read_text()
    assert str(tmp_path) not in (out / "judge_history.csv").read_text() + (out / "judge_history.md").read_text()

    params["judges"][0]["temperature"] = 0.7  # a third judge id, reported without writing the history
    p.write_text(yaml.safe_dump(params))
    assert cli.main(["run", str(p), "--stage", "judge", "--no-progress"]) == 0
    before = history.read_bytes()
    assert cli.main(["report", str(run_dir), "--out", str(out), "--resamples", "50", "--no-history"]) == 0
    assert history.read_bytes() == before and (out / "judge_history.csv").exists()  # compared, not written
    history.unlink()
    os.mkfifo(history)  # a named pipe at the history's path: the report neither waits nor fails
    done = subprocess.run(
        [sys.executable, "-m", "cocoeval", "report", str(run_dir), "--out", str(tmp_path / "r2"), "--resamples", "50"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
