"""What a run writes for sharing (its manifest, the report, the HTML page, a run-vs-run
comparison) names no absolute path of the machine that made it (issue #47 item 4): a params file
given by its absolute path from another folder is recorded by its name, with its SHA-256."""

from __future__ import annotations

import json
from pathlib import Path

from ..sim_helpers import fake_params_file


def _files_naming(folder, text):
    """The files under ``folder`` naming ``text``, as written or as Markdown escapes it (``\\_``)."""
    forms = {text, text.replace("_", "\\_")}
    return sorted(
        str(p) for p in folder.rglob("*") if p.is_file() and any(f in p.read_text(errors="replace") for f in forms)
    )


def test_a_run_given_an_absolute_params_path_leaves_no_absolute_path_in_manifest_or_reports(
    srv, tmp_path, monkeypatch, capsys
):
    from cocoeval.cli import main

    work = tmp_path / "work"
    work.mkdir()
    params = fake_params_file(work, srv)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(work)
    assert main(["run", str(params), "--no-progress"]) in (0, 3)
    run_dir = work / "runs" / "exp"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["params_file"] == params.relative_to(work).as_posix()

    monkeypatch.chdir(elsewhere)  # a report made from another folder
    assert main(["report", str(run_dir), "--out", str(elsewhere / "report"), "--html"]) == 0
    assert main(["compare", str(run_dir), str(run_dir), "--out", str(elsewhere / "cmp")]) in (0, 2)
    capsys.readouterr()
    for folder in (elsewhere / "report", elsewhere / "cmp"):
        if folder.exists():
            assert _files_naming(folder, str(tmp_path)) == [], folder


def test_a_params_file_outside_the_working_folder_is_recorded_by_its_name(srv, tmp_path, monkeypatch):
    from cocoeval.cli import main

    params = fake_params_file(tmp_path, srv)
    other = tmp_path / "cwd"
    other.mkdir()
    monkeypatch.chdir(other)
    assert main(["run", str(params), "--no-progress"]) in (0, 3)
    run_dir = tmp_path / "runs" / "exp"  # beside the params file, as its output says
    text = (run_dir / "manifest.json").read_text()
    m = json.loads(text)
    assert m["params_file"] == params.name
    assert all(not f["path"].startswith("/") for f in m["params_files"])
    assert f'"{tmp_path}' not in text.replace(str(run_dir), "")


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_absolute_out_bench_taxonomy_and_a_local_model_path_are_not_in_what_a_run_or_a_benchmark_shares(
    srv, tmp_path, monkeypatch, capsys
):
    """A params file naming its output folder, its benchmark and its taxonomy by absolute paths,
    and an imported setup made by ``local/<absolute path of a .gguf>``, run as the docs show; the
    manifest, the report (HTML too), the comparison, the Inspect logs and the benchmark exported
    after an older build recorded absolute paths (report.json, each instance's provenance) name
    none of the machine's folders (issue #47 item 4)."""
    import shutil

    import polars as pl
    import yaml

    import cocoeval
    from cocoeval.cli import main

    from .test_simulators_cli import ANSWERS

    srv.configure(answers=ANSWERS)  # valid judgments: the comparison has setups to compare
    work = tmp_path / "work"
    work.mkdir()
    params = fake_params_file(work, srv)
    (tmp_path / "tax").mkdir()
    taxonomy = tmp_path / "tax" / "mine.yaml"
    shutil.copyfile(Path(cocoeval.__file__).parent / "core" / "taxonomy.yaml", taxonomy)
    run_dir = tmp_path / "out" / "exp"
    p = yaml.safe_load(params.read_text())
    p.update(out=str(run_dir), bench=str(work / "bench"), taxonomy=str(taxonomy))
    params.write_text(yaml.safe_dump(p))
    gguf = f"local/{tmp_path / 'models' / 'tiny.gguf'}"
    monkeypatch.chdir(work)
    assert main(["export-instances", str(params), "--out", "in.jsonl"]) == 0
    recs = [
        {
            "instance_id": e["id"],
            "instance_hash": e["instance_hash"],
            "model": gguf,
            "turns": [{"speaker": e["participants"][0]["name"], "text": f"turn {i}"} for i in range(e["n_turns"])],
        }
        for e in _lines(work / "in.jsonl")
    ]
    (work / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["import-continuations", "mine.jsonl", str(params), "--setup", "mine"]) == 0
    assert main(["run", str(params), "--no-progress"]) in (0, 3)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["params"]["out"] == "exp" and manifest["params"]["bench"] == "bench", manifest["params"]
    assert [s["model"] for s in manifest["params"]["setups"] if s["name"] == "mine"] == ["local/tiny.gguf"]

    # an older build: its report and provenance name the builder's folders and a local model's path
    bench = work / "bench"
    report = json.loads((bench / "report.json").read_text())
    report["llm_context"] = {"options": {"metadata": gguf, "summary": gguf, "batch": 4}}
    report["context"] = {"metadata": f"llm ({gguf})", "summary": f"llm ({gguf})", "turns": "rule"}
    report["sources"] = [{"source": f"qmsum:{work / 'src'}", "path": str(work / "src")}]
    (bench / "report.json").write_text(json.dumps(report))
    eval_lines = _lines(bench / "eval.jsonl")
    for r in eval_lines:
        r["provenance"]["source_file"] = str(work / "src" / "product" / "M0.json")
        r["provenance"]["text_model"] = gguf
    (bench / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in eval_lines))

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["report", str(run_dir), "--out", str(elsewhere / "report"), "--html"]) == 0
    shutil.copytree(run_dir, tmp_path / "out" / "again")  # a second run of the same params
    assert main(["compare", str(run_dir), str(tmp_path / "out" / "again"), "--out", str(elsewhere / "cmp")]) == 0
    assert main(["export", str(run_dir), "--format", "inspect", "--out", str(elsewhere / "inspect")]) == 0
    assert main(["bench-export", str(bench), "--out", str(elsewhere / "hf")]) == 0
    capsys.readouterr()
    assert str(tmp_path) not in (run_dir / "manifest.json").read_text()
    for folder in ("report", "cmp", "inspect", "hf"):
        assert (elsewhere / folder).is_dir(), folder
        assert _files_naming(elsewhere / folder, str(tmp_path)) == [], folder
    exported = pl.read_parquet(elsewhere / "hf" / "eval.parquet")["provenance"].to_list()
    assert {(x["source_file"], x["text_model"]) for x in exported} == {("M0.json", "local/tiny.gguf")}
    assert "local/tiny.gguf" in (elsewhere / "hf" / "croissant.json").read_text()
