"""Known-truth worlds for the stopping rule (``cocoeval.run.stopping``, beyond the paper): how often
it ever declares a setup equal to the humans different when looked at after every round, how often
naive repeated fixed-n testing does, and how many calls it saves on a clearly separated setup.
Every number is computed by cocoeval's own functions (``bounds_of``, ``decide``, ``rounds`` as
``StoppingSection`` plans them); nothing is timed.

- **World**: a budget of 100 source conversations of 1–5 windows each (3 on average: about 300
  instances, the paper's evaluation set), processed in rounds of ``--round`` conversations (10
  rounds by default, the rule first evaluated after ``min_rounds`` = 2). Each conversation has a
  Gamma(4, 1/4) rate multiplier shared by its windows (windows of one meeting are not independent),
  each window another Gamma(8, 1/8); the humans' count of behaviour b in a window is
  Poisson(30·p_b·g), p_b the per-turn rates 2–12% of ``benchmarks/known_truth.py`` (30 turns).
- **Equal**: the setup's counts are drawn from the humans' own rates (c = 1). Printed: the share of
  seeds in which the rule EVER declares "differs" over all rounds (its error rate; target ≤ alpha),
  and the same for naive repeated testing: after every round a fixed-n 95% t interval per
  behaviour, Bonferroni over the 10 behaviours (valid at one look), declaring "differs" when one
  excludes 0 — and that test at the last round only (one look).
- **Separated**: the setup doubles the humans' rates on 3 behaviours (p = 5%, 8% and 12%: true
  differences of 1.5, 2.4 and 3.6 occurrences per conversation) and matches the rest. Printed: the
  share of seeds stopped as "differs" (correct), stopped wrongly (never: "precise" is not asked
  for), the mean share of the budget's instances used, and the saving (1 − that share: the calls
  not sent, as simulation and judge calls are per instance).
- **Coverage**: in both worlds, the share of seeds in which every behaviour's sequence holds the
  true mean difference at every look the rule acts on (every round from ``min_rounds`` on, stopped
  or not; target ≥ 1 − alpha).

    python benchmarks/stopping.py [--seeds 1000] [--round 10] [--min-rounds 2]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from cocoeval.run.stopping import StoppingSection, bounds_of, decide

RATES = np.array([0.02, 0.03, 0.05, 0.08, 0.1, 0.04, 0.06, 0.12, 0.02, 0.07])
TURNS = 30
CONVERSATIONS = 100
BEHAVIOURS = [f"b{i}" for i in range(len(RATES))]
DOUBLED = (2, 3, 7)
"""The behaviours a separated setup doubles (p = 5%, 8%, 12%)."""


def world(c: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(per-conversation mean paired differences (CONVERSATIONS, K), windows per conversation)."""
    windows = rng.integers(1, 6, size=CONVERSATIONS)
    g_conv = rng.gamma(4, 1 / 4, size=CONVERSATIONS)
    obs = np.empty((CONVERSATIONS, len(RATES)))
    for k in range(CONVERSATIONS):
        g = g_conv[k] * rng.gamma(8, 1 / 8, size=(windows[k], 1))
        human = rng.poisson(TURNS * RATES * g)
        sim = rng.poisson(TURNS * c * RATES * g)
        obs[k] = (sim - human).mean(axis=0)
    return obs, windows


def t_crit(df: int, alpha: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(1 - alpha / 2, df))


def naive_differs(x: np.ndarray, alpha: float) -> bool:
    """A fixed-n t interval per behaviour at alpha/K (Bonferroni) excludes 0."""
    t = len(x)
    if t < 2:
        return False
    m, s = x.mean(axis=0), x.std(axis=0, ddof=1)
    half = t_crit(t - 1, alpha / x.shape[1]) * s / math.sqrt(t)
    return bool(np.any((s > 0) & (np.abs(m) > half)))


def run(c: np.ndarray, seeds: int, sec: StoppingSection) -> dict[str, float]:
    rounds = math.ceil(CONVERSATIONS / sec.round_conversations)
    ever = naive_ever = naive_last = cover = 0
    truth = TURNS * (c - 1) * RATES  # E[g] = 1: the true mean paired difference per behaviour
    used = []
    for seed in range(seeds):
        rng = np.random.default_rng([seed, int(c.sum() * 100)])
        obs, windows = world(c, rng)
        stopped_at = None
        naive_hit = False
        covered = True
        for r in range(1, rounds + 1):
            t = min(r * sec.round_conversations, CONVERSATIONS)
            x = obs[:t]
            naive_hit = naive_hit or naive_differs(x, sec.alpha)
            bounds = bounds_of(x.tolist(), BEHAVIOURS, sec.alpha, CONVERSATIONS)
            if r >= sec.min_rounds:  # the looks the rule acts on
                covered = covered and all(b.low <= d <= b.high for b, d in zip(bounds, truth, strict=True))
            verdict, _ = decide(bounds, sec)
            if verdict == "differs" and r >= sec.min_rounds and stopped_at is None:
                stopped_at = t
        ever += stopped_at is not None
        cover += covered
        naive_ever += naive_hit
        naive_last += naive_differs(obs, sec.alpha)
        used.append(windows[: stopped_at or CONVERSATIONS].sum() / windows.sum())
    return {
        "differs": ever / seeds,
        "naive_ever": naive_ever / seeds,
        "naive_last": naive_last / seeds,
        "used": float(np.mean(used)),
        "cover": cover / seeds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--round", type=int, default=10, help="conversations per round")
    ap.add_argument("--min-rounds", type=int, default=2, help="rounds before the rule may stop a setup")
    a = ap.parse_args()
    sec = StoppingSection(rule="differs", alpha=0.05, round_conversations=a.round, min_rounds=a.min_rounds)
    rounds = math.ceil(CONVERSATIONS / a.round)
    print(
        f"Stopping rule 'differs', alpha {sec.alpha}, {CONVERSATIONS} conversations (~300 instances) in "
        f"{rounds} rounds of {a.round}, min_rounds {sec.min_rounds}; {a.seeds} seeds"
    )
    eq = run(np.ones(len(RATES)), a.seeds, sec)
    print(
        f"{'world':<34} {'ever differs':>13} {'naive, every round':>19} {'naive, last round':>18} "
        f"{'covers at every look':>22}"
    )
    print(
        f"{'equal (c = 1)':<34} {eq['differs']:>13.3f} {eq['naive_ever']:>19.3f} {eq['naive_last']:>18.3f} "
        f"{eq['cover']:>22.3f}"
    )
    c = np.ones(len(RATES))
    c[list(DOUBLED)] = 2.0
    sep = run(c, a.seeds, sec)
    print(
        f"{'world':<34} {'stopped differs':>15} {'instances used':>15} {'calls saved':>12} {'covers at every look':>22}"
    )
    print(
        f"{'separated (2x on 3 behaviours)':<34} {sep['differs']:>15.3f} {sep['used']:>15.3f} {1 - sep['used']:>12.3f} "
        f"{sep['cover']:>22.3f}"
    )


if __name__ == "__main__":
    main()
