"""What a run writes for sharing (its manifest, the report, the HTML page, a run-vs-run
comparison) names no absolute path of the machine that made it (issue #47 item 4): a params file
given by its absolute path from another folder is recorded by its name, with its SHA-256."""

from __future__ import annotations

import json

from ..sim_helpers import fake_params_file


def _files_naming(folder, text):
    return sorted(str(p) for p in folder.rglob("*") if p.is_file() and text in p.read_text(errors="replace"))


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
