"""Paired setup-vs-setup comparisons and rank intervals (``analysis.paired``) against plain
re-implementations: loops over conversations, an enumeration of every sign vector, the rank rule
written out."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import paired, stats
from cocoeval.core.targets import REFERENCE

BEH = ["b0", "b1", "b2"]


def _world(seed: int = 1, convs: int = 12, windows: int = 3, rates: dict[str, float] | None = None) -> pl.DataFrame:
    rates = rates or {REFERENCE: 1.0, "a": 1.0, "b": 1.6, "c": 1.0}
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(convs):
        g = rng.gamma(4, 0.25)
        for w in range(windows):
            for t, m in rates.items():
                x = rng.poisson(3 * m * g * np.array([0.2, 0.5, 1.0]))
                rows += [(t, f"d/c{c}/{w}", f"d/c{c}", b, int(x[k])) for k, b in enumerate(BEH)]
    return pl.DataFrame(rows, schema=["target", "instance_id", "conversation", "behaviour", "count"], orient="row")


def _matrix(df: pl.DataFrame, target: str) -> tuple[list[str], list[str], np.ndarray]:
    part = df.filter(pl.col("target") == target).sort("instance_id", "behaviour")
    ids = sorted(set(part["instance_id"].to_list()))
    conv = {r[0]: r[1] for r in part.select("instance_id", "conversation").iter_rows()}
    x = np.array(
        [
            [part.filter((pl.col("instance_id") == i) & (pl.col("behaviour") == b))["count"][0] for b in BEH]
            for i in ids
        ],
        dtype=float,
    )
    return ids, [conv[i] for i in ids], x


def test_a_pair_of_setups_gets_the_mean_difference_and_the_conversation_bootstrap_of_plain_loops():
    df = _world()
    r = paired.compare_setups(df, BEH, judge="j", resamples=200, seed=3)
    ids, conv, xa = _matrix(df, "a")
    _, _, xb = _matrix(df, "b")
    d = xa - xb
    order = list(dict.fromkeys(conv))  # conversations in order of first appearance
    idx = stats.boot_index(len(order), 200, 3)
    boot = []
    for draw in idx:  # every window of each drawn conversation comes along
        rows = [i for c in draw for i in range(len(ids)) if conv[i] == order[c]]
        boot.append(d[rows].mean(axis=0))
    from scipy.stats import norm
    from scipy.stats import t as student

    widen = np.sqrt(12 / 11) * student.ppf(0.975, 11) / norm.ppf(0.975)  # 12 conversations
    boot = np.array(boot)
    lo, hi = np.percentile(d.mean(axis=0) + (boot - boot.mean(axis=0)) * widen, [2.5, 97.5], axis=0)
    got = r.frame().filter((pl.col("a") == "a") & (pl.col("b") == "b") & (pl.col("behaviour") != paired.DISTANCE))
    assert got["diff"].to_numpy() == pytest.approx(d.mean(axis=0))
    assert got["ci_low"].to_numpy() == pytest.approx(lo)
    assert got["ci_high"].to_numpy() == pytest.approx(hi)
    assert got["clusters"].to_list() == [12] * 3 and got["n"].to_list() == [36] * 3


def test_the_sign_flip_test_of_conversation_sums_is_the_exact_enumeration_on_few_conversations():
    df = _world(convs=8, windows=2)
    r = paired.compare_setups(df, BEH, judge="j", resamples=50, min_n=5, correction="bh")
    ids, conv, xa = _matrix(df, "a")
    _, _, xb = _matrix(df, "c")
    d = xa - xb
    sums = np.array([d[[i for i in range(len(ids)) if conv[i] == c]].sum(axis=0) for c in dict.fromkeys(conv)])
    obs = np.abs(sums.sum(axis=0))
    hits = np.zeros(3)
    for signs in itertools.product([-1, 1], repeat=len(sums)):
        hits += np.abs(np.array(signs) @ sums) >= obs - 1e-9
    p = hits / 2 ** len(sums)
    got = r.frame().filter((pl.col("a") == "a") & (pl.col("b") == "c") & (pl.col("behaviour") != paired.DISTANCE))
    assert got["p"].to_numpy() == pytest.approx(p)
    m = len(p)  # Benjamini-Hochberg written out
    order = np.argsort(p)
    bh = np.minimum.accumulate((p[order] * m / np.arange(1, m + 1))[::-1])[::-1]
    expect = np.empty(m)
    expect[order] = np.minimum(bh, 1)
    assert got["p_adj"].to_numpy() == pytest.approx(expect)
    assert r.correction == "bh" and "Benjamini" in r.method


def test_the_distance_square_uses_products_of_differences_from_different_conversations_only():
    rng = np.random.default_rng(5)
    conv = np.array([0, 0, 0, 1, 2, 2, 3, 4, 4, 4])
    d = rng.normal(size=(10, 3))
    total, pairs = 0.0, 0
    for i in range(10):
        for j in range(10):
            if conv[i] != conv[j]:
                total += float(d[i] @ d[j]) / 3
                pairs += 1
    s, sizes = paired.cluster_sums(d, conv)
    assert float(paired.cluster_square(s, sizes)) == pytest.approx(total / pairs)
    one = np.arange(10)  # one instance per conversation: the leaderboard's unbiased square
    s1, n1 = paired.cluster_sums(d, one)
    from cocoeval.analysis.leaderboard import unbiased_square

    assert float(paired.cluster_square(s1, n1)) == pytest.approx(
        float(unbiased_square(d.mean(axis=0), np.square(d).mean(axis=0), 10))
    )


def test_the_distance_test_is_the_difference_of_squares_over_its_resampled_spread_written_out():
    df = _world(convs=9, windows=2)
    r = paired.compare_setups(df, BEH, judge="j", resamples=60, min_n=5, seed=4)
    _, conv, xa = _matrix(df, "a")
    _, _, xb = _matrix(df, "b")
    _, _, h = _matrix(df, REFERENCE)
    order = list(dict.fromkeys(conv))

    def square(x: np.ndarray, rows: list[tuple[int, int]]) -> float:
        """Products of differences of distinct drawn conversations (each drawn copy its own), written out."""
        d = x - h
        num = den = 0.0
        for c1, i in rows:
            for c2, j in rows:
                if c1 != c2:
                    num += float(d[i] @ d[j]) / 3
                    den += 1
        return num / den

    def draw(cs: list[int]) -> list[tuple[int, int]]:  # (copy number, row) of every window of each drawn conversation
        return [(k, i) for k, c in enumerate(cs) for i in range(len(conv)) if conv[i] == order[c]]

    point = square(xa, draw(list(range(9)))) - square(xb, draw(list(range(9))))
    boot = [square(xa, draw(list(cs))) - square(xb, draw(list(cs))) for cs in stats.boot_index(9, 60, 4)]
    from scipy.stats import t as student

    se = np.std(boot, ddof=1) * np.sqrt(9 / 8)
    row = r.frame().filter((pl.col("a") == "a") & (pl.col("b") == "b") & (pl.col("behaviour") == paired.DISTANCE))
    assert row["square_diff"][0] == pytest.approx(point)
    assert row["p"][0] == pytest.approx(2 * student.sf(abs(point) / se, 8))
    half = student.ppf(0.975, 8) * se
    assert (row["square_ci_low"][0], row["square_ci_high"][0]) == pytest.approx((point - half, point + half))
    assert row["diff"][0] == pytest.approx(
        np.sqrt(max(square(xa, draw(list(range(9)))), 0)) - np.sqrt(max(square(xb, draw(list(range(9)))), 0))
    )


def test_the_rank_rule_counts_the_setups_confidently_closer_and_farther_and_ties_share_a_rank():
    # four setups: 0 confidently closer than 2 and 3; 1 confidently closer than 3; 1 and 2 tied in distance
    got = paired.rank_rule([0.1, 0.5, 0.5, 0.9], {(0, 2), (0, 3), (1, 3)})
    assert got == [(1, 1, 2), (2, 1, 3), (2, 2, 4), (4, 3, 4)]


def test_the_leaderboard_resamples_conversations_and_is_the_instance_bootstrap_with_one_window_each():
    from cocoeval.analysis import leaderboard

    rng = np.random.default_rng(2)
    s, h = rng.poisson(2.0, (30, 4)).astype(float), rng.poisson(1.5, (30, 4)).astype(float)
    one = np.arange(30)  # one instance per conversation: the clusters change nothing
    before = leaderboard.paired_profiles({"x": (s, h)}, 300, 7)["x"]
    clustered = leaderboard.clustered_profile(s, h, one, 300, 7)
    for key in ("diff", "lo", "hi"):
        assert getattr(clustered, key) == pytest.approx(getattr(before, key))
    assert clustered.square == pytest.approx(before.square)
    assert clustered.distance == pytest.approx(before.distance)
    assert clustered.l1 == pytest.approx(before.l1)
    # ten conversations of three windows: each resample takes whole conversations (a plain loop)
    conv = np.repeat(np.arange(10), 3)
    got = leaderboard.paired_profiles({"x": (s, h)}, 300, 7, clusters={"x": conv})["x"]
    d = s - h
    boot = np.array([np.vstack([d[conv == c] for c in draw]).mean(axis=0) for draw in stats.boot_index(10, 300, 7)])
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    assert got.lo == pytest.approx(lo) and got.hi == pytest.approx(hi)
    assert got.clusters == 10


def test_the_setup_by_setup_chart_shows_each_pair_both_ways_coloured_by_the_verdict():
    from cocoeval.analysis import charts

    world = _world(convs=30, rates={REFERENCE: 1.0, "a": 1.0, "b": 2.5, "c": 1.0})
    table = paired.compare_setups(world, BEH, judge="j", resamples=300).frame()
    spec = charts.paired_chart(table).to_dict()
    rect, text = spec["spec"]["layer"]
    assert rect["mark"]["type"] == "rect" and text["mark"]["type"] == "text"
    assert rect["encoding"]["color"]["scale"]["domain"] == list(charts.PAIRED_COLOURS)
    cells = {(v["row"], v["column"]): v for v in spec["data"]["values"]}
    dist = table.filter(pl.col("behaviour") == paired.DISTANCE)
    assert len(cells) == 2 * dist.height  # (a, b) and (b, a)
    for r in dist.iter_rows(named=True):
        there, back = cells[(r["a"], r["b"])], cells[(r["b"], r["a"])]
        assert there["diff"] == pytest.approx(r["diff"]) and back["diff"] == pytest.approx(-r["diff"])
        if r["verdict"] == paired.B_FARTHER:
            assert (there["cell"], back["cell"]) == ("row closer", "row farther")
    far = cells[("a", "b")]  # b is 2.5 times the humans' rates: a confidently closer
    assert far["cell"] == "row closer" and far["behaviours_differing"] == 3


def test_a_pair_without_enough_instances_conversations_or_humans_is_untested_and_says_why():
    from cocoeval.core.errors import ConfigError

    df = _world(convs=12, windows=3)
    r = paired.compare_setups(df, BEH, judge="j", setups=["a", "ghost"], resamples=50).frame()
    assert r["n"].to_list() == [0] * 4 and r["p"].null_count() == 4
    assert (
        r.filter(pl.col("behaviour") == "b0")["note"][0] == "no instance where both a and ghost have a valid judgment"
    )
    few = df.filter(pl.col("conversation").is_in(["d/c0", "d/c1", "d/c2", "d/c3"]))  # 12 instances of 4 meetings
    r = paired.compare_setups(few, BEH, judge="j", setups=["a", "b"], resamples=50).frame()
    assert set(r["note"].to_list()) == {"too few source conversations (4 < 5)"} and r["p"].null_count() == 4
    alone = df.filter(pl.col("target") != REFERENCE)
    r = paired.compare_setups(alone, BEH, judge="j", setups=["a", "b"], resamples=50)
    dist = r.frame().filter(pl.col("behaviour") == paired.DISTANCE).row(0, named=True)
    assert dist["note"] == "no valid human reference judged by this judge" and dist["p"] is None
    assert r.ranks == [] and r.frame().filter(pl.col("behaviour") == "b0")["p"][0] is not None
    with pytest.raises(ConfigError):
        paired.compare_setups(df, BEH, judge="j", correction="none")


def test_every_pair_at_once_gives_each_pair_alone_bit_for_bit_and_the_ranks_of_their_own_tests():
    """What the pairs of one judge share (the weights, each setup's sums and squares on a set of
    instances, the sign-flip passes of one number of conversations, the distance tests the rank
    intervals reuse) changes no number: each pair compared alone gives its rows exactly (the
    distance's p_adj aside, Holm over the other pairs), on setups with different instances and
    numbers of conversations; the rank intervals are those of ``rank_table`` on their own."""
    df = _world(seed=5, convs=14, windows=3, rates={REFERENCE: 1.0, "a": 1.0, "b": 1.4, "c": 0.8, "d": 1.0})
    drop = (pl.col("target") == "c") & pl.col("conversation").is_in(["d/c0", "d/c1"])
    df = df.filter(~drop & ~((pl.col("target") == "d") & (pl.col("instance_id") == "d/c5/1")))
    setups = ["a", "b", "c", "d"]
    together = paired.compare_setups(df, BEH, judge="j", setups=setups, resamples=300, seed=2)
    rows = together.frame()
    assert rows["clusters"].n_unique() > 1 and rows["p"].null_count() == 0
    for a, b in itertools.combinations(setups, 2):
        alone = paired.compare_setups(df, BEH, judge="j", setups=[a, b], resamples=300, seed=2).frame()
        mine = rows.filter((pl.col("a") == a) & (pl.col("b") == b))
        assert mine.drop("p_adj", "verdict").equals(alone.drop("p_adj", "verdict"))
        assert mine.filter(pl.col("behaviour") != paired.DISTANCE).equals(
            alone.filter(pl.col("behaviour") != paired.DISTANCE)
        )
    ranks = paired.rank_table(df, BEH, judge="j", setups=setups, resamples=300, seed=2)
    assert ranks == together.ranks and len(ranks) == 4
