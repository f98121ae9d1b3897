"""The judge's calibration and history (beyond the paper), checked on cases built by hand: a chat
is calibrated by the place of a turn among its judged (user) turns, the Brier interval resamples
source conversations, a conversation without the judge's current judgment is left out (not read
as fraction 0), and the history names the run relative to its folder, never follows a link or
waits on a pipe, orders entries by date, and calls a change only between entries measured on
the same labelled conversations and annotators and, between entries without per-conversation
statistics (written before them), only from ``CHANGE``, saying that rule was used."""

from __future__ import annotations

import json
import os

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import calibration as cal_mod
from cocoeval.analysis import judge_check as jc
from cocoeval.analysis.calibration import (
    CHANGE,
    NOT_COMPARABLE,
    POOLED,
    THRESHOLD_RULE,
    calibration,
    history_table,
    read_history,
    record_history,
)
from cocoeval.analysis.frames import run_frames
from cocoeval.core.schema import Judgment
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run

from ..sim_helpers import fine_reference, instance

TAX = load_taxonomy()
B0 = TAX.ids[0]


def fine(iid: str, rater: str, turns: list[int], marked: set[int]) -> Judgment:
    return fine_reference(iid, rater, {t: [B0] for t in marked}, turns)


def chat_run(n: int = 12) -> Run:
    """Chats of 6 reference turns (user at 0, 2, 4: the judged ones); judge and annotator both
    mark the behaviour on turn 4, the last judged turn, of every chat."""
    insts = [instance(f"chat/c{i:02d}/0", n_hist=2, n_ref=6, chat=True) for i in range(n)]
    js = {r: [fine(x.id, r, [0, 2, 4], {4}) for x in insts] for r in ("J", "A")}
    return Run.model_validate({"instances": insts, "continuations": {}, "judgments": js})


def test_a_chat_is_calibrated_by_the_place_of_a_turn_among_its_judged_turns():
    run = chat_run()
    f = run_frames(run)
    tl = jc.turn_labels(f, ["J", "A"])
    assert len(tl.conv) == 12 * 3  # three judged turns per chat
    col = tl.behaviours.index(B0)
    assert tl.x["A"][:, col].reshape(12, 3).tolist() == [[False, False, True]] * 12  # turn 4 is the third row
    c = calibration(run, f, "J", resamples=50, min_n=2)
    assert c is not None
    row = c.table.filter(pl.col("behaviour") == B0).row(0, named=True)
    # agreed on every chat: 12 positives, fraction 1 where the annotator marks it, Brier 0
    got = (row["positive_turns"], row["turns"], row["brier"], row["mean_fraction"])
    assert got == (12, 36, 0.0, pytest.approx(1 / 3))


def windows_run(sources: int, windows: int, turns: int = 4) -> Run:
    rng = np.random.default_rng(1)
    insts = [instance(f"d/c{s}/{w}", n_hist=2, n_ref=turns) for s in range(sources) for w in range(windows)]
    js: dict[str, list[Judgment]] = {"A": [], "J": []}
    for x in insts:
        marked = {t for t in range(turns) if rng.random() < 0.4}
        js["A"].append(fine(x.id, "A", list(range(turns)), marked))
        js["J"].append(fine(x.id, "J", list(range(turns)), {t for t in marked if rng.random() < 0.7}))
    return Run.model_validate({"instances": insts, "continuations": {}, "judgments": js})


def test_the_brier_interval_resamples_source_conversations_not_windows():
    run = windows_run(sources=2, windows=8)  # 16 windows of 2 meetings: 2 units to resample
    c = calibration(run, run_frames(run), "J", resamples=50)
    assert c is not None
    pooled = c.table.filter(pl.col("behaviour") == POOLED).row(0, named=True)
    assert pooled["conversations"] == 16 and pooled["brier_low"] is None
    assert "n too small (n=2" in pooled["note"]
    # against an independent cluster bootstrap: the interval lies within the spread of meeting means
    run = windows_run(sources=12, windows=2)
    c = calibration(run, run_frames(run), "J", resamples=400)
    assert c is not None
    pooled = c.table.filter(pl.col("behaviour") == POOLED).row(0, named=True)
    sq = ((c.p - c.y) ** 2).reshape(24, -1).sum(axis=1).reshape(12, 2).sum(axis=1)  # per meeting
    per = c.p.size // 12
    rng = np.random.default_rng(5)
    boots = [sq[idx].sum() / (per * 12) for idx in rng.integers(0, 12, size=(4000, 12))]
    lo, hi = np.quantile(boots, [0.025, 0.975])
    assert pooled["brier_low"] == pytest.approx(lo, abs=0.004) and pooled["brier_high"] == pytest.approx(hi, abs=0.004)


