"""Known-truth worlds for next-speaker accuracy (``analysis.turntaking``, beyond the paper): does
the measured accuracy of each turn-taking rule match its known expected accuracy, and does its 95%
interval (a percentile bootstrap resampling source conversations) cover it about 95% of the time?
Every number is computed by cocoeval's own functions (``turntaking.next_speaker_frame`` and
``turntaking.accuracy``) on instances built from a world whose speaker process is known; nothing is
timed.

Both worlds have four participants (Alice, Bob, Carol, Dan, listed in M in that order) and G source
conversations of 3 consecutive windows each (x = 30 turns, then r = 30), so the windows of one
conversation share its parameters and are not independent; G = 12 and 40.

- **Markov** (``markov``): each conversation's speakers are a Markov chain started from its
  stationary distribution π, with a transition matrix of its own: row i drawn Dirichlet(20·b_i),
  b_i = 0.3 on i itself, 0.4 on the next participant in M's order, 0.15 on each of the other two.
  Known truth, per conversation: "same as previous" is right with probability Σ_i π_i P_ii and
  "round robin" with Σ_i π_i P_i,i+1; the truth is their mean over the matrices (100,000 drawn;
  Monte Carlo error < 0.001). The texts name no one, so "addressee" is the history draw.
- **Addressee** (``addressee``): every turn names one other participant at random ("Bob, what do
  you think?", with a decoy "Danish" or "Bobby" in one turn of three, which must not count). With
  probability s_c the speaker goes on; otherwise the one named speaks next with probability a_c,
  else one of the two others at random. s_c ~ Beta(2, 8) (mean 0.2) and a_c ~ Beta(7, 3) (mean
  0.7) per conversation. Known truth: same as previous E[s] = 0.2; addressee E[(1 − s)·a] = 0.56;
  round robin E[1 − s]/3 = 0.2667.

The history draw and "most frequent" have no closed form (they learn from the 30 turns of x):
their truth is the mean accuracy over 4,000 further conversations of the same world (marked "MC",
Monte Carlo error about 0.002). Printed per world, G and rule: the truth, the mean measured
accuracy over the seeds, the coverage of the 95% conversation-bootstrap interval, and beside it the
coverage of a naive binomial interval that treats the positions as independent (what the
clustering buys). A last row per G checks the run lengths (``turntaking.run_lengths``) the same
way: the humans' mean run length in r, whose truth is E[turns] / E[runs] = R / (1 + (R − 1)(1 − q))
with q the probability that the speaker goes on (the "same as previous" truth).

**Per-speaker fidelity** (``fidelity``; ``turntaking.speaker_fidelity`` on runs judged by a
synthetic judge J): the same three participants (by name) in every conversation, the reference's
30 turns spoken at random; J labels behaviour b on a turn of participant p with probability
r_pb·g_c (r_pb: per-turn rates 2–12% times 1, 1.5 or 0.5 for the three participants; g_c ~
Gamma(8, 1/8), a conversation's effect, mean 1). The setup's continuation has the reference's
speakers, its turns labelled with probability r_pb·(1 + d_b)·g_c: d = 0 (a simulator that is each
participant: distance 0) or d_b = 1 on three behaviours (twice as often). Known truth per
participant: √(mean_b (r_pb·d_b)²). Printed per G and d: the mean truth and estimate over the
three participants, and the coverage of the 95% interval (re-centred conversation bootstrap).

    python benchmarks/turn_taking.py [--seeds 500] [--resamples 1000] [--fidelity-seeds 300] [--only accuracy]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cocoeval.analysis import turntaking
from cocoeval.core.schema import Instance, Metadata, Participant, Provenance, Summary, Turn
from cocoeval.run import Run

NAMES = ["Alice", "Bob", "Carol", "Dan"]
X, R, WINDOWS = 30, 30, 3
CLOSED = {
    "markov": ("same_as_previous", "round_robin"),
    "addressee": ("same_as_previous", "addressee", "round_robin"),
}
"""Which rules have a closed-form truth in each world (the others: a Monte Carlo truth)."""


def markov_matrix(rng: np.random.Generator) -> np.ndarray:
    p = np.zeros((4, 4))
    for i in range(4):
        base = np.full(4, 0.15)
        base[i], base[(i + 1) % 4] = 0.3, 0.4
        p[i] = rng.dirichlet(20 * base)
    return p


def stationary(p: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eig(p.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1))])
    return pi / pi.sum()


def markov_conversation(rng: np.random.Generator, n: int) -> list[tuple[int, str]]:
    p = markov_matrix(rng)
    s = int(rng.choice(4, p=stationary(p)))
    out = []
    for _ in range(n):
        out.append((s, "a point about the budget"))
        s = int(rng.choice(4, p=p[s]))
    return out


def addressee_conversation(rng: np.random.Generator, n: int) -> list[tuple[int, str]]:
    stay, follow = rng.beta(2, 8), rng.beta(7, 3)
    s = int(rng.integers(4))
    out = []
    for k in range(n):
        named = int(rng.choice([i for i in range(4) if i != s]))
        decoy = [" about the Danish budget", " and Bobby's idea", ""][k % 3]
        out.append((s, f"{NAMES[named]}, what do you think{decoy}?"))
        if rng.random() < stay:
            continue
        s = named if rng.random() < follow else int(rng.choice([i for i in range(4) if i not in (s, named)]))
    return out


WORLDS = {"markov": markov_conversation, "addressee": addressee_conversation}


def instances(world: str, g: int, rng: np.random.Generator, tag: str) -> list[Instance]:
    """G conversations of the world cut into consecutive windows, as cocoeval instances."""
    out = []
    meta = Metadata(goals=["Decide the budget"], participants=[Participant(name=n) for n in NAMES])
    for c in range(g):
        turns = [Turn(speaker=NAMES[s], text=t) for s, t in WORLDS[world](rng, WINDOWS * (X + R))]
        for w in range(WINDOWS):
            part = turns[w * (X + R) : (w + 1) * (X + R)]
            out.append(
                Instance(
                    id=f"{world}/{tag}c{c}/{w}",
                    dataset=world,
                    split="eval",
                    metadata=meta,
                    summary=Summary(text="", covers_turns=0),
                    history=part[:X],
                    reference=part[X:],
                    provenance=Provenance(
                        source_file="synthetic",
                        source_format="synthetic",
                        conversation_id=f"{tag}c{c}",
                        start_index=w * (X + R),
                        seed=0,
                        builder_version="benchmark",
                    ),
                )
            )
    return out


RUN = "mean run (r)"
"""The row of the run-length check: the humans' mean run length in r (``turntaking.run_lengths``)."""


