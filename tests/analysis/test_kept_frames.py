"""Frames kept beside the run (``frames.open_run_dir``) and runs opened in parts (``RunStore.open``):
another process reads the frames without reading the run's records, never frames of other files,
other code or another taxonomy, and a record read later is never a mix of two versions."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import replace

import polars as pl
import pytest

from cocoeval.analysis import frames as fr
from cocoeval.analysis import store
from cocoeval.analysis.frames import open_run_dir, run_frames
from cocoeval.analysis.inference import MIN_N
from cocoeval.analysis.store import CACHE_DIR, KEPT_FRAMES, RunStore, read_digest
from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import recorded_reads
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run

from ..conftest import ROOT
from ..sim_helpers import write_run_dir
from .test_stats import make_run

NAMES = ["instances", "counts", "likert", "labels", "judgments", "continuations", "expected"]


def _write(d):
    write_run_dir(d, make_run(), {"status": "complete"})
    return d


def _fresh_process(monkeypatch):
    """What a new process sees: nothing opened, no frames made."""
    monkeypatch.setattr(store, "_CACHE", {})
    monkeypatch.setattr(store, "_MADE", {})


def _same(a, b):
    for n in NAMES:
        x, y = getattr(a, n), getattr(b, n)
        assert x.schema == y.schema and x.equals(y), n


def _read(seen, d):
    """The run's files among those read (the taxonomy file aside)."""
    return sorted(os.path.relpath(p, d) for p in seen if not os.path.relpath(p, d).startswith(".."))


def _kept(d):
    return sorted(p.name for p in (d / CACHE_DIR).iterdir()) if (d / CACHE_DIR).exists() else []


def test_the_next_process_reads_the_kept_frames_and_no_record(tmp_path, monkeypatch):
    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    with recorded_reads() as first:
        made = run_frames(open_run_dir(d))
    assert "judgments/J.jsonl" in _read(first, d) and len(_kept(d)) == 1
    _fresh_process(monkeypatch)
    with recorded_reads() as second:
        run = open_run_dir(d)
        kept = run_frames(run)
    assert _read(second, d) == ["manifest.json"]  # the records are not read
    _same(made, kept)
    _same(kept, fr._run_frames(Run.open(d), load_taxonomy()))  # what the records give
    # the records are there when asked for, as Run.open reads them
    with recorded_reads() as third:
        texts = run.continuations
    assert _read(third, d) == sorted(
        ["instances.jsonl", *(f"continuations/{p.name}" for p in (d / "continuations").iterdir())]
    )
    assert texts == Run.open(d).continuations and run.run() == Run.open(d)


def test_changed_files_code_or_taxonomy_are_never_given_old_frames(tmp_path, monkeypatch):
    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    run_frames(open_run_dir(d))
    before = _kept(d)
    # another file: the frames of the new content are made from its records and kept beside
    js = d / "judgments" / "J.jsonl"
    lines = js.read_text().splitlines()
    js.write_text("\n".join(lines[:-1]) + "\n")
    _fresh_process(monkeypatch)
    with recorded_reads() as seen:
        now = run_frames(open_run_dir(d))
    assert "judgments/J.jsonl" in _read(seen, d)
    _same(now, fr._run_frames(Run.open(d), load_taxonomy()))
    assert len(_kept(d)) == 2 and set(before) < set(_kept(d))
    # other code: not read
    _fresh_process(monkeypatch)
    monkeypatch.setattr(store, "code_digest", lambda *a, **k: "other code")
    with recorded_reads() as seen:
        open_run_dir(d)
    assert "judgments/J.jsonl" in _read(seen, d) and len(_kept(d)) == 3
    # another taxonomy: its own frames
    monkeypatch.undo()
    _fresh_process(monkeypatch)
    tax = load_taxonomy()
    other = tax.model_copy(update={"name": "another"})
    with recorded_reads() as seen:
        f = run_frames(open_run_dir(d, other), other)
    assert f.taxonomy is other and "judgments/J.jsonl" in _read(seen, d)
    assert len(_kept(d)) == KEPT_FRAMES == 4
    # the first content again: its frames are still kept, read without the records
    js.write_text("\n".join(lines) + "\n")
    _fresh_process(monkeypatch)
    with recorded_reads() as seen:
        open_run_dir(d)
    assert _read(seen, d) == ["manifest.json"] and before[0] in _kept(d)
    # a fifth version: the oldest kept folder goes
    js.write_text("\n".join(lines[:-2]) + "\n")
    _fresh_process(monkeypatch)
    open_run_dir(d)
    assert len(_kept(d)) == KEPT_FRAMES and before[0] not in _kept(d)


