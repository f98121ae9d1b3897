"""The paired comparisons and rank intervals (beyond the paper) through the documented commands,
``cocoeval run`` then ``cocoeval report --html``, on a small run of the mock model: three setups
whose judged behaviour the judge's script fixes per meeting (one as the humans, one a little off,
one far off), several windows per meeting. The report's paired table and figure, the rank
intervals in the leaderboard table (CSV, Markdown, HTML) and the numbers equal
``paired.compare_setups`` on the run's frames."""

from __future__ import annotations

import polars as pl
import pytest
import yaml

from cocoeval import build
from cocoeval.analysis import paired
from cocoeval.analysis.frames import run_frames
from cocoeval.run import Run

from ..conftest import write_json
from .test_compare_cli import MEETINGS, cli, fine, meeting, sim_script


def judge_script() -> dict:
    """Per meeting i the humans show 1 + i % 3 repetitions; setup "same" the same; "near" one or
    two more (by meeting); "far" eight more and three turns off topic."""
    answers = []
    for word, extra, off in (("far", 8, 3), ("near", 1, 0), ("same", 0, 0)):
        for i in range(MEETINGS):
            answers.append(
                {"match": f"{word} ", "context": f"topic{i} ", "text": fine(1 + i % 3 + extra + (i % 2) * extra, off)}
            )
    for i in range(MEETINGS):
        answers.append({"match": "Continuation to annotate", "context": f"topic{i} ", "text": fine(1 + i % 3)})
    return {"answers": answers}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("paired")
    for i in range(MEETINGS):
        write_json(tmp / "src" / "product" / f"M{i}.json", meeting(i, 200 + i))
    build([f"qmsum:{tmp / 'src'}"], tmp / "bench")
    (tmp / "judge.yaml").write_text(yaml.safe_dump(judge_script()))
    for word in ("same", "near", "far"):
        (tmp / f"{word}.yaml").write_text(yaml.safe_dump(sim_script(word)))
    (tmp / "p.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "setups": [{"name": w, "model": f"mock/{tmp / f'{w}.yaml'}"} for w in ("same", "near", "far")],
                "judges": [{"name": "j", "model": f"mock/{tmp / 'judge.yaml'}", "kind": ["fine_grained"]}],
                "llm": {"cache": "cache.sqlite"},
            },
            sort_keys=False,
        )
    )
    cli("run", "p.yaml", "--no-progress", cwd=tmp)
    cli("report", "runs/p", "--out", "rep", "--html", "--resamples", "200", cwd=tmp)
    return tmp


def test_the_report_has_the_paired_table_the_figure_and_rank_intervals_in_the_leaderboard(world):
    rep = world / "rep"
    table = pl.read_csv(rep / "paired.csv")
    assert set(table["correction"].to_list()) == {"holm"}
    pairs = {frozenset((a, b)) for a, b in table.select("a", "b").unique().iter_rows()}
    assert pairs == {frozenset(("same", "near")), frozenset(("same", "far")), frozenset(("near", "far"))}
    dist = table.filter(pl.col("behaviour") == paired.DISTANCE)
    for r in dist.iter_rows(named=True):  # each pair: the one farther from the humans confidently so
        farther = r["a"] if r["verdict"] == paired.A_FARTHER else r["b"] if r["verdict"] == paired.B_FARTHER else None
        assert farther == ("far" if "far" in (r["a"], r["b"]) else "near")
        assert 1 < r["clusters"] < r["n"]  # several windows of each meeting, resampled by meeting
    board = pl.read_csv(rep / "leaderboard.csv").filter(pl.col("rank").is_not_null())
    ranks = {r["setup"]: (r["rank"], r["rank_low"], r["rank_high"]) for r in board.iter_rows(named=True)}
    assert ranks == {"same": (1, 1, 1), "near": (2, 2, 2), "far": (3, 3, 3)}  # every rank settled
    assert all(lo <= rank <= hi for rank, lo, hi in ranks.values())
    md = (rep / "leaderboard.md").read_text()
    assert "rank_low" in md and "rank_high" in md
    intervals = pl.read_csv(rep / "rank_intervals.csv")
    assert {r["setup"]: (r["rank_low"], r["rank_high"]) for r in intervals.iter_rows(named=True)} == {
        s: (lo, hi) for s, (_, lo, hi) in ranks.items()
    }
    index = (rep / "index.md").read_text()
    section = index[index.index("## Leaderboard of simulators") : index.index("## Judge-based statistics")]
    for name in ("[paired.csv]", "[rank_intervals.csv]", "[paired.png]", "Beyond the paper: every pair of setups"):
        assert name in section
    html = (rep / "index.html").read_text()
    assert "Beyond the paper: every pair of setups" in html and "rank_intervals" in html


def test_the_reported_numbers_are_compare_setups_on_the_runs_frames(world):
    f = run_frames(Run.open(world / "runs" / "p"))
    setups = pl.read_csv(world / "rep" / "paired.csv")["a"].unique(maintain_order=True).to_list()
    setups += [s for s in ("same", "near", "far") if s not in setups]
    direct = paired.compare_setups(
        paired.counts_of(f.counts, f.instances, "j"), f.taxonomy.ids, judge="j", setups=setups, resamples=200
    ).frame()
    got = pl.read_csv(world / "rep" / "paired.csv", schema_overrides=paired.PAIR_SCHEMA)
    cols = ["a", "b", "behaviour", "n", "clusters", "diff", "ci_low", "ci_high", "p", "p_adj", "verdict"]
    assert got.select(cols).equals(direct.select(cols))


def test_the_reports_floor_row_draws_whole_meetings_into_its_halves(world):
    """The leaderboard's floor row through ``cocoeval report``: its mean and range are
    ``leaderboard.floor`` of the run's human references resampled by source conversation (several
    windows per meeting here), not by reference."""
    import numpy as np

    from cocoeval.analysis import leaderboard, stats
    from cocoeval.core.targets import REFERENCE

    f = run_frames(Run.open(world / "runs" / "p"))
    ref = f.counts.filter((pl.col("judge") == "j") & (pl.col("target") == REFERENCE))
    ids, h = stats.count_matrix(ref, f.taxonomy.ids)
    codes = leaderboard.conversation_codes(ids, leaderboard.conversations(f))
    assert 4 <= int(codes.max()) + 1 < len(ids)
    fl = leaderboard.floor(h, 200, 0, codes)
    row = (
        pl.read_csv(world / "rep" / "leaderboard.csv")
        .filter(pl.col("origin") == leaderboard.ORIGIN_FLOOR)
        .row(0, named=True)
    )
    assert row["distance"] == pytest.approx(fl.mean())
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(np.percentile(fl, [2.5, 97.5])))
    assert row["distance"] != pytest.approx(leaderboard.floor(h, 200, 0).mean())  # not the floor by reference
    assert f"of the {int(codes.max()) + 1} source conversations" in row["note"]
