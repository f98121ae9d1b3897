"""Known-truth worlds for the judge-free human-likeness test (``analysis.detectability``): the
classifier's out-of-fold AUC, its cluster-bootstrap interval and its permutation p, run by
cocoeval's own ``two_sample_test`` on text drawn from models whose truth is known.

The worlds. A vocabulary of 2,000 words with Zipf frequencies (exponent 1.1); each conversation
has a topic, 40 of those words whose probability is raised (a turn's words come from the topic
with probability 0.3, else from the Zipf base); a turn is 1 + Poisson(9) words, with a full stop,
and a question mark instead in one turn of six. A conversation has ``--windows`` windows (2 by
default) whose human references r are 30 turns each, drawn from the conversation's model: the
windows of a meeting share its topic, so they are not independent, and the folds and the
bootstrap keep them together. ``--conversations`` conversations (30: 60 instances) per world.
Each world's simulator writes one 30-turn continuation per instance:

- ``same``: drawn from the same model as the humans of its conversation (the truth: AUC = 0.5;
  the interval should cover 0.5 in about 95% of the seeds and the test reject in at most 5%);
- ``mild``: the same model, but a fifth of its turns are a little longer (+2 words) and a word of
  twenty a model favours ("really", "great", "definitely", …) replaces one word in twenty of them
  (the truth: AUC between 0.5 and 1);
- ``degenerate``: the one short sentence "i agree with that point ." thirty times (AUC near 1);
- ``floor``: the floor of the report, humans against humans: each conversation's first window's r
  against its second's, the order of each pair drawn at random (``floor_pairs``).

Printed per world: the mean AUC and its spread over seeds, how often the 95% interval covers 0.5,
how often it covers the world's own mean AUC over the seeds (the estimand: the expected
out-of-fold AUC at this size), how often p ≤ 0.05, the interval's mean width. ``--scale`` instead times one run of the paper's
shape (300 instances, 100 conversations of 3 windows, ``--setups`` setups and the floor, the
report's default 1,000 resamples and ``PERMUTATIONS`` permutations), with its CPU seconds. Every
test runs on one BLAS thread, as the report's analyses do. ``--logistic N`` also prints,
on N seeds, the AUC of a logistic regression on the same features and folds beside the ridge
classifier's (the choice of classifier, docs/analysis.md).

    python benchmarks/detectability.py --seeds 200
    python benchmarks/detectability.py --scale
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cocoeval.analysis import detectability as det
from cocoeval.analysis.inference import rng_for
from cocoeval.core.speed import one_blas_thread

VOCAB = 2000
TOPIC = 40
FAVOURED = [
    "really",
    "great",
    "definitely",
    "absolutely",
    "certainly",
    "perhaps",
    "indeed",
    "essentially",
    "truly",
    "clearly",
    "basically",
    "honestly",
    "overall",
    "important",
    "ensure",
    "crucial",
    "key",
    "approach",
    "consider",
    "aspect",
]
WORLDS = ("same", "mild", "degenerate", "floor")


class World:
    """The text model of one seed: the Zipf base and each conversation's topic."""

    def __init__(self, seed: int, conversations: int) -> None:
        self.rng = rng_for(seed, "detectability benchmark")
        self.words = np.array([f"w{i}" for i in range(VOCAB)])
        base = 1.0 / np.arange(1, VOCAB + 1) ** 1.1
        self.base = base / base.sum()
        self.topics = [self.rng.choice(VOCAB, TOPIC, replace=False) for _ in range(conversations)]

    def turn(self, conv: int, extra: int = 0, favoured: float = 0.0) -> str:
        n = 1 + self.rng.poisson(9) + extra
        topic = self.rng.random(n) < 0.3
        ids = np.where(topic, self.rng.choice(self.topics[conv], n), self.rng.choice(VOCAB, n, p=self.base))
        words = list(self.words[ids])
        for j in np.flatnonzero(self.rng.random(n) < favoured):
            words[j] = FAVOURED[self.rng.integers(len(FAVOURED))]
        return " ".join(words) + (" ?" if self.rng.random() < 1 / 6 else " .")

    def document(self, conv: int, kind: str = "human") -> str:
        if kind == "degenerate":
            return "\n".join(["i agree with that point ."] * 30)
        if kind == "mild":
            return "\n".join(
                self.turn(conv, 2, 0.05) if self.rng.random() < 0.2 else self.turn(conv) for _ in range(30)
            )
        return "\n".join(self.turn(conv) for _ in range(30))


def world_pairs(seed: int, kind: str, conversations: int, windows: int) -> tuple[list[str], list[str], list[str]]:
    w = World(seed, conversations)
    first, second, groups = [], [], []
    for c in range(conversations):
        refs = [w.document(c) for _ in range(windows)]
        if kind == "floor":
            for j in range(0, windows - 1, 2):
                a, b = refs[j], refs[j + 1]
                if rng_for(seed, "floor order", str(c), str(j)).integers(0, 2):
                    a, b = b, a
                first.append(a)
                second.append(b)
                groups.append(f"c{c}")
            continue
        for r in refs:
            first.append(r)
            second.append(w.document(c, "human" if kind == "same" else kind))
            groups.append(f"c{c}")
    return first, second, groups


