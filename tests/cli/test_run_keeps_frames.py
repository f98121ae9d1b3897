"""``cocoeval run`` ends by keeping the run's analysis frames (``frames.keep_frames``): the first
report after it reads the kept frames, not the records (issue #27: ~6 s of the first report on the
paper's shape)."""

from __future__ import annotations

from cocoeval.analysis import store
from cocoeval.analysis.store import CACHE_DIR
from cocoeval.core.jsonio import recorded_reads

from ..sim_helpers import fake_params_file


def test_the_first_report_after_a_run_reads_its_kept_frames_and_no_record(srv, tmp_path, monkeypatch, capsys):
    from cocoeval.analysis.report import write_report
    from cocoeval.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["run", str(fake_params_file(tmp_path, srv)), "--no-progress"]) in (0, 3)
    out = capsys.readouterr().out
    d = tmp_path / "runs" / "exp"
    kept = sorted(p.name for p in (d / CACHE_DIR).glob("frames-*"))
    assert len(kept) == 1 and f"analysis frames kept in {CACHE_DIR}/{kept[0]}" in out

    monkeypatch.setattr(store, "_CACHE", {})  # what the next process sees: nothing opened
    with recorded_reads() as seen:
        rep = write_report(d, tmp_path / "report")
    records = [p for p in seen if "/continuations/" in str(p) or "/judgments/" in str(p)]
    assert rep.figures and records == []


def test_a_run_whose_files_cannot_be_read_says_so_and_keeps_its_exit_status(tmp_path, capsys):
    from cocoeval.cli.run import _keep_frames

    d = tmp_path / "run"
    d.mkdir()
    (d / "manifest.json").write_text("{not json")
    _keep_frames(d)
    err = capsys.readouterr().err
    assert "the run's analysis frames are not kept:" in err and "manifest.json" in err
