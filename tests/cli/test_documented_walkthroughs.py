"""The documented walkthroughs, run command by command through the real ``cocoeval`` command line,
in the order the pages give them, offline (the fake provider server answers every call):

- docs/judging.md, "Validating a judge": annotate-export (B.1's draws, then ``--random N``, again,
  too many, and a further round with ``--exclude-annotated``), the template filled as annotators
  fill it, annotate-import, the report's agreement section and notebook ``12_judge_check``;
- docs/simulators.md, "Any simulator": export-instances (a run, a params file's setup, a
  benchmark), a simulator outside cocoeval writing the continuations, import-continuations
  (``--check``, then for real), run, the report (the imported file and its sha256, the leaderboard,
  turn-taking) and notebook ``11_simulators``.

Each command's exit status and the outputs the page promises are checked; a page and its commands
that drift apart fail here."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

from cocoeval import build

from ..conftest import qmsum_meeting, write_json
from .test_simulators_cli import ANSWERS

_SCRIPT = Path(sys.executable).with_name("cocoeval")
COCOEVAL = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "cocoeval"]


def cocoeval(cwd: Path, *args: object, code: int = 0) -> subprocess.CompletedProcess:
    """``cocoeval ARGS`` in ``cwd``, as a researcher types it; its exit status must be ``code``."""
    out = subprocess.run([*COCOEVAL, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == code, (
        f"cocoeval {' '.join(map(str, args))}: exit {out.returncode}\n{out.stdout}{out.stderr}"
    )
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    return out


def _world(tmp_path: Path, srv, setups: list[dict]) -> Path:
    """A benchmark of QMSum-shaped meetings of two datasets and a params file ``p.yaml`` whose
    setups and judge ``j`` call the fake server; returns the folder (the researcher's cwd)."""
    for i in range(8):
        write_json(tmp_path / "src" / ("product" if i % 2 else "academic") / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    srv.configure(answers=ANSWERS)
    model = f"openai-compatible/fake@{srv.openai_base}"
    (tmp_path / "p.yaml").write_text(
        "# my experiment\n"
        + yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "judges": [{"name": "j", "model": model}],
                "setups": [{**s, "model": model} for s in setups],
                "llm": {"cache": "cache.sqlite"},
            },
            sort_keys=False,
        )
    )
    return tmp_path


def _fill(template: Path, out: Path, annotator: str, every: int) -> int:
    """``template.csv`` filled as an annotator fills their copy: their name on every row and, on every
    turn row, Repetition on some turns and ``none`` on the rest. Returns the rows filled."""
    rows = list(csv.DictReader(template.open(newline="")))
    for r in rows:
        assert r["turn"] and not r["behaviours"] and "none" in r["note"]  # fine-grained rows only, to fill
        r["annotator"] = annotator
        r["behaviours"] = "Repetition" if int(r["turn"]) % every == 1 else "none"
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return len(rows)


def _stratified(per_dataset: Counter, k: int) -> dict[str, int]:
    """``k`` allocated over the datasets in proportion to their sizes (largest remainder, ties by
    name), as the page says a random draw is stratified."""
    total = sum(per_dataset.values())
    exact = {d: k * n / total for d, n in per_dataset.items()}
    quota = {d: int(x) for d, x in exact.items()}
    for d in sorted(exact, key=lambda d: (quota[d] - exact[d], d))[: k - sum(quota.values())]:
        quota[d] += 1
    return quota


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(newline="")))