def run_worlds(
    seeds: int, conversations: int, windows: int, permutations: int, resamples: int, worlds: list[str]
) -> None:
    print(
        f"{seeds} seeds per world, {conversations} conversations × {windows} windows "
        f"({conversations * windows} instances; the floor: {conversations * (windows // 2)} pairs), "
        f"{permutations} permutations, {resamples} cluster-bootstrap resamples\n"
    )
    print(
        "| world | mean AUC | sd over seeds | interval covers 0.5 | covers the mean AUC | p ≤ 0.05 "
        "| mean interval width | s per seed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in worlds:
        a, cover, reject, width, ends = [], [], [], [], []
        t = time.perf_counter()
        for s in range(seeds):
            first, second, groups = world_pairs(s, kind, conversations, windows)
            d = det.two_sample_test(
                first, second, groups, seed=s, what=(kind,), resamples=resamples, permutations=permutations
            )
            assert d.auc is not None and d.ci_low is not None and d.ci_high is not None and d.p is not None
            a.append(d.auc)
            cover.append(d.ci_low <= 0.5 <= d.ci_high)
            reject.append(d.p <= 0.05)
            width.append(d.ci_high - d.ci_low)
            ends.append((d.ci_low, d.ci_high))
        per = (time.perf_counter() - t) / seeds
        print(
            f"| {kind} | {np.mean(a):.3f} | {np.std(a):.3f} | {np.mean(cover):.3f} "
            f"| {np.mean([lo <= np.mean(a) <= hi for lo, hi in ends]):.3f} | {np.mean(reject):.3f} "
            f"| {np.mean(width):.3f} | {per:.3f} |"
        )


def logistic(seeds: int, conversations: int, windows: int) -> None:
    """The logistic regression's out-of-fold AUC (liblinear, C = 1) on the same features and folds."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    print(f"\nRidge vs logistic regression, the same features and folds, {seeds} seeds:\n")
    print("| world | ridge AUC | logistic AUC | mean abs. difference | s per fit: ridge (all folds) | logistic |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind in WORLDS:
        r, lg, tr, tl = [], [], 0.0, 0.0
        for s in range(seeds):
            first, second, groups = world_pairs(s, kind, conversations, windows)
            x = det.features([*first, *second])
            y = np.repeat([0, 1], len(first))
            g = np.array([*groups, *groups])
            split = list(GroupKFold(n_splits=det.FOLDS).split(np.zeros(len(y)), y, g))
            t = time.perf_counter()
            r.append(det.auc(det.out_of_fold(x, (2.0 * y - 1.0)[:, None], split)[:, 0], y))
            tr += time.perf_counter() - t
            t = time.perf_counter()
            out = np.empty(len(y))
            for train, test in split:
                m = LogisticRegression(C=1.0, solver="liblinear").fit(x[train], y[train])
                out[test] = m.decision_function(x[test])
            tl += time.perf_counter() - t
            lg.append(det.auc(out, y))
        print(
            f"| {kind} | {np.mean(r):.3f} | {np.mean(lg):.3f} | {np.mean(np.abs(np.subtract(r, lg))):.3f} "
            f"| {tr / seeds:.4f} | {tl / seeds:.4f} |"
        )


def scale(setups: int, permutations: int, resamples: int) -> None:
    """One paper-shaped comparison set timed: the floor and ``setups`` setups on 300 instances."""
    conversations, windows = 100, 3
    w = World(0, conversations)
    refs = [[w.document(c) for _ in range(windows)] for c in range(conversations)]
    seconds = [[w.document(c, "mild") for c in range(conversations) for _ in range(windows)] for _ in range(setups)]
    hashed = det.Hashed()
    c0 = time.process_time()
    t0 = time.perf_counter()
    first = [r for rs in refs for r in rs]
    groups = [f"c{c}" for c in range(conversations) for _ in range(windows)]
    floor_a = [rs[0] for rs in refs]
    floor_b = [rs[1] for rs in refs]
    det.two_sample_test(floor_a, floor_b, [f"c{c}" for c in range(conversations)], what=("floor",), hashed=hashed)
    t_floor = time.perf_counter() - t0
    times = []
    for s, second in enumerate(seconds):
        t = time.perf_counter()
        d = det.two_sample_test(
            first, second, groups, what=(f"s{s}",), permutations=permutations, resamples=resamples, hashed=hashed
        )
        times.append(time.perf_counter() - t)
    print(
        f"paper scale: 300 instances ({conversations} conversations × {windows} windows), {permutations} "
        f"permutations, {resamples} resamples: the floor ({len(floor_a)} pairs) {t_floor:.2f} s; each setup "
        f"{np.mean(times):.2f} s (first {times[0]:.2f} s, with the references' hashing); {setups} setups and the "
        f"floor {t_floor + sum(times):.1f} s, {time.process_time() - c0:.1f} s of CPU (last AUC {d.auc:.3f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--conversations", type=int, default=30)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--permutations", type=int, default=det.PERMUTATIONS)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--logistic", type=int, default=0, metavar="N", help="compare with logistic regression on N seeds")
    ap.add_argument("--worlds", default=",".join(WORLDS), help="comma-separated, of: " + ", ".join(WORLDS))
    ap.add_argument("--scale", action="store_true", help="time one paper-scale run instead")
    ap.add_argument("--setups", type=int, default=19, help="setups of the paper-scale timing (--scale)")
    a = ap.parse_args()
    with one_blas_thread():  # as every analysis of a report runs (``registry.Analysis``)
        _main(a)


def _main(a: argparse.Namespace) -> None:
    if a.scale:
        scale(a.setups, a.permutations, a.resamples)
        return
    run_worlds(a.seeds, a.conversations, a.windows, a.permutations, a.resamples, a.worlds.split(","))
    if a.logistic:
        logistic(a.logistic, a.conversations, a.windows)


if __name__ == "__main__":
    main()