def test_frames_of_a_run_changed_in_memory_are_not_kept_nor_read(tmp_path, monkeypatch):
    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    run_frames(open_run_dir(d))
    _fresh_process(monkeypatch)
    run = open_run_dir(d)
    assert run.as_read
    run.judgments["J"] = run.judgments["J"][:1]  # changed in memory: not the files' frames
    assert not run.as_read
    assert run_frames(run).judgments.filter(pl.col("judge") == "J").height == 1
    # a run opened otherwise may have been changed in place before its first frames: they are made
    other = Run.open(d)
    j = next(j for j in other.judgments["J"] if any(lb.behaviours for lb in j.labels))
    j.labels.clear()  # in place: no state could see it
    assert read_digest(other) is None  # a plain Run: nothing kept is read for it
    assert run_frames(other).labels.height < run_frames(Run.open(d)).labels.height


def test_a_run_folder_that_cannot_be_written_keeps_nothing_and_works(tmp_path, monkeypatch):
    d = _write(tmp_path / "run")
    expected = fr._run_frames(Run.open(d), load_taxonomy())
    (d / CACHE_DIR).write_text("a file where the folder would go")
    _fresh_process(monkeypatch)
    _same(run_frames(open_run_dir(d)), expected)
    (d / CACHE_DIR).unlink()
    if os.geteuid() != 0:  # root writes anyway
        d.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            _fresh_process(monkeypatch)
            _same(run_frames(open_run_dir(d)), expected)
            assert not (d / CACHE_DIR).exists()
        finally:
            d.chmod(stat.S_IRWXU)


def test_a_kept_frame_that_cannot_be_read_is_made_again_and_said(tmp_path, monkeypatch, caplog):
    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    made = run_frames(open_run_dir(d))
    (d / CACHE_DIR / _kept(d)[0] / "counts.arrow").write_bytes(b"not arrow")
    _fresh_process(monkeypatch)
    with caplog.at_level(logging.WARNING):
        again = run_frames(open_run_dir(d))
    _same(made, again)
    assert "cannot be read" in caplog.text


def test_a_store_never_mixes_two_versions_of_a_file(tmp_path):
    d = _write(tmp_path / "run")
    run = RunStore.open(d)
    assert run.digest == RunStore.open(d).digest and run.state() == ("as read",) * 4
    assert run.unread == {"instances", "continuations", "judgments", "human"}
    assert run.instances == Run.open(d).instances  # read at first use
    assert run.unread == {"continuations", "judgments", "human"}
    js = d / "judgments" / "J.jsonl"
    js.write_text(js.read_text().replace('"repetition"', '"off_topic"', 1))
    with pytest.raises(InputError) as e:
        run.judgments  # noqa: B018
    assert "judgments/J.jsonl changed after the run was opened" in str(e.value) and "open the run again" in str(e.value)
    (d / "continuations" / "new.jsonl").write_text((d / "continuations" / "sim.jsonl").read_text())
    with pytest.raises(InputError, match=r"continuations/new\.jsonl"):
        run.continuations  # noqa: B018
    (d / "continuations" / "new.jsonl").unlink()
    whole = RunStore.open(d)
    assert whole.run() == Run.open(d) and whole.run() is whole.run() and not whole.unread  # read once, whole


def test_one_record_of_a_store_is_read_from_its_own_line_as_the_whole_read_gives_it(tmp_path):
    """``RunStore.instance`` and ``RunStore.continuation`` parse one line (the part stays
    unread) and give what ``Run.open`` gives: a continuation read against its instance
    (``checked_turns``: one with a turn too few is invalid), None where there is none."""
    from cocoeval.core.schema import Turn

    run = make_run(3)
    short = run.continuations["sim"][1]
    run.continuations["sim"][1] = short.model_copy(update={"turns": [Turn(speaker="A", text="hi")]})
    d = tmp_path / "run"
    write_run_dir(d, run, {"status": "complete"})
    eager, lazy = Run.open(d), RunStore.open(d)
    for inst in eager.instances:
        assert lazy.instance(inst.id) == inst == eager.instance(inst.id)
        for setup, cs in eager.continuations.items():
            want = next((c for c in cs if c.instance_id == inst.id), None)
            assert lazy.continuation(setup, inst.id) == want == eager.continuation(setup, inst.id)
    got = lazy.continuation("sim", short.instance_id)
    assert got is not None and got.status == "invalid" and got.reason.startswith("read as invalid")
    assert lazy.instance("nope") is None and lazy.continuation("nope", eager.instances[0].id) is None
    assert lazy.continuation("sim", "nope") is None
    assert {"instances", "continuations"} <= lazy.unread  # nothing was read whole
    # a file changed since the opening is refused, as a whole read refuses it
    late = RunStore.open(d)
    f = d / "continuations" / "sim2.jsonl"
    f.write_text(f.read_text().replace('"ok"', '"invalid"', 1))
    with pytest.raises(InputError, match=r"continuations/sim2\.jsonl changed after the run was opened"):
        late.continuation("sim2", eager.instances[0].id)


