"""Known-truth worlds for a judge's history (beyond the paper): how often ``judge_history`` calls a
change between two judge versions that label the same conversations, by its paired cluster
bootstrap (``calibration.history_table`` on entries with per-conversation statistics: the
interval recentred and widened for few conversations, as the report gives it) and by the
threshold rule of earlier entries (a rise or fall from ``calibration.CHANGE`` = 0.05, the same
entries without their statistics). Every verdict is ``history_table``'s own; nothing is timed.

A world has n conversations × 30 turns and one behaviour. Conversation c has a propensity
q_c ~ Beta(2, 6) (mean 0.25): the annotators' majority marks each turn with probability q_c
(the majority is the truth here: one annotator). Each judge version marks a turn the majority
marks with probability expit(logit(s_v) + u_c) and a turn it does not with probability
expit(logit(0.10) + u_c), with u_c ~ Normal(0, 0.5) the conversation's difficulty, shared by
both versions (a hard conversation is hard for both: what pairing removes); the turns' draws are
independent Bernoulli draws given the conversation. The true F1 of a version is
2E[TP] / (2E[TP] + E[FP] + E[FN]) over the worlds' distribution (computed on 400,000 draws of
(q, u)); version 1 has s = 0.70, version 2 an s solved so that its true F1 is version 1's plus
0, 0.03 or 0.08.

Printed per true change and n: the share of worlds in which F1 of any behaviour is called
"rose" and "fell", by the interval and by the threshold rule. With no true change, rose + fell is
the false-call rate (the interval's should be about 0.05); with a true rise, "rose" is the power.

    python benchmarks/judge_history.py [--worlds 400] [--seed 0] [--resamples 1000]
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from scipy.special import expit, logit

from cocoeval.analysis.calibration import (
    AGREEMENT_LAYOUT,
    ANY,
    KAPPA_CELLS,
    ConversationStats,
    agreement_measures,
    history_table,
)

TURNS = 30
QA, QB = 2.0, 6.0
FPR, SENS, SD = 0.10, 0.70, 0.5
WIDTH = len(AGREEMENT_LAYOUT) + len(KAPPA_CELLS)


def true_counts(sens: float, rng: np.random.Generator, draws: int = 400_000) -> tuple[float, float, float]:
    """E[TP], E[FP], E[FN] per turn of a version with sensitivity ``sens`` (common random numbers:
    the same ``rng`` state gives the same (q, u) draws)."""
    q = rng.beta(QA, QB, size=draws)
    u = rng.normal(0, SD, size=draws)
    tpr, fpr = expit(logit(sens) + u), expit(logit(FPR) + u)
    return float((q * tpr).mean()), float(((1 - q) * fpr).mean()), float((q * (1 - tpr)).mean())


def true_f1(sens: float, seed: int) -> float:
    tp, fp, fn = true_counts(sens, np.random.default_rng(seed))
    return 2 * tp / (2 * tp + fp + fn)


def solve_sens(target: float, seed: int) -> float:
    """The sensitivity whose true F1 is ``target`` (bisection; F1 rises with the sensitivity)."""
    lo, hi = 0.01, 0.999
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if true_f1(mid, seed) < target else (lo, mid)
    return (lo + hi) / 2


def stats_of(judge: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """(n, 2, WIDTH) the per-conversation statistics of one annotator (the truth) and the judge, for
    the behaviour and for any behaviour (the same here): α's o01, n0, n1 of the two raters, F1's
    TP, FP, FN, κ's 2×2 cells."""
    a, b = judge, truth  # (n, TURNS) booleans
    both, jo, ao, nei = (a & b).sum(1), (a & ~b).sum(1), (~a & b).sum(1), (~a & ~b).sum(1)
    ones = a.sum(1) + b.sum(1)
    o01 = jo + ao  # two raters: each disagreeing turn is one pair (k(m − k)/(m − 1) = 1)
    row = np.stack([o01, 2 * TURNS - ones, ones, both, jo, ao, both, jo, ao, nei], axis=1).astype(float)
    return np.repeat(row[:, None, :], 2, axis=1)


def entry(jid: str, date: str, s: np.ndarray, keys: list[tuple[str, str]], with_stats: bool) -> dict[str, Any]:
    m = agreement_measures(s.sum(axis=0), 1)
    measures = {
        b: {k: (None if np.isnan(v[i]) else round(float(v[i]), 6)) for k, v in m.items()}
        for i, b in enumerate(("b", ANY))
    }
    e: dict[str, Any] = {"judge": "j", "judge_id": jid, "date": date, "design": "d", "measures": measures}
    if with_stats:
        e["per_conversation"] = ConversationStats(
            ("b", ANY), ("a",), tuple(keys), tuple(k[1] for k in keys), s
        ).to_json()
    return e


def verdicts(n: int, sens: tuple[float, float], rng: np.random.Generator, resamples: int, seed: int) -> tuple[str, str]:
    """(interval verdict, threshold verdict) of F1 (any behaviour) in one world of n conversations."""
    q = rng.beta(QA, QB, size=(n, 1))
    u = rng.normal(0, SD, size=(n, 1))
    truth = rng.random((n, TURNS)) < q
    keys = [("reference", f"d/c{c}/0") for c in range(n)]
    out = []
    s = [
        stats_of(
            truth & (rng.random((n, TURNS)) < expit(logit(sv) + u))
            | ~truth & (rng.random((n, TURNS)) < expit(logit(FPR) + u)),
            truth,
        )
        for sv in sens
    ]
    for with_stats in (True, False):
        t = history_table(
            [entry("v1", "1", s[0], keys, with_stats), entry("v2", "2", s[1], keys, with_stats)],
            "j",
            "v2",
            resamples,
            seed,
        )
        out.append(t.filter((t["behaviour"] == ANY) & (t["measure"] == "f1"))["direction"][0])
    return out[0], out[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (the report's default)")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    base = true_f1(SENS, a.seed + 1)
    print(f"{a.worlds} worlds per row; {TURNS} turns per conversation; q ~ Beta({QA:g}, {QB:g}); "
          f"false-positive rate {FPR:g}; conversation effect sd {SD:g}; version 1 true F1 {base:.4f}")  # fmt: skip
    print(f"{'true change':>11} {'n':>4}  {'interval: rose':>14} {'fell':>6} {'no call':>7}  "
          f"{'±0.05 rule: rose':>16} {'fell':>6} {'within':>6}")  # fmt: skip
    for delta in (0.0, 0.03, 0.08):
        s2 = SENS if delta == 0 else solve_sens(base + delta, a.seed + 1)
        for n in (10, 30, 100, 300):
            got = [verdicts(n, (SENS, s2), rng, a.resamples, w) for w in range(a.worlds)]
            ci = [g[0] for g in got]
            th = [g[1] for g in got]
            share = {k: np.mean([v == k for v in ci]) for k in ("rose", "fell")}
            old = {k: np.mean([v == k for v in th]) for k in ("rose", "fell")}
            print(
                f"{delta:>+11.2f} {n:>4}  {share['rose']:>14.3f} {share['fell']:>6.3f} "
                f"{1 - share['rose'] - share['fell']:>7.3f}  {old['rose']:>16.3f} {old['fell']:>6.3f} "
                f"{1 - old['rose'] - old['fell']:>6.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
