"""Import files, exported benchmarks and run files are untrusted data (issue #43, points 6 and 10),
fed through ``cocoeval`` as a user would: a pipe, a link to a device or an oversize file in place
of an import file is refused at once; a turn over the length budget or of invisible characters
only is invalid before any judge sees it; an instance without reference, a metadata.extra nested
without end, a #DATASET with a newline and a parquet split changed after its export are refused
with the file, the record and the fix; a dataset name that is YAML stays one key of the card; a
judgment labelled with a behaviour the taxonomy lacks is invalid with the reason; an import
writes its path relative to the params file and its records' model reaches the report."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cocoeval.simulate.validity import MAX_TURN_CHARS
from tests.cli.test_simulators_cli import ANSWERS

from ..conftest import qmsum_meeting, write_json

ZWSP = "\u200b"


def cli(cwd: Path, *args: object, rc: int | None = 0, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "cocoeval", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    if rc is not None:
        assert out.returncode == rc, out.stdout + out.stderr
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _write_lines(path: Path, recs: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")


def _records(exported: list[dict], long_turn_of: int | None = None, text: str | None = None) -> list[dict]:
    """One continuation per exported instance, its turns by the participants in turn; the record
    ``long_turn_of`` gets ``text`` as its third turn."""
    out = []
    for n, e in enumerate(exported):
        names = [p["name"] for p in e["participants"]]
        turns = [
            {"speaker": names[i % len(names)], "text": f"my turn {i} about the budget"} for i in range(e["n_turns"])
        ]
        if n == long_turn_of:
            turns[2]["text"] = text
        out.append(
            {"instance_id": e["id"], "turns": turns, "model": "my-agents-v2", "instance_hash": e["instance_hash"]}
        )
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory, server):
    """A benchmark, params/p.yaml judging it through the fake server, and an imported setup whose
    second continuation has a turn over ``MAX_TURN_CHARS``, imported and run as the docs show."""
    tmp = tmp_path_factory.mktemp("untrusted")
    for i in range(4):
        write_json(tmp / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    cli(tmp, "build", "--source", "qmsum:src", "--out", "bench")
    server.reset()
    server.configure(answers=ANSWERS)
    model = f"openai-compatible/fake@{server.openai_base}"
    (tmp / "params").mkdir()
    (tmp / "params" / "p.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "../runs/p",
                "bench": "../bench",
                "instances": {"per_dataset": 2},
                "judges": [{"name": "j", "model": model}],
                "llm": {"cache": "../cache.sqlite"},
            },
            sort_keys=False,
        )
        + "setups: []\n",
        encoding="utf-8",
    )
    cli(tmp, "export-instances", "params/p.yaml", "--out", "in.jsonl")
    exported = _lines(tmp / "in.jsonl")
    assert len(exported) == 2
    _write_lines(tmp / "mine.jsonl", _records(exported, long_turn_of=1, text="x" * (MAX_TURN_CHARS + 1)))
    imported = cli(tmp, "import-continuations", "mine.jsonl", "params/p.yaml", "--setup", "mine")
    ran = cli(tmp, "run", "params/p.yaml", "--no-progress", rc=None)
    assert ran.returncode in (0, 3), ran.stdout + ran.stderr  # 3: a run with invalid entries
    return tmp, exported, imported, server


def test_import_continuations_writes_the_path_relative_to_the_params_files_folder(world):
    tmp, *_ = world
    text = (tmp / "params" / "p.yaml").read_text(encoding="utf-8")
    assert "continuations: ../mine.jsonl" in text and str(tmp) not in text, text


def test_a_turn_over_the_length_budget_is_invalid_before_it_is_judged(world):
    tmp, exported, imported, _ = world
    assert "1 valid" in imported.stdout and "a turn may have" in imported.stdout, imported.stdout
    conts = {c["instance_id"]: c for c in _lines(tmp / "runs" / "p" / "continuations" / "mine.jsonl")}
    long = conts[exported[1]["id"]]
    assert long["status"] == "invalid" and "turn 3" in long["reason"] and "MAX_TURN_CHARS" in long["reason"]
    assert conts[exported[0]["id"]]["status"] == "ok"
    judged = {(j["instance_id"], j["target_name"]) for j in _lines(tmp / "runs" / "p" / "judgments" / "j.jsonl")}
    assert (exported[0]["id"], "mine") in judged and (exported[1]["id"], "mine") not in judged


def test_the_records_model_label_is_named_in_the_report_and_the_params_file(world):
    tmp, *_ = world
    setups = yaml.safe_load((tmp / "params" / "p.yaml").read_text(encoding="utf-8"))["setups"]
    assert [s.get("model") for s in setups if s["name"] == "mine"] == ["my-agents-v2"]
    cli(tmp, "report", "runs/p", "--out", "report")
    index = (tmp / "report" / "index.md").read_text(encoding="utf-8")
    line = next(x for x in index.splitlines() if x.startswith("- `mine`: imported from"))
    assert "written by my-agents-v2" in line, line


def test_a_judgment_edited_to_an_unknown_behaviour_is_counted_invalid_with_the_reason(world, tmp_path):
    tmp, *_ = world
    run = tmp_path / "run"
    shutil.copytree(tmp / "runs" / "p", run, ignore=shutil.ignore_patterns("cache"))
    path = run / "judgments" / "j.jsonl"
    recs = _lines(path)
    n = next(i for i, r in enumerate(recs) if r["kind"] == "fine_grained" and r.get("labels"))
    recs[n]["labels"][0]["behaviours"] = ["shouting_in_caps"]
    _write_lines(path, recs)
    out = cli(tmp, "report", run, "--out", tmp_path / "rep")
    assert "shouting_in_caps" not in out.stderr
    rows = list(csv.DictReader((tmp_path / "rep" / "invalid_rates.csv").open(encoding="utf-8")))
    fine = [r for r in rows if r.get("kind") == "fine_grained" and r.get("target") == recs[n]["target_name"]]
    assert fine and int(fine[0]["invalid"]) == 1, rows
    from cocoeval.analysis.frames import run_frames
    from cocoeval.run import Run

    judg = run_frames(Run.open(run)).judgments
    [bad] = judg.filter(judg["status"] == "invalid").to_dicts()
    assert "'shouting_in_caps', which is no behaviour of the taxonomy" in bad["reason"]


def test_an_import_file_that_is_a_fifo_is_refused_without_hanging(world):
    tmp, *_ = world
    before = (tmp / "params" / "p.yaml").read_text(encoding="utf-8")
    fifo = tmp / "pipe.jsonl"
    os.mkfifo(fifo)
    out = cli(tmp, "import-continuations", fifo, "params/p.yaml", "--setup", "piped", rc=2, timeout=60)
    assert "pipe.jsonl" in out.stderr and "named pipe" in out.stderr, out.stderr
    assert (tmp / "params" / "p.yaml").read_text(encoding="utf-8") == before


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_an_import_file_linked_to_dev_zero_is_refused_without_reading_it(world):
    tmp, *_ = world
    link = tmp / "zero.jsonl"
    link.symlink_to("/dev/zero")
    out = cli(tmp, "import-continuations", link, "params/p.yaml", "--setup", "zero", "--check", rc=2, timeout=60)
    assert "zero.jsonl" in out.stderr and "a device, not a regular file" in out.stderr, out.stderr  # the link, named


def test_an_oversize_import_file_is_refused_before_it_is_read(world):
    from cocoeval.core.files import MAX_IMPORT_BYTES

    tmp, *_ = world
    big = tmp / "big.jsonl"
    with big.open("wb") as f:  # sparse: no disk is used
        f.truncate(MAX_IMPORT_BYTES + 1)
    out = cli(tmp, "import-continuations", big, "params/p.yaml", "--setup", "big", "--check", rc=2, timeout=60)
    assert "big.jsonl" in out.stderr and "more than the 256.0 MiB" in out.stderr, out.stderr


def test_a_turn_of_only_zero_width_spaces_counts_as_empty(world):
    tmp, exported, *_ = world
    _write_lines(tmp / "blank.jsonl", _records(exported, long_turn_of=0, text=ZWSP * 3 + " \u2060"))
    out = cli(tmp, "import-continuations", "blank.jsonl", "params/p.yaml", "--setup", "blank", "--check")
    assert "1 valid" in out.stdout and "no visible text" in out.stdout, out.stdout


def _bench_copy(tmp: Path, name: str, edit) -> Path:
    d = tmp / name
    shutil.copytree(tmp / "bench", d)
    recs = _lines(d / "eval.jsonl")
    edit(recs[0])
    _write_lines(d / "eval.jsonl", recs)
    return d


def test_an_instance_with_an_empty_reference_is_refused_at_build_import_and_parquet_read(world, tmp_path):
    tmp, *_ = world
    bench = _bench_copy(tmp, "bench-noref", lambda r: r.update(reference=[]))
    params = tmp / "params" / "noref.yaml"
    params.write_text(
        (tmp / "params" / "p.yaml")
        .read_text(encoding="utf-8")
        .replace("bench: ../bench", "bench: ../bench-noref")
        .replace("out: ../runs/p", "out: ../runs/noref"),
        encoding="utf-8",
    )
    for argv in (
        ("run", params, "--no-progress"),
        ("import-continuations", "mine.jsonl", params, "--setup", "again", "--check"),
        ("export-instances", bench, "--out", tmp_path / "x.jsonl"),
    ):
        out = cli(tmp, *argv, rc=2)
        assert "bench-noref/eval.jsonl, record line 1" in out.stderr and "no reference turn" in out.stderr, out.stderr
        assert "rebuild the benchmark" in out.stderr
    # a parquet split (as another tool could write it): refused when read, row named
    import polars as pl

    cli(tmp, "bench-export", "bench", "--format", "parquet", "--out", tmp_path / "pq")
    df = pl.read_parquet(tmp_path / "pq" / "eval.parquet")
    first = df["id"][0]
    df = df.with_columns(
        pl.when(pl.int_range(pl.len()) == 0)
        .then(pl.lit([], dtype=df.schema["reference"]))
        .otherwise(pl.col("reference"))
        .alias("reference")
    )
    df.write_parquet(tmp_path / "pq" / "eval.parquet")
    (tmp_path / "pq" / "README.md").unlink()  # no card: nothing recorded to compare with
    out = cli(tmp, "show", tmp_path / "pq", first, rc=2)
    assert "eval.parquet, record row 1" in out.stderr and "no reference turn" in out.stderr, out.stderr


def test_a_parquet_benchmark_edited_after_export_is_refused_until_its_card_agrees(world, tmp_path):
    import hashlib

    import polars as pl

    tmp, *_ = world
    pq = tmp_path / "pq"
    cli(tmp, "bench-export", "bench", "--format", "parquet", "--out", pq)
    df = pl.read_parquet(pq / "eval.parquet")
    first = df["id"][0]
    cli(tmp, "show", pq, first)
    df.with_columns(pl.col("dataset").str.replace("qmsum", "edited")).write_parquet(pq / "eval.parquet")
    out = cli(tmp, "show", pq, first, rc=2)
    assert "eval.parquet" in out.stderr and "changed after cocoeval bench-export wrote it" in out.stderr, out.stderr
    assert "README.md" in out.stderr and "bench-export" in out.stderr
    # the researcher who means it records the new hash in the card
    card = (pq / "README.md").read_text(encoding="utf-8")
    old = next(x for x in card.splitlines() if x.startswith("- `eval.parquet`: "))
    new = hashlib.sha256((pq / "eval.parquet").read_bytes()).hexdigest()
    (pq / "README.md").write_text(card.replace(old, f"- `eval.parquet`: `{new}`"), encoding="utf-8")
    assert "edited_product" in cli(tmp, "show", pq, first).stdout


def test_a_dataset_named_like_yaml_stays_one_key_of_the_card(world, tmp_path):
    tmp, *_ = world
    bench = _bench_copy(tmp, "bench-evil", lambda r: r.update(dataset="evil: {pwned: true}"))
    cli(tmp, "bench-export", bench, "--format", "parquet", "--out", tmp_path / "pq")
    card = (tmp_path / "pq" / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(card.split("---\n")[1])
    assert set(meta["source_licenses"]) == {"evil: {pwned: true}", "qmsum_product"}
    assert "pwned" not in meta and "| evil: \\{pwned: true\\} |" in card


def test_a_deeply_nested_metadata_extra_is_refused_with_the_file_and_line(world, tmp_path):
    tmp, *_ = world
    deep: dict = {}
    for _ in range(200):
        deep = {"a": deep}
    bench = _bench_copy(tmp, "bench-deep", lambda r: r["metadata"].update(extra=deep))
    for argv in (
        ("bench-export", bench, "--format", "parquet", "--out", tmp_path / "pq"),
        ("export-instances", bench, "--out", tmp_path / "x.jsonl"),
    ):
        out = cli(tmp, *argv, rc=2)
        assert "bench-deep/eval.jsonl, record line 1" in out.stderr and "nested more than 32 levels" in out.stderr


@pytest.mark.parametrize("dataset", ["prod\nuct", "prod\u200buct"])
def test_a_dataset_name_with_a_newline_in_a_source_spec_is_refused(world, tmp_path, dataset):
    tmp, *_ = world
    out = cli(tmp, "build", "--source", f"qmsum:src#{dataset}", "--out", tmp_path / "b", rc=2)
    assert "dataset name has a control or invisible character" in out.stderr, out.stderr
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "name": "n",
                "out": str(tmp_path / "run"),
                "build": {"sources": [f"qmsum:{tmp / 'src'}#{dataset}"]},
                "setups": [{"name": "s", "model": "openai/gpt-4.1"}],
            }
        ),
        encoding="utf-8",
    )
    out = cli(tmp, "run", params, "--no-progress", rc=2)
    assert "dataset name has a control or invisible character" in out.stderr, out.stderr


def test_an_import_counts_continuations_and_names_the_real_cause_of_each_problem(world, tmp_path):
    tmp, exported, *_ = world
    recs = _records(exported)
    recs[0]["turns"][1]["text"] = 42  # a number where the text goes
    recs[0]["turns"][2]["text"] = ""
    recs[1]["turns"][4]["text"] = "   "
    _write_lines(tmp / "typed.jsonl", recs)
    out = cli(tmp, "import-continuations", "typed.jsonl", "params/p.yaml", "--setup", "typed", "--check").stdout
    assert "2 continuation(s) of 2 selected instance(s); 0 valid, 2 invalid" in out, out
    assert "invalid (1): turn N's text is a number, not text" in out, out
    assert "invalid (2): turn N has no text" in out, out
    # and the run's summary groups them by the same cause, not by "imported continuation: turn N"
    params = tmp_path / "q.yaml"
    params.write_text(
        (tmp / "params" / "p.yaml")
        .read_text(encoding="utf-8")
        .replace("../", str(tmp) + "/")
        .replace("name: p\n", "name: q\n")
        .replace(f"{tmp}/runs/p", f"{tmp_path}/run"),
        encoding="utf-8",
    )
    cli(tmp, "import-continuations", "typed.jsonl", params, "--setup", "typed")
    ran = cli(tmp, "run", params, "--no-progress", "--stage", "simulate", rc=3)
    assert "imported continuation: turn N has no text" in ran.stdout + ran.stderr, ran.stdout + ran.stderr


def test_export_instances_reads_a_parquet_benchmark_as_the_docs_say(world, tmp_path):
    tmp, *_ = world
    pq = tmp_path / "pq"
    cli(tmp, "bench-export", "bench", "--format", "parquet", "--out", pq)
    cli(tmp, "export-instances", pq, "--out", tmp_path / "from-parquet.jsonl")
    cli(tmp, "export-instances", "bench", "--out", tmp_path / "from-jsonl.jsonl")
    assert _lines(tmp_path / "from-parquet.jsonl") == _lines(tmp_path / "from-jsonl.jsonl")
