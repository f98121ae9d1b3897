"""Analysis speed: 300 instances x 10 behaviours x 20 setups with 1,000 bootstrap resamples
(through ``stats.mean_occurrences``), aggregation of 1,000,000 per-turn labels with polars, and
the ratio against a plain Python-loop bootstrap (target >= 20x; the loop lives only here).

    python benchmarks/analysis_speed.py [--loop-setups 2]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
import polars as pl

from cocoeval.analysis.frames import Frames
from cocoeval.analysis.stats import mean_occurrences
from cocoeval.core.taxonomy import load_taxonomy

N_INST, N_SETUPS, B = 300, 20, 1000


def loop_bootstrap(matrix: list[list[float]], resamples: int, seed: int) -> list[tuple[float, float]]:
    """The same percentile bootstrap of column means, in plain Python."""
    rng = random.Random(seed)
    n, k = len(matrix), len(matrix[0])
    boots: list[list[float]] = [[] for _ in range(k)]
    for _ in range(resamples):
        rows = [matrix[rng.randrange(n)] for _ in range(n)]
        for j in range(k):
            boots[j].append(sum(r[j] for r in rows) / n)
    out = []
    for j in range(k):
        s = sorted(boots[j])
        out.append((s[int(0.025 * (resamples - 1))], s[int(0.975 * (resamples - 1))]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loop-setups", type=int, default=2, help="setups the slow loop runs on (then scaled)")
    a = ap.parse_args()
    tax = load_taxonomy()
    rng = np.random.default_rng(0)
    rows = []
    targets = ["reference"] + [f"setup{s:02d}" for s in range(N_SETUPS)]
    counts = rng.poisson(1.5, size=(len(targets), N_INST, len(tax.ids)))
    for t, target in enumerate(targets):
        for i in range(N_INST):
            for k, b in enumerate(tax.ids):
                rows.append(("judge", False, target, f"inst{i:03d}", "ds", b, "inconsistent", int(counts[t, i, k])))
    counts_df = pl.DataFrame(
        rows,
        schema=["judge", "human", "target", "instance_id", "dataset", "behaviour", "category", "count"],
        orient="row",
    )
    empty = pl.DataFrame()
    f = Frames(
        instances=empty,
        counts=counts_df,
        likert=empty,
        labels=empty,
        judgments=empty,
        continuations=empty,
        taxonomy=tax,
    )
    t0 = time.perf_counter()
    means = mean_occurrences(f, resamples=B, seed=0)
    vec = time.perf_counter() - t0
    print(
        f"bootstrap, vectorised: {len(targets)} targets x {N_INST} instances x {len(tax.ids)} behaviours, "
        f"{B} resamples: {vec:.2f} s ({means.height} rows)"
    )

    t0 = time.perf_counter()
    for t in range(a.loop_setups):
        loop_bootstrap(counts[t].astype(float).tolist(), B, seed=0)
    loop_part = time.perf_counter() - t0
    loop_all = loop_part * len(targets) / a.loop_setups
    print(
        f"bootstrap, Python loop: {loop_part:.2f} s for {a.loop_setups} targets -> {loop_all:.1f} s for "
        f"{len(targets)} (scaled linearly)"
    )
    print(f"speed-up: {loop_all / vec:.0f}x (target >= 20x)")

    n = 1_000_000
    labels = pl.DataFrame(
        {
            "judge": ["judge"] * n,
            "target": rng.choice(targets, n),
            "instance_id": rng.integers(0, N_INST, n).astype(str),
            "turn": rng.integers(0, 30, n),
            "behaviour": rng.choice(tax.ids, n),
        }
    )
    t0 = time.perf_counter()
    agg = labels.group_by("judge", "target", "instance_id", "behaviour").agg(count=pl.len())
    per_target = agg.group_by("target", "behaviour").agg(pl.col("count").mean())
    secs = time.perf_counter() - t0
    print(
        f"aggregating {n:,} per-turn labels to per-conversation counts and means: {secs:.2f} s "
        f"({agg.height:,} conversation-behaviour rows, {per_target.height} means)"
    )


if __name__ == "__main__":
    main()
