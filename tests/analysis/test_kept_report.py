"""A report kept beside its run (``analysis.speed.kept_report_folder``): ``cocoeval report`` (or notebook 09)
on a run whose files, settings, code and libraries are those of a report already written copies
that report's very files instead of computing it again; anything else, or a kept copy that is not
the bytes kept, writes it anew."""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace

import pytest

from cocoeval.analysis import report, speed
from cocoeval.analysis.report import write_report
from cocoeval.analysis.speed import KEPT_REPORTS
from cocoeval.analysis.store import CACHE_DIR

from .test_kept_frames import _fresh_process, _write
from .test_report_same import files


def _reports(d):
    return sorted(p.name for p in (d / CACHE_DIR).iterdir() if p.name.startswith("report-"))


@pytest.fixture
def counted(monkeypatch):
    """The reports computed (``_write_report`` called), not copied from a kept one."""
    made = []
    real = report._write_report

    def counting(*a, **k):
        made.append(a[3])
        return real(*a, **k)

    monkeypatch.setattr(report, "_write_report", counting)
    return made


def test_a_kept_report_is_copied_and_is_the_report_written_anew(tmp_path, monkeypatch, counted):
    d = _write(tmp_path / "run")
    first = write_report(d, tmp_path / "a", resamples=50, html=True)
    assert counted == [tmp_path / "a"] and len(_reports(d)) == 1
    _fresh_process(monkeypatch)  # another process: nothing in memory, the kept report on disk
    second = write_report(d, tmp_path / "b", resamples=50, html=True)
    assert counted == [tmp_path / "a"]  # copied, not computed
    assert second == replace(first, out=str(tmp_path / "b"), html=str(tmp_path / "b" / "index.html"))
    # the same report asked for without its HTML page, naming the default judge: copied too
    assert first.judge == "J"
    nohtml = write_report(d, tmp_path / "b2", judge="J", resamples=50)
    assert counted == [tmp_path / "a"] and nohtml == replace(second, out=str(tmp_path / "b2"), html=None)
    assert files(tmp_path / "b2") == {n: b for n, b in files(tmp_path / "a").items() if n != "index.html"}
    # the very files a report written anew (nothing kept) has, in another folder
    for name in _reports(d):
        shutil.rmtree(d / CACHE_DIR / name)
    _fresh_process(monkeypatch)
    third = write_report(d, tmp_path / "c", resamples=50, html=True)
    assert len(counted) == 2 and third.figures == second.figures and third.tables == second.tables
    b, c = files(tmp_path / "b"), files(tmp_path / "c")
    assert sorted(b) == sorted(c) and len(b) > 40
    assert [n for n in b if b[n] != c[n]] == []
    assert files(tmp_path / "a") == b


def test_a_changed_file_setting_or_code_writes_the_report_anew(tmp_path, monkeypatch, counted):
    d = _write(tmp_path / "run")
    write_report(d, tmp_path / "a", resamples=50)
    write_report(d, tmp_path / "b", resamples=50)  # the same: copied
    assert len(counted) == 1
    write_report(d, tmp_path / "c", resamples=60)  # another setting
    write_report(d, tmp_path / "d", resamples=50, seed=1)
    write_report(d, tmp_path / "e", resamples=50, html=True)  # kept without the HTML page: written with it
    assert len(counted) == 4 and len(_reports(d)) == KEPT_REPORTS  # the newest kept, no more
    # a file of the run changed (not a record: the usage, annotations... are part of the report too)
    (d / "notes.txt").write_text("a file the report does not read, beside the records\n")
    write_report(d, tmp_path / "f", resamples=50, html=True)
    assert len(counted) == 5
    write_report(d, tmp_path / "g", resamples=50, html=True)
    assert len(counted) == 5
    # other code or another version of a library that makes the figures
    monkeypatch.setattr(speed, "code_digest", lambda *a, **k: "other code")
    write_report(d, tmp_path / "h", resamples=50, html=True)
    assert len(counted) == 6
    assert (tmp_path / "h" / "index.html").read_bytes() == (tmp_path / "g" / "index.html").read_bytes()


def test_the_code_key_covers_every_file_of_the_package_and_the_figures_libraries():
    from importlib.metadata import version

    from cocoeval.analysis.store import code_digest

    assert {"altair", "vl-convert-python", "polars", "scipy", "numpy"} <= set(speed.REPORT_LIBS)
    assert code_digest(speed.REPORT_LIBS, every_file=True) != code_digest(speed.REPORT_LIBS)  # taxonomy, assets...
    assert version("vl-convert-python")  # installed: its version is in the key, not "absent"


def test_a_kept_report_that_is_not_what_was_kept_is_written_anew_and_said(tmp_path, counted, caplog):
    d = _write(tmp_path / "run")
    write_report(d, tmp_path / "a", resamples=50)
    kept = d / CACHE_DIR / _reports(d)[0]
    (kept / "behaviour_means.csv").write_text("judge,behaviour\nJ,made up\n")
    with caplog.at_level(logging.WARNING):
        write_report(d, tmp_path / "b", resamples=50)
    assert len(counted) == 2 and "behaviour_means.csv is not the file kept" in caplog.text
    assert files(tmp_path / "a") == files(tmp_path / "b")
    write_report(d, tmp_path / "c", resamples=50)  # kept anew, right
    assert len(counted) == 2 and files(tmp_path / "c") == files(tmp_path / "a")
    (kept / "likert.png").unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        write_report(d, tmp_path / "d", resamples=50)
    assert len(counted) == 3 and "cannot be used" in caplog.text and files(tmp_path / "d") == files(tmp_path / "a")
    (kept / "report.json").write_text("{not json")
    write_report(d, tmp_path / "e", resamples=50)
    assert len(counted) == 4 and files(tmp_path / "e") == files(tmp_path / "a")


def test_speed_off_report_keeps_nothing_and_computes_each_report(tmp_path, monkeypatch, counted):
    """``COCOEVAL_SPEED_OFF=report`` (what ``benchmarks/speed_tricks.py`` times the copy against):
    every report computed, nothing kept, the same files."""
    d = _write(tmp_path / "run")
    write_report(d, tmp_path / "a", resamples=50)
    monkeypatch.setenv("COCOEVAL_SPEED_OFF", "report")
    write_report(d, tmp_path / "b", resamples=50)
    shutil.rmtree(d / CACHE_DIR / _reports(d)[0])
    write_report(d, tmp_path / "c", resamples=50)
    assert len(counted) == 3 and _reports(d) == [] and files(tmp_path / "b") == files(tmp_path / "c")
    assert files(tmp_path / "b") == files(tmp_path / "a")


def test_a_failed_report_keeps_nothing_and_a_run_folder_that_keeps_nothing_still_reports(tmp_path, monkeypatch):
    d = _write(tmp_path / "run")

    def failing(*a, **k):
        raise RuntimeError("a figure failed")

    with monkeypatch.context() as m:
        m.setattr(report, "_write_report", failing)
        with pytest.raises(RuntimeError):
            write_report(d, tmp_path / "a", resamples=50)
    assert not (d / CACHE_DIR).exists() or _reports(d) == []
    write_report(d, tmp_path / "a", resamples=50)
    # a folder nothing can be kept in (a read-only run folder, a full disk): written, nothing kept, no error
    shutil.rmtree(d / CACHE_DIR)
    (d / CACHE_DIR).write_text("not a folder\n")
    write_report(d, tmp_path / "b", resamples=50)
    assert (d / CACHE_DIR).is_file() and files(tmp_path / "b") == files(tmp_path / "a")