def test_the_documented_judge_validation_walkthrough_runs_step_by_step(tmp_path, srv):
    """docs/judging.md, "Validating a judge", steps 1-4 and the further round."""
    cwd = _world(tmp_path, srv, [{"name": "k30", "turns_per_call": 30}])
    cocoeval(cwd, "run", "p.yaml", "--no-progress")
    run = Path("runs/p")
    instances = [json.loads(x) for x in (cwd / run / "instances.jsonl").read_text().splitlines()]
    per_dataset = Counter(i["dataset"] for i in instances)
    assert len(per_dataset) == 2, per_dataset  # stratification has something to do

    # 1. Export: B.1's draws ...
    out = cocoeval(cwd, "annotate-export", run, "--out", "annotate-b1/").stdout
    assert "overall: " in out and "fine_grained: " in out
    assert {"items.jsonl", "template.csv", "instructions.md", "key.json", "export.json"} <= {
        p.name for p in (cwd / "annotate-b1").iterdir()
    }
    assert not (cwd / run / "annotation" / "random_draws.json").exists()  # only --random records a draw
    # ... or, for corrected rates, N conversations of each target at random, stratified by dataset, recorded
    out = cocoeval(cwd, "annotate-export", run, "--out", "annotate/", "--random", 2).stdout
    assert (
        "fine_grained: 4 conversations drawn at random (seed 0), 2 of each of 2 target(s), stratified by dataset" in out
    )
    quota = _stratified(per_dataset, 2)
    for target in ("reference", "k30"):
        assert f"  {target}: " + ", ".join(f"{d} {quota[d]} of {n}" for d, n in sorted(per_dataset.items())) in out
    assert "recorded as draw 1 in runs/p/annotation/random_draws.json" in out
    assert {"items.jsonl", "template.csv", "instructions.md", "key.json", "export.json"} <= {
        p.name for p in (cwd / "annotate").iterdir()
    }
    record_file = cwd / run / "annotation" / "random_draws.json"
    [draw] = json.loads(record_file.read_text())["draws"]
    assert draw["seed"] == 0 and draw["per_target"] == 2 and len(draw["targets"]) == 4
    assert draw["per_stratum"] == {
        f"{t}|{d}": [quota[d], n] for t in ("reference", "k30") for d, n in per_dataset.items()
    }
    key = json.loads((cwd / "annotate" / "key.json").read_text())
    assert sorted((k["instance_id"], k["target"]) for k in key.values()) == sorted(map(tuple, draw["targets"]))
    items = (cwd / "annotate" / "items.jsonl").read_text()
    assert "k30" not in items and '"reference"' not in items  # blind
    # the same seed gives the same draw, recorded once
    record = record_file.read_bytes()
    out = cocoeval(cwd, "annotate-export", run, "--out", "annotate-again/", "--random", 2).stdout
    assert "already recorded as draw 1" in out and "not recorded again" in out
    assert record_file.read_bytes() == record
    assert (cwd / "annotate-again" / "key.json").read_bytes() == (cwd / "annotate" / "key.json").read_bytes()
    # more than the run has: a message naming the most there is, and nothing written
    err = cocoeval(cwd, "annotate-export", run, "--out", "annotate-big/", "--random", 100, code=2).stderr
    most = len(instances)
    assert f"100 conversations of each target asked for, but fewer to draw from: reference {most}, k30 {most}" in err
    assert f"--random {most}" in err
    assert not (cwd / "annotate-big").exists() and record_file.read_bytes() == record

    # 2. Annotate annotate/template.csv (each annotator a copy)
    rows = _fill(cwd / "annotate" / "template.csv", cwd / "filled-ann1.csv", "ann1", 4)
    assert rows == 4 * 30
    _fill(cwd / "annotate" / "template.csv", cwd / "filled-ann2.csv", "ann2", 5)

    # 3. Import
    for ann in ("ann1", "ann2"):
        out = cocoeval(cwd, "annotate-import", f"filled-{ann}.csv", run, "--key", "annotate/key.json").stdout
        assert f"annotator {ann}: {rows} added, 0 replaced, 0 unchanged" in out and "(4 judgments)" in out
        assert (cwd / run / "judgments" / "human" / f"{ann}.jsonl").is_file()
    out = cocoeval(cwd, "annotate-import", "filled-ann1.csv", run, "--key", "annotate/key.json").stdout
    assert "nothing new (already imported)" in out

    # 4. Read the gate: the report's agreement section ...
    cocoeval(cwd, "report", run, "--out", "report")
    index = (cwd / "report" / "index.md").read_text()
    for table in ("judge_validation", "turn_agreement", "corrected_rates"):
        assert f"[{table}.csv]({table}.csv)" in index
    gate = _csv(cwd / "report" / "judge_validation.csv")
    assert gate and all(r["judge"] == "j" and r["validated"] == "false" for r in gate)  # 4 conversations, not 30
    assert any(r["behaviour"] == "repetition" and r["conversations"] == "4" for r in gate)
    turns = {r["behaviour"]: r for r in _csv(cwd / "report" / "turn_agreement.csv")}
    assert turns["repetition"]["annotators"] == "2" and turns["repetition"]["conversations"] == "4"
    corrected = _csv(cwd / "report" / "corrected_rates.csv")
    assert {r["target"] for r in corrected} == {"reference", "k30"}
    assert all(r["draw"] == "random (recorded)" and r["n_labelled"] == "2" for r in corrected)
    # ... or notebook 12_judge_check
    out = cocoeval(cwd, "notebooks", "p.yaml", "--out", "nb", "--only", "12_judge_check").stdout
    assert "executed nb/12_judge_check.ipynb" in out
    assert "n_labelled" in (cwd / "nb" / "12_judge_check.ipynb").read_text()

    # A further round: the conversations nobody has annotated yet, recorded as a new draw
    out = cocoeval(cwd, "annotate-export", run, "--out", "annotate2/", "--random", 2, "--exclude-annotated").stdout
    assert "leaving out those already annotated" in out
    assert "left out as already annotated by a human: reference 2, k30 2" in out
    assert "recorded as draw 2 in runs/p/annotation/random_draws.json" in out
    first, second = json.loads(record_file.read_text())["draws"]
    assert not {tuple(x) for x in first["targets"]} & {tuple(x) for x in second["targets"]}
    assert len(second["targets"]) == 4
    record = record_file.read_bytes()
    out = cocoeval(cwd, "annotate-export", run, "--out", "annotate2b/", "--random", 2, "--exclude-annotated").stdout
    assert "already recorded as draw 2" in out and record_file.read_bytes() == record
    err = cocoeval(cwd, "annotate-export", run, "--out", "annotate3/", "--exclude-annotated", code=2).stderr
    assert "--random N" in err
    help_text = cocoeval(cwd, "annotate-export", "--help").stdout
    assert "--exclude-annotated" in help_text and "--random N" in help_text