def test_a_bad_line_found_by_one_record_read_is_the_whole_read_error(tmp_path):
    """A file a store cannot index by instance (an instance twice, a line that is no JSON) is
    read whole: its error names the file and both lines, as ``Run.open`` says it."""
    d = _write(tmp_path / "run")
    f = d / "continuations" / "sim.jsonl"
    lines = f.read_text().splitlines()
    f.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(InputError) as lazy_error:
        RunStore.open(d).continuation("sim", "x")
    with pytest.raises(InputError) as whole_error:
        Run.open(d)
    assert str(lazy_error.value) == str(whole_error.value) and "is here twice" in str(lazy_error.value)
    f.write_text("\n".join([*lines[:1], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(InputError, match="invalid JSON") as e:
        RunStore.open(d).continuation("sim", "x")
    assert "sim.jsonl" in str(e.value) and "line 2" in str(e.value)


def test_names_and_coverage_of_a_store_are_those_of_its_records(tmp_path, monkeypatch):
    from cocoeval.analysis.coverage import paper_coverage, run_facts
    from cocoeval.analysis.store import kept_facts

    d = _write(tmp_path / "run")
    (d / "continuations" / "a-b.jsonl").write_text((d / "continuations" / "sim.jsonl").read_text())  # '-' < '.'
    (d / "judgments" / "human").mkdir()
    eager = Run.open(d)
    _fresh_process(monkeypatch)
    run_frames(open_run_dir(d))
    _fresh_process(monkeypatch)
    with recorded_reads() as seen:
        run = open_run_dir(d)
        names = {p: run.names(p) for p in ("continuations", "judgments", "human", "all_judgments")}
        coverage = paper_coverage(run)
        facts = kept_facts(run)
    assert _read(seen, d) == ["manifest.json"]  # none of them reads a record
    assert names == {
        "continuations": list(eager.continuations),
        "judgments": list(eager.judgments),
        "human": list(eager.human),
        "all_judgments": list(eager.all_judgments),
    }
    assert names["continuations"][0] == "a-b"
    assert facts == {"coverage": run_facts(eager), "integrity_warnings": eager.integrity_warnings()}
    assert coverage == paper_coverage(eager)
    run.continuations["sim"] = []  # changed in memory: nothing kept is given for it
    assert kept_facts(run) is None and kept_facts(eager) is None
    with pytest.raises(ValueError, match="part must be one of"):
        run.names("instances")


def test_kept_files_edited_by_hand_are_not_believed(tmp_path, monkeypatch, caplog):
    from cocoeval.analysis.coverage import paper_coverage

    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    made = run_frames(open_run_dir(d))
    folder = d / CACHE_DIR / _kept(d)[0]
    pl.DataFrame({"other": [1]}).write_ipc(folder / "likert.arrow")  # valid Arrow, another frame
    (folder / "facts.json").write_text('{"coverage": {"datasets": 3}}')
    _fresh_process(monkeypatch)
    with caplog.at_level(logging.WARNING):
        run = open_run_dir(d)
        again = run_frames(run)
        coverage = paper_coverage(run)
    _same(made, again)
    assert "likert.arrow has other columns" in caplog.text and coverage == paper_coverage(Run.open(d))
    (folder / "facts.json").write_text("not json")
    _fresh_process(monkeypatch)
    with caplog.at_level(logging.WARNING):
        assert paper_coverage(open_run_dir(d)) == coverage
    assert "kept facts" in caplog.text


def test_two_processes_keeping_the_same_frames_leave_one_whole_copy(tmp_path, monkeypatch):
    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    made = run_frames(open_run_dir(d))
    folder = d / CACHE_DIR / _kept(d)[0]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    frames = {n: getattr(made, n) for n in fr._FRAME_NAMES}
    store._keep(folder, frames, {"coverage": None})  # a second writer, after the first: nothing replaced
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before and _kept(d) == [folder.name]
    assert not [p for p in (d / CACHE_DIR).iterdir() if p.name.endswith(".tmp")]


def test_the_integrity_warnings_are_kept_with_the_frames(tmp_path, monkeypatch):
    from cocoeval.analysis.store import integrity_warnings

    d = _write(tmp_path / "run")
    manifest = d / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"status"', '"instances": 99, "status"'))  # says 99
    eager = Run.open(d)
    assert any("99 instances" in w for w in eager.integrity_warnings())
    _fresh_process(monkeypatch)
    run_frames(open_run_dir(d))
    _fresh_process(monkeypatch)
    with recorded_reads() as seen:
        run = open_run_dir(d)
        warnings = integrity_warnings(run)
    assert _read(seen, d) == ["manifest.json"] and warnings == eager.integrity_warnings()
    run.judgments["J"] = []  # changed in memory: from its records again
    assert integrity_warnings(run) == run.integrity_warnings()


def test_the_judge_free_frames_are_kept_and_a_report_then_reads_no_record(tmp_path, monkeypatch, caplog):
    from cocoeval.analysis import convstats
    from cocoeval.analysis.report import write_report

    d = _write(tmp_path / "run")
    eager = Run.open(d)
    conv, turns = store.DERIVED["convstats"].make(eager, None), store.DERIVED["turn_taking"].make(eager, None)
    _fresh_process(monkeypatch)
    first = write_report(d, tmp_path / "a", resamples=50)  # reads the run whole and keeps its frames
    _fresh_process(monkeypatch)
    with recorded_reads() as seen:
        run = open_run_dir(d)
        assert convstats.conversation_frame(run).equals(conv) and convstats.turn_taking_frame(run).equals(turns)
        second = write_report(d, tmp_path / "b", resamples=50)
    assert _read(seen, d) == ["manifest.json"]  # no record: the report is made from what was kept
    assert sorted(first.figures) == sorted(second.figures)
    for p in (tmp_path / "a").iterdir():
        if p.suffix in (".csv", ".md"):
            assert p.read_bytes() == (tmp_path / "b" / p.name).read_bytes(), p.name
    # a kept judge-free frame with other columns is not believed
    pl.DataFrame({"other": [1.0]}).write_ipc(d / CACHE_DIR / _kept(d)[0] / "convstats.arrow")
    _fresh_process(monkeypatch)
    with caplog.at_level(logging.WARNING):
        assert convstats.conversation_frame(open_run_dir(d)).equals(conv)
    assert "other columns" in caplog.text


def test_a_judge_free_frame_that_fails_is_not_kept_and_fails_where_it_is_asked_for(tmp_path, monkeypatch):
    from cocoeval.analysis import convstats

    d = _write(tmp_path / "run")

    def broken(run, taxonomy):
        raise RuntimeError("planted")

    monkeypatch.setitem(store.DERIVED, "convstats", replace(store.DERIVED["convstats"], make=broken))
    _fresh_process(monkeypatch)
    run_frames(open_run_dir(d))  # the run opens: only the judge-free statistics cannot be made
    assert not (d / CACHE_DIR / _kept(d)[0] / "convstats.arrow").exists()
    assert (d / CACHE_DIR / _kept(d)[0] / "turn_taking.arrow").exists()
    _fresh_process(monkeypatch)
    with pytest.raises(RuntimeError, match="planted"):
        convstats.conversation_frame(open_run_dir(d))


def test_a_derived_frame_registered_with_one_decorator_is_kept_and_read_back_without_a_record(tmp_path, monkeypatch):
    """Adding a derived frame is one decorated pure function of the run (``store.derived_frame``):
    ``open_run_dir`` keeps it with the run's frames, the next process reads it back and no record,
    and a run read whole has it made from its records."""
    d = _write(tmp_path / "run")
    monkeypatch.setitem(store.DERIVED, "turns_per_instance", None)  # removed again after the test
    page = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    code = page.split("<!-- walkthrough: derived-frame -->", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "docs/extending.md (derived frame)", "exec"), namespace)  # the example as written
    turns_per_instance = namespace["turns_per_instance"]

    _fresh_process(monkeypatch)
    made = turns_per_instance(open_run_dir(d))
    assert (d / CACHE_DIR / _kept(d)[0] / "turns_per_instance.arrow").exists()
    _fresh_process(monkeypatch)
    with recorded_reads() as seen:
        run = open_run_dir(d)
        kept = turns_per_instance(run)
    assert _read(seen, d) == ["manifest.json"] and kept.equals(made) and made.height == len(Run.open(d).instances)
    assert turns_per_instance(run) is kept  # once per run (the memo)
    assert turns_per_instance(Run.open(d)).equals(made)  # a Run read whole: made from its records


def test_a_second_derived_frame_of_a_taken_name_is_refused_and_the_first_kept():
    """A plugin's or notebook's frame named like a built-in one would silently replace what every
    analysis reads: it is refused, naming both functions."""
    import pytest

    from cocoeval.analysis import convstats

    before = store.DERIVED["speakers"]
    with pytest.raises(ValueError, match=r"'speakers' is registered already.*give .* another name"):

        @store.derived_frame("speakers", convstats.SPEAKER_SCHEMA)
        def speakers(run):  # pragma: no cover - never registered
            raise AssertionError

    assert store.DERIVED["speakers"] is before


def test_the_judge_free_tables_of_the_default_settings_are_kept_and_equal_a_fresh_computation(tmp_path, monkeypatch):
    """``cocoeval run``'s last step keeps the judge-free tables the report computes with its default
    settings (the classifier test, next speaker, judge-free means and paired tests: the defaults of
    ``detectability``, ``turntaking.next_speaker_table``, ``convcompare.run_means``...): a later process reads them, and
    they equal what a run read whole computes; other settings are computed, never read from there."""
    from cocoeval.analysis import convcompare, convstats
    from cocoeval.analysis import detectability as det
    from cocoeval.analysis import judge_free as jf
    from cocoeval.analysis import turntaking as tt
    from cocoeval.analysis.frames import keep_frames

    from .test_report_same import paper_scale

    d = tmp_path / "run"
    paper_scale().write_paper_run(d, per_dataset=11, chats=3, turns_n=8)
    eager = Run.open(d)
    fresh = det._detectability(eager, resamples=1000, seed=0, min_n=MIN_N, permutations=det.PERMUTATIONS)
    assert fresh["auc"].is_not_null().any()  # a test with an AUC, not only notes
    forced = tt.next_speaker_table(eager)  # a Run read whole: computed
    runs = tt.run_lengths(tt.run_length_frame(eager), resamples=1000, seed=0, min_n=MIN_N)
    conv = convstats.conversation_frame(eager)
    means = convcompare.means(conv, resamples=1000, seed=0, min_n=MIN_N)
    vs_human = convcompare.paired_vs_human(conv, resamples=1000, seed=0, min_n=MIN_N, correction="bh")
    assert vs_human["p"].is_not_null().any()
    _fresh_process(monkeypatch)
    folder = keep_frames(d)
    assert folder is not None and (folder / "detectability.arrow").exists() and (folder / "next_speaker.arrow").exists()
    _fresh_process(monkeypatch)
    made: list[str] = []
    monkeypatch.setattr(det, "_detectability", lambda *a, **k: made.append("detectability") or fresh)
    with recorded_reads() as seen:
        run = open_run_dir(d)
        kept = det.detectability(run)
        tables = tt.turn_taking_tables(run, None)
        assert kept.equals(fresh) and tables.next_speaker.equals(forced) and tables.run_lengths.equals(runs)
        free = jf.judge_free(run)
        assert free.tables["means"].equals(means) and free.tables["vs_human"].equals(vs_human)
    assert _read(seen, d) == ["manifest.json"] and made == []  # read from the kept folder, nothing computed
    det.detectability(run, resamples=50)  # other settings: computed
    assert made == ["detectability"]


def test_keeping_a_runs_frames_imports_neither_the_charts_nor_scikit_learn(tmp_path):
    """``cocoeval run``'s last step (``frames.keep_frames``) computes the judge-free tables of the
    default settings, but imports no charting library (Altair) and no scikit-learn: a fresh process."""
    import subprocess
    import sys

    from .test_report_same import paper_scale

    d = tmp_path / "run"
    paper_scale().write_paper_run(d, per_dataset=11, chats=3, turns_n=8)
    code = (
        "import sys; from cocoeval.analysis.frames import keep_frames; f = keep_frames(sys.argv[1]); "
        "print((f / 'detectability.arrow').exists(), 'altair' in sys.modules, 'sklearn' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "False"]


def test_the_judge_based_tables_of_the_default_settings_are_kept_per_taxonomy_and_equal_a_fresh_computation(
    tmp_path, monkeypatch
):
    """``cocoeval run``'s last step keeps the judge-based tables the report computes with its default
    settings too (the paired comparisons and rank intervals, the judges' sanity check, the
    per-speaker fidelity, the leaderboard: ``store.derived_frame(by_taxonomy=True)``): a later process reads them
    for the run's own frames, and they equal what a run read whole computes; other settings, and
    frames made otherwise than ``run_frames``, are computed, never read from there."""
    from dataclasses import replace

    from cocoeval.analysis import convcompare, convstats
    from cocoeval.analysis import leaderboard as lb
    from cocoeval.analysis import paired as pd
    from cocoeval.analysis import turntaking as tt
    from cocoeval.analysis.frames import judges_of, keep_frames, setups_of
    from cocoeval.analysis.paper_stats import conditions
    from cocoeval.core.speed import one_blas_thread

    from .test_report_same import paper_scale

    d = tmp_path / "run"
    paper_scale().write_paper_run(d, per_dataset=11, chats=3, turns_n=8)
    eager = Run.open(d)
    f = run_frames(eager)
    kw = {"resamples": 1000, "seed": 0, "min_n": MIN_N}
    with one_blas_thread():  # as every analysis computes
        pairs, ranks = pd._tables(f, judges_of(f), setups_of(f, conditions(eager)), **kw, correction="holm")
        sanity = convcompare.judge_sanity(f, convstats.conversation_frame(eager), **kw)
        fidelity = tt.speaker_fidelity(eager, f, judges_of(f), **kw)
        board, per_behaviour = lb._board(eager, f, **kw)
    assert board["distance"].is_not_null().any() and per_behaviour.height
    assert pairs["p"].is_not_null().any() and ranks.height and sanity["rho"].is_not_null().any()
    assert fidelity["scored"].any()
    _fresh_process(monkeypatch)
    folder = keep_frames(d)
    assert folder is not None and {"paired.arrow", "rank_intervals.arrow", "judge_sanity.arrow"} <= {
        p.name for p in folder.iterdir()
    }
    _fresh_process(monkeypatch)
    made: list[str] = []
    real = (pd.compare_setups, convcompare.judge_sanity, tt.speaker_fidelity)
    monkeypatch.setattr(pd, "compare_setups", lambda *a, **k: made.append("paired") or real[0](*a, **k))
    monkeypatch.setattr(convcompare, "judge_sanity", lambda *a, **k: made.append("sanity") or real[1](*a, **k))
    monkeypatch.setattr(tt, "speaker_fidelity", lambda *a, **k: made.append("fidelity") or real[2](*a, **k))
    monkeypatch.setattr(lb, "leaderboard", lambda *a, **k: made.append("leaderboard"))
    with recorded_reads() as seen:
        run = open_run_dir(d)
        own = run_frames(run)
        answer = pd.run_answer(run, own, **kw)
        assert answer.tables["paired"].equals(pairs) and answer.tables["rank_intervals"].equals(ranks)
        assert convcompare.run_judge_sanity(run, own, **kw).equals(sanity)
        judge = judges_of(own)[0]
        one = tt.turn_taking_tables(run, own, [judge], **kw).speaker_fidelity
        assert one.equals(fidelity.filter(pl.col("judge") == judge)) and one.height
        ranked = lb.answer(run, own, **kw)
        assert ranked.tables["leaderboard"].equals(board) and ranked.tables["behaviours"].equals(per_behaviour)
    assert _read(seen, d) == ["manifest.json"] and made == []  # read from the kept folder, nothing computed
    pd.paired_table(run, own, **kw, correction="bh")  # other settings: computed
    assert made == ["paired"] * len(judges_of(own))
    assert pd.rank_interval_table(run, own, **kw, correction="bh").height  # made with the pairs, not again
    assert made == ["paired"] * len(judges_of(own))
    other = replace(own, counts=own.counts.head(50))  # frames not the run's: computed, once per frames object
    computed = convcompare.run_judge_sanity(run, other, **kw)
    assert made[-1] == "sanity" and not computed.equals(sanity)
    assert convcompare.run_judge_sanity(run, other, **kw) is computed and made.count("sanity") == 1
    convcompare.run_judge_sanity(run, replace(own, counts=own.counts.head(50)), **kw)
    assert made.count("sanity") == 2
    with pytest.raises(TypeError, match="unknown setting"):
        pd.paired_table(run, own, resample=10)
    with pytest.raises(TypeError, match="takes the run and its frames"):
        pd.paired_table(run, own.taxonomy)  # a taxonomy is not frames


def test_a_derived_frame_needs_a_default_for_every_setting_and_keeps_the_frame_of_the_defaults(tmp_path, monkeypatch):
    """A derived frame's keyword-only settings each need a default (the frame of the defaults is the
    one kept); asked with other settings it is made, once per run and settings."""
    d = _write(tmp_path / "run")
    monkeypatch.setitem(store.DERIVED, "turn_count", None)  # removed again after the test
    with pytest.raises(TypeError, match="need defaults: scale"):

        @store.derived_frame("turn_count_bad", {"n": pl.Int64})
        def bad(run, *, scale):  # pragma: no cover - never registered
            raise AssertionError

    calls: list[int] = []

    @store.derived_frame("turn_count", {"n": pl.Int64})
    def turn_count(run, *, scale: int = 1) -> pl.DataFrame:
        calls.append(scale)
        return pl.DataFrame({"n": [scale * sum(len(i.reference) for i in run.instances)]}, schema={"n": pl.Int64})

    _fresh_process(monkeypatch)
    run = open_run_dir(d)  # keeps it: made with the defaults
    assert calls == [1] and (store.held_folder(run) / "turn_count.arrow").exists()
    assert turn_count(run)["n"][0] == sum(len(i.reference) for i in Run.open(d).instances) and calls == [1]
    assert turn_count(run, scale=2)["n"][0] == 2 * turn_count(run)["n"][0] and calls == [1, 2]
    turn_count(run, scale=2)  # once per run and settings
    assert calls == [1, 2]


def test_a_lazy_table_is_made_when_first_asked_for_then_kept_and_read_by_the_next_process(tmp_path, monkeypatch):
    """A table computed from the kept frames (``derived_frame(lazy=True)``: the classifier test...)
    is not made when a report or notebook first opens a run whose frames were not kept (so that it
    is computed while the figures are drawn, without every record in memory): it is made when
    first asked for and kept beside the frames then; ``keep_frames`` (the last step of ``cocoeval
    run``) makes every one. A run folder that cannot be written keeps none and still answers."""
    from cocoeval.analysis import detectability as det
    from cocoeval.analysis.frames import keep_frames

    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    run = open_run_dir(d)  # (the store imports the modules that register the built-in frames)
    lazy = sorted(n for n, p in store.DERIVED.items() if p.lazy)
    assert {"detectability", "paired", "leaderboard", "next_speaker"} <= set(lazy)
    folder = store.held_folder(run)
    assert folder is not None and not any((folder / f"{n}.arrow").exists() for n in lazy)
    made = det.detectability(run)
    assert (folder / "detectability.arrow").exists() and not (folder / "next_speaker.arrow").exists()
    _fresh_process(monkeypatch)
    monkeypatch.setattr(det, "_detectability", lambda *a, **k: pytest.fail("computed again"))
    assert det.detectability(open_run_dir(d)).equals(made)
    monkeypatch.undo()
    _fresh_process(monkeypatch)
    assert keep_frames(d) == folder and all((folder / f"{n}.arrow").exists() for n in lazy)
    # where the file cannot be written (its temporary name taken by a folder): made, not kept, no error
    (folder / "detectability.arrow").unlink()
    (folder / f".detectability.{os.getpid()}.tmp").mkdir()
    _fresh_process(monkeypatch)
    assert det.detectability(open_run_dir(d)).equals(made)
    assert not (folder / "detectability.arrow").exists()


def test_a_judge_based_table_is_never_read_for_another_taxonomy_nor_for_frames_changed_from_the_runs(
    tmp_path, monkeypatch
):
    """What is kept for the shipped taxonomy is not the table of another (a definition changed): it
    is computed, and not kept in the shipped one's folder; frames cannot be changed in place
    (``Frames`` is frozen), and a per-speaker fidelity asked for a judge the frames do not list is
    computed."""
    import dataclasses

    import yaml

    from cocoeval.analysis import convcompare
    from cocoeval.analysis import turntaking as tt
    from cocoeval.analysis.frames import keep_frames
    from cocoeval.core.taxonomy import default_taxonomy_path

    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    folder = keep_frames(d)
    shipped = (folder / "judge_sanity.arrow").read_bytes()
    data = yaml.safe_load(default_taxonomy_path().read_text())
    data["behaviours"][0]["definition"] += " Even briefly."
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(data))
    tax = load_taxonomy(other)
    assert tax.hash != load_taxonomy().hash
    _fresh_process(monkeypatch)
    run = open_run_dir(d)  # held with the shipped taxonomy
    assert store.kept_frame(run, "judge_sanity", convcompare.SANITY_SCHEMA, tax) is None
    calls: list[str] = []
    real = convcompare.judge_sanity
    monkeypatch.setattr(convcompare, "judge_sanity", lambda *a, **k: calls.append("made") or real(*a, **k))
    convcompare.run_judge_sanity(run, run_frames(run, tax))
    assert calls == ["made"] and (folder / "judge_sanity.arrow").read_bytes() == shipped
    own = run_frames(run)
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.counts = own.counts.head(1)  # type: ignore[misc]
    real_fidelity = tt.speaker_fidelity
    monkeypatch.setattr(tt, "speaker_fidelity", lambda *a, **k: calls.append("fidelity") or real_fidelity(*a, **k))
    tt.turn_taking_tables(run, own, ["not-a-judge"], resamples=50)
    assert calls[-1] == "fidelity"


def test_keep_frames_in_a_new_process_keeps_every_table_where_a_notebook_kept_the_frames_first(tmp_path):
    """A notebook or report that opened the run first kept its frames (not the lazy tables); the
    last step of ``cocoeval run`` in a fresh process, where nothing imported the modules that
    register the tables, still makes and keeps every one."""
    import subprocess
    import sys

    d = _write(tmp_path / "run")
    open_first = "import sys; from cocoeval.analysis.frames import open_run_dir; open_run_dir(sys.argv[1])"
    subprocess.run([sys.executable, "-c", open_first, str(d)], check=True)
    (folder,) = (d / CACHE_DIR).iterdir()
    assert not (folder / "paired.arrow").exists() and (folder / "counts.arrow").exists()
    keep = "import sys; from cocoeval.analysis.frames import keep_frames; print(keep_frames(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", keep, str(d)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(folder)
    assert {"paired.arrow", "leaderboard.arrow", "detectability.arrow", "speaker_fidelity.arrow"} <= {
        p.name for p in folder.iterdir()
    }


def test_a_lazy_table_that_cannot_be_made_is_left_by_keep_all_and_fails_where_it_is_asked_for(tmp_path, monkeypatch):
    """``keep_all`` keeps what it can: a table whose making fails is not kept (logged), the others
    are, and the analysis asking for it gets the error."""
    from cocoeval.analysis import detectability as det
    from cocoeval.analysis.frames import keep_frames

    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    open_run_dir(d)

    def broken(run, taxonomy):
        raise RuntimeError("planted")

    monkeypatch.setitem(store.DERIVED, "detectability", replace(store.DERIVED["detectability"], make=broken))
    _fresh_process(monkeypatch)
    folder = keep_frames(d)
    assert not (folder / "detectability.arrow").exists() and (folder / "next_speaker.arrow").exists()
    with pytest.raises(RuntimeError, match="planted"):
        det.detectability(open_run_dir(d))


def test_a_lazy_table_is_made_on_one_blas_thread_wherever_it_is_asked_for(tmp_path, monkeypatch):
    """Asked for outside the analyses' registry (a notebook cell calling the function), a lazy
    table is still made on one BLAS thread before it is kept: a kept table and the same table
    computed by the report are the same bytes."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from cocoeval.analysis import detectability as det

    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    run = open_run_dir(d)
    seen: list[list[int]] = []
    real = store.DERIVED["detectability"].make

    def spy(run, taxonomy):
        seen.append([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
        return real(run, taxonomy)

    monkeypatch.setitem(store.DERIVED, "detectability", replace(store.DERIVED["detectability"], make=spy))
    with threadpool_limits(limits=2, user_api="blas"):
        det.detectability(run)
    assert seen and seen[0] and set(seen[0]) == {1}


def test_a_table_of_frames_not_the_runs_own_is_made_once_and_again_when_the_run_changes(tmp_path, monkeypatch):
    """A judge-based table asked of frames that are not the run's own (here filtered) is computed
    from them, once per frames object and settings while the run is unchanged, and again once the
    run's files change (the table reads the run's texts as well as the frames)."""
    from cocoeval.analysis import convcompare

    d = _write(tmp_path / "run")
    _fresh_process(monkeypatch)
    run = open_run_dir(d)
    own = run_frames(run)
    other = replace(own, counts=own.counts.head(5))
    assert not store.is_own_frames(run, other) and store.is_own_frames(run, own)
    calls: list[int] = []
    real = convcompare.judge_sanity
    monkeypatch.setattr(
        convcompare, "judge_sanity", lambda f, *a, **k: calls.append(f.counts.height) or real(f, *a, **k)
    )
    first = convcompare.run_judge_sanity(run, other, resamples=50)
    assert convcompare.run_judge_sanity(run, other, resamples=50) is first and calls == [5]
    (d / "note.txt").write_text("a note beside the run changes its files")
    again = convcompare.run_judge_sanity(run, other, resamples=50)
    assert calls == [5, 5] and again is not first and again.equals(first)