def closed_truth(world: str) -> dict[str, float]:
    """The closed-form truths; the mean run length of r from the probability that the speaker
    goes on, q = E[same as previous]: E[turns] / E[runs] = R / (1 + (R − 1)(1 − q))."""
    rng = np.random.default_rng([7, 0])
    if world == "addressee":
        s, a = 2 / 10, 7 / 10
        return {
            "same_as_previous": s,
            "addressee": (1 - s) * a,
            "round_robin": (1 - s) / 3,
            RUN: R / (1 + (R - 1) * (1 - s)),
        }
    same, rr = [], []
    for _ in range(100_000):
        p = markov_matrix(rng)
        pi = stationary(p)
        same.append(float(pi @ np.diag(p)))
        rr.append(float(sum(pi[i] * p[i, (i + 1) % 4] for i in range(4))))
    q = float(np.mean(same))
    return {"same_as_previous": q, "round_robin": float(np.mean(rr)), RUN: R / (1 + (R - 1) * (1 - q))}


def mc_truth(world: str, conversations: int) -> dict[str, float]:
    rng = np.random.default_rng([7, 1, len(world)])
    frame = turntaking.next_speaker_frame(instances(world, conversations, rng, "mc"))
    return {p: float(frame[p].mean()) for p in turntaking.POLICIES}  # type: ignore[arg-type]


BEHAVIOUR_RATES = np.array([0.02, 0.03, 0.05, 0.08, 0.1, 0.04, 0.06, 0.12, 0.02, 0.07])
SPEAKER_FACTORS = {"Alice": 1.0, "Bob": 1.5, "Carol": 0.5}


def fidelity_run(g: int, d: np.ndarray, rng: np.random.Generator) -> Run:
    """A run of G conversations × 3 windows: the reference, a setup 's' with its speakers, and a
    fine-grained judgment of each by judge J drawn as the module's text says."""
    from cocoeval.core.schema import Continuation, Judgment, TurnLabel
    from cocoeval.core.taxonomy import load_taxonomy

    tax = load_taxonomy()
    ids = list(tax.ids)
    names = list(SPEAKER_FACTORS)
    meta = Metadata(goals=["Decide the budget"], participants=[Participant(name=n) for n in names])
    insts, conts, js = [], [], []
    for c in range(g):
        gc = rng.gamma(8, 1 / 8)
        for w in range(WINDOWS):
            speakers = [names[k] for k in rng.integers(0, 3, size=X + R)]
            turns = [Turn(speaker=sp, text="a point") for sp in speakers]
            iid = f"f/c{c}/{w}"
            insts.append(
                Instance(
                    id=iid,
                    dataset="f",
                    split="eval",
                    metadata=meta,
                    summary=Summary(text="", covers_turns=0),
                    history=turns[:X],
                    reference=turns[X:],
                    provenance=Provenance(
                        source_file="synthetic",
                        source_format="synthetic",
                        conversation_id=f"c{c}",
                        start_index=w * (X + R),
                        seed=0,
                        builder_version="benchmark",
                    ),
                )
            )
            conts.append(Continuation(instance_id=iid, setup_id="s", turns=turns[X:]))
            for target, lift in (("reference", 0 * d), ("s", d)):
                labels = []
                for k, t in enumerate(turns[X:]):
                    prob = np.minimum(BEHAVIOUR_RATES * SPEAKER_FACTORS[t.speaker] * (1 + lift) * gc, 1.0)
                    hit = rng.random(len(ids)) < prob
                    labels.append(TurnLabel(turn=k, behaviours=[b for b, h in zip(ids, hit, strict=True) if h]))
                js.append(
                    Judgment(
                        instance_id=iid,
                        target=target,
                        target_name=target,
                        judge_id="J",
                        judge_name="J",
                        kind="fine_grained",
                        taxonomy_hash=tax.hash,
                        status="ok",
                        labels=labels,
                        judged_turns=list(range(R)),
                    )
                )
    return Run.model_validate(
        {"instances": insts, "continuations": {"s": conts}, "judgments": {"J": js}, "manifest": {"params": {}}}
    )