def test_a_conversation_without_the_judges_current_judgment_is_left_out_not_read_as_zero(monkeypatch):
    run = windows_run(sources=12, windows=1)
    f = run_frames(run)
    full = calibration(run, f, "J", resamples=20)
    real = cal_mod._current
    monkeypatch.setattr(cal_mod, "_current", lambda r, j: [x for x in real(r, j) if x.instance_id != "d/c0/0"])
    part = calibration(run, f, "J", resamples=20)
    assert full is not None and part is not None
    pooled = part.table.filter(pl.col("behaviour") == POOLED).row(0, named=True)
    assert pooled["turns"] == 11 * 4 * len(TAX.ids) and pooled["conversations"] == 11
    assert any("left out" in n for n in part.notes)
    assert np.array_equal(part.p, full.p[4 * len(TAX.ids) :].reshape(-1, len(TAX.ids)).ravel().reshape(part.p.shape))
    assert part.design != full.design


def entry(jid: str, f1: float, date: str, design: str | None = "d1") -> dict:
    return {"judge": "j", "judge_id": jid, "prompt": f"p@{jid}", "date": date, "run": "r", "design": design,
            "measures": {"any behaviour": {"alpha_with_judge": None, "kappa": f1, "f1": f1}}}  # fmt: skip


def f1_row(t: pl.DataFrame) -> dict:
    return t.filter(pl.col("measure") == "f1").row(0, named=True)


def test_entries_without_statistics_call_a_change_only_beyond_the_threshold_on_the_same_labelled_design():
    rose = f1_row(history_table([entry("a", 0.5, "1"), entry("b", 0.6, "2")], "j", "b"))
    assert (rose["direction"], rose["rule"], rose["ci_low"]) == ("rose", THRESHOLD_RULE.format("earlier"), None)
    small = f1_row(history_table([entry("a", 0.5, "1"), entry("b", 0.5 + CHANGE / 2, "2")], "j", "b"))
    assert small["direction"] == f"within ±{CHANGE:g}"
    other = f1_row(history_table([entry("a", 0.5, "1"), entry("b", 0.9, "2", "d2")], "j", "b"))
    assert other["direction"] == NOT_COMPARABLE
    unknown = f1_row(history_table([entry("a", 0.5, "1", None), entry("b", 0.9, "2")], "j", "b"))
    assert unknown["direction"] == NOT_COMPARABLE
    # ordered by date, not by place in the file: b (dated 3) is compared with c (dated 2), not a
    late = history_table([entry("a", 0.1, "1"), entry("b", 0.5, "3"), entry("c", 0.8, "2")], "j", "b")
    assert (f1_row(late)["previous_id"], f1_row(late)["direction"]) == ("c", "fell")


def test_the_history_is_written_once_by_one_append_and_never_through_a_link_or_into_a_pipe(tmp_path):
    path = tmp_path / "judge_history.jsonl"
    e = entry("a", 0.5, "1")
    assert record_history(path, e) and not record_history(path, e)  # the same numbers: nothing added
    assert read_history(path) == [e]
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    link = tmp_path / "linked" / "judge_history.jsonl"
    link.parent.mkdir()
    link.symlink_to(target)
    assert not record_history(link, e) and target.read_text() == ""
    fifo = tmp_path / "piped" / "judge_history.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    assert not record_history(fifo, e) and read_history(fifo) == []  # returns at once, nothing waits
    assert json.loads(path.read_text().splitlines()[0])["design"] == "d1"


def test_the_reliability_of_a_one_answer_judge_reads_no_judgment_record(tmp_path):
    """A judge the manifest records as asking one answer per target has no samples to count: the
    analysis answers from the kept frames, so the first report after a run reads no judgment file."""
    from cocoeval.analysis import analyses, store
    from cocoeval.analysis.analyses import Params
    from cocoeval.analysis.frames import open_run_dir, run_frames
    from cocoeval.core.jsonio import recorded_reads

    from ..sim_helpers import write_run_dir
    from .test_leaderboard import _board_run, simulated

    d = tmp_path / "run"
    judges = [{"name": "J", "model": "openai/gpt-4.1", "kind": ["fine_grained", "overall"]}]
    write_run_dir(d, _board_run(), {"status": "complete", "params": {"setups": [simulated("a")], "judges": judges}})
    run_frames(open_run_dir(d))  # the frames kept, as cocoeval run leaves them
    store._CACHE.clear()
    with recorded_reads() as seen:
        a = analyses.compute("judge_reliability", open_run_dir(d), Params(judge="J", resamples=20))
    assert a.result is not None
    assert [p for p in seen if "/judgments/" in p] == []