def test_the_documented_any_simulator_walkthrough_runs_step_by_step(tmp_path, srv):
    """docs/simulators.md, "Bring your own continuations" steps 1-3, then what the page says follows:
    the run judges the imported setup, the report names its file and sha256, and the setups are
    compared (an agents setup with the oracle policy beside it)."""
    cwd = _world(
        tmp_path,
        srv,
        [
            {"name": "k30", "turns_per_call": 30},
            {"name": "agents-oracle", "simulator": "agents", "options": {"policy": "oracle"}, "max_per_dataset": 1},
        ],
    )
    cocoeval(cwd, "run", "p.yaml", "--no-progress")
    run = Path("runs/p")
    ids = [json.loads(x)["id"] for x in (cwd / run / "instances.jsonl").read_text().splitlines()]

    # 1. Export what a simulator needs: a run's instances, what one setup selects, a benchmark folder
    out = cocoeval(cwd, "export-instances", run, "--out", "inputs.jsonl").stdout
    assert f"wrote {len(ids)} instance(s), the instances of run runs/p, to inputs.jsonl" in out
    inputs = [json.loads(x) for x in (cwd / "inputs.jsonl").read_text().splitlines()]
    assert [r["id"] for r in inputs] == ids
    for r in inputs:
        assert r["format"] == "cocoeval-simulator-input/1" and r["kind"] == "multiparty" and r["n_turns"] == 30
        assert {"id", "dataset", "goals", "participants", "summary", "history", "instance_hash"} <= set(r)
        assert "reference" not in r  # the human reference is not in the file
    out = cocoeval(cwd, "export-instances", "p.yaml", "--setup", "agents-oracle", "--out", "in.jsonl").stdout
    assert "the instances p.yaml selects for setup agents-oracle" in out
    selected = [json.loads(x) for x in (cwd / "in.jsonl").read_text().splitlines()]
    assert len(selected) == 2 and len({r["dataset"] for r in selected}) == 2  # max_per_dataset: 1
    cocoeval(cwd, "export-instances", "bench/", "--split", "eval", "--out", "bench-inputs.jsonl")
    assert {json.loads(x)["id"] for x in (cwd / "bench-inputs.jsonl").read_text().splitlines()} >= set(ids)

    # 2. Simulate elsewhere: one record per instance, the optional fields too
    records = [
        {
            "instance_id": r["id"],
            "model": "my-agents-v2",
            "notes": "seed 3",
            "turns": [
                {"speaker": r["participants"][i % len(r["participants"])]["name"], "text": f"my simulator's turn {i}"}
                for i in range(r["n_turns"])
            ],
            "usage": {"input_tokens": 5120, "output_tokens": 610},
            "instance_hash": r["instance_hash"],
        }
        for r in inputs
    ]
    (cwd / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    # 3. Add it to the params file as a setup, checked first, then run
    params = (cwd / "p.yaml").read_text()
    out = cocoeval(
        cwd,
        "import-continuations",
        "mine.jsonl",
        "p.yaml",
        "--setup",
        "mine",
        "--description",
        "my agents, v2",
        "--check",
    ).stdout
    assert f"{len(ids)} continuation(s) of {len(ids)} selected instance(s); {len(ids)} valid, 0 invalid" in out
    assert "checked only (--check)" in out and (cwd / "p.yaml").read_text() == params
    out = cocoeval(
        cwd, "import-continuations", "mine.jsonl", "p.yaml", "--setup", "mine", "--description", "my agents, v2"
    ).stdout
    assert "added setup mine to p.yaml" in out and "next: cocoeval run p.yaml" in out
    text = (cwd / "p.yaml").read_text()
    line = "- {name: mine, continuations: mine.jsonl, description: 'my agents, v2', model: my-agents-v2}\n"
    assert line in text and text.replace(line, "", 1) == params  # one line added, comments and layout kept
    requests = srv.stats()["requests"]
    out = cocoeval(cwd, "run", "p.yaml", "--no-progress").stdout
    assert re.search(rf"setup mine +{len(ids)} ok +0 invalid", out), out
    conts = [json.loads(x) for x in (cwd / run / "continuations" / "mine.jsonl").read_text().splitlines()]
    assert len(conts) == len(ids) and {c["status"] for c in conts} == {"ok"} and not any(c["calls"] for c in conts)
    assert srv.stats()["requests"] - requests == 2 * len(ids)  # no simulation call, only its judgments
    judged = [json.loads(x) for x in (cwd / run / "judgments" / "j.jsonl").read_text().splitlines()]
    assert Counter(j["kind"] for j in judged if j.get("target_name") == "mine") == {
        "overall": len(ids),
        "fine_grained": len(ids),
    }
    manifest = json.loads((cwd / run / "manifest.json").read_text())
    sha = hashlib.sha256((cwd / "mine.jsonl").read_bytes()).hexdigest()
    assert manifest["imported"]["mine"]["sha256"] == sha

    # The report lists each imported setup with its file and sha256; comparing them: turn-taking and the leaderboard
    cocoeval(cwd, "report", run, "--out", "report")
    index = (cwd / "report" / "index.md").read_text()
    assert "`mine`: imported from" in index and sha in index and "`agents-oracle`: simulator plugin `agents`" in index
    assert "## Leaderboard of simulators" in index
    board = (cwd / "report" / "leaderboard.csv").read_text()
    assert all(s in board for s in ("k30", "agents-oracle", "mine"))
    oracle = [
        r
        for r in _csv(cwd / "report" / "turn_taking.csv")
        if r["target"] == "agents-oracle" and r["statistic"] == "transition_distance"
    ]
    assert [float(r["mean"]) for r in oracle] == [0.0]  # an oracle policy scores 0 by construction
    out = cocoeval(cwd, "notebooks", "p.yaml", "--out", "nb", "--only", "11_simulators").stdout
    assert "executed nb/11_simulators.ipynb" in out
    assert "mine" in (cwd / "nb" / "11_simulators.ipynb").read_text()