def fidelity(seeds: int, resamples: int) -> None:
    from cocoeval.analysis.frames import run_frames

    print(f"\nPer-speaker fidelity, 95% intervals ({seeds} seeds, {resamples} resamples; 3 participants each)")
    print(f"{'G':>3} {'d':<14} {'truth':>7} {'mean est':>9} {'coverage':>9}")
    for g in (12, 40):
        for label, d in (("0 (the same)", np.zeros(10)), ("1 on three", np.array([1.0, 0, 0, 1, 0, 0, 0, 1, 0, 0]))):
            truths, ests, cover, n = [], [], 0, 0
            for seed in range(seeds):
                run = fidelity_run(g, d, np.random.default_rng([seed, g, int(d.sum())]))
                got = turntaking.speaker_fidelity(run, run_frames(run), ["J"], resamples=resamples, seed=seed, min_n=2)
                for r in got.iter_rows(named=True):
                    t = float(np.sqrt(np.mean((BEHAVIOUR_RATES * SPEAKER_FACTORS[r["speaker"]] * d) ** 2)))
                    truths.append(t)
                    ests.append(r["distance"])
                    n += 1
                    cover += r["ci_low"] is not None and r["ci_low"] - 1e-12 <= t <= r["ci_high"] + 1e-12
            print(f"{g:>3} {label:<14} {np.mean(truths):>7.4f} {np.mean(ests):>9.4f} {cover / n:>9.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500, help="worlds per G (each with its own conversations)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval")
    ap.add_argument("--mc", type=int, default=4000, help="conversations behind a Monte Carlo truth")
    ap.add_argument("--fidelity-seeds", type=int, default=300, help="worlds per row of the fidelity table")
    ap.add_argument("--only", choices=["accuracy", "fidelity"], help="run one part only")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.only != "accuracy":
        fidelity(a.fidelity_seeds, a.resamples)
    for world in WORLDS if a.only != "fidelity" else ():
        truth = {**mc_truth(world, a.mc), **closed_truth(world)}
        print(f"\nWorld {world}: next-speaker accuracy, 95% intervals ({a.seeds} seeds, {a.resamples} resamples)")
        print(f"{'G':>3} {'rule':<17} {'truth':>7} {'':>3} {'mean acc':>9} {'coverage':>9} {'naive cov':>10}")
        for g in (12, 40):
            rows = [*turntaking.POLICIES, RUN]
            hits: dict[str, list[float]] = {p: [] for p in rows}
            cover = {p: 0 for p in rows}
            naive = {p: 0 for p in rows}
            for seed in range(a.seeds):
                rng = np.random.default_rng([seed, g, len(world)])
                insts = instances(world, g, rng, "s")
                frame = turntaking.next_speaker_frame(insts)
                acc = turntaking.accuracy(frame, resamples=a.resamples, seed=seed, min_n=2)
                runs = turntaking.run_length_frame(Run.model_validate({"instances": insts, "continuations": {}}))
                [ref] = turntaking.run_lengths(runs, resamples=a.resamples, seed=seed, min_n=2).iter_rows(named=True)
                hits[RUN].append(ref["mean_run"])
                cover[RUN] += ref["ci_low"] is not None and ref["ci_low"] <= truth[RUN] <= ref["ci_high"]
                for r in acc.iter_rows(named=True):
                    p, t = r["predictor"], truth[r["predictor"]]
                    hits[p].append(r["accuracy"])
                    cover[p] += r["ci_low"] is not None and r["ci_low"] <= t <= r["ci_high"]
                    half = 1.96 * np.sqrt(r["accuracy"] * (1 - r["accuracy"]) / r["n"])
                    naive[p] += abs(r["accuracy"] - t) <= half
            for p in rows:
                kind = "" if p in CLOSED[world] or p == RUN else "MC"
                nv = "–" if p == RUN else f"{naive[p] / a.seeds:.3f}"
                print(
                    f"{g:>3} {p:<17} {truth[p]:>7.4f} {kind:>3} {np.mean(hits[p]):>9.4f} "
                    f"{cover[p] / a.seeds:>9.3f} {nv:>10}"
                )
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
