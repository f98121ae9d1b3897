"""Leaderboard speed: 20 setups x 300 instances x 10 behaviours with 1,000 bootstrap resamples
(per behaviour paired differences, the RMS distance and D, the floor, the Likert gaps; target:
under 5 s on two cores), then the judge-free turn-taking distances of the same run (30 turns per
conversation). Building the run and its frames is timed apart (it is not the leaderboard's).

    python benchmarks/leaderboard.py [--setups 20] [--instances 300] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cocoeval.analysis import convcompare, leaderboard, paper_stats
from cocoeval.analysis.convstats import turn_taking_frame
from cocoeval.analysis.frames import run_frames
from cocoeval.core.schema import (
    Continuation,
    Instance,
    Judgment,
    Metadata,
    Participant,
    Provenance,
    Summary,
    Turn,
    TurnLabel,
)
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run

TURNS = 30
SPEAKERS = ["A", "B", "C", "D"]


def make_run(n_setups: int, n_inst: int, seed: int = 0) -> Run:
    """A run of ``n_inst`` instances (30 + 30 turns), ``n_setups`` simulated setups, one judge of
    both kinds; a few continuations and judgments invalid, as in a real run."""
    tax = load_taxonomy()
    rng = np.random.default_rng(seed)

    def turns(k: int) -> list[Turn]:
        return [Turn(speaker=SPEAKERS[int(s)], text="a few words") for s in rng.integers(0, len(SPEAKERS), k)]

    insts = [
        Instance(
            id=f"d/c{i}/0",
            dataset="d",
            split="eval",
            metadata=Metadata(goals=["decide"], participants=[Participant(name=s) for s in SPEAKERS]),
            summary=Summary(text="before", covers_turns=1),
            history=turns(TURNS),
            reference=turns(TURNS),
            provenance=Provenance(
                source_file="f",
                source_format="qmsum",
                conversation_id=f"c{i}",
                start_index=0,
                seed=0,
                builder_version="bench",
            ),
        )
        for i in range(n_inst)
    ]
    setups = [f"s{j:02d}" for j in range(n_setups)]
    conts = {s: [Continuation(instance_id=i.id, setup_id=s, turns=turns(TURNS)) for i in insts] for s in setups}
    js = []
    for t, target in enumerate(["reference", *setups]):
        rate = 0.05 + 0.02 * t  # each setup its own profile
        for i in insts:
            invalid = target != "reference" and rng.random() < 0.02
            labels = [TurnLabel(turn=k, behaviours=[b for b in tax.ids if rng.random() < rate]) for k in range(TURNS)]
            js.append(
                Judgment(
                    instance_id=i.id,
                    target=target,
                    target_name=target,
                    judge_id="J",
                    judge_name="J",
                    kind="fine_grained",
                    taxonomy_hash=tax.hash,
                    status="invalid" if invalid else "ok",
                    labels=[] if invalid else labels,
                    judged_turns=list(range(TURNS)),
                    reason="bad" if invalid else None,
                )
            )
            js.append(
                Judgment(
                    instance_id=i.id,
                    target=target,
                    target_name=target,
                    judge_id="J",
                    judge_name="J",
                    kind="overall",
                    taxonomy_hash=tax.hash,
                    consistency=int(rng.integers(1, 11)),
                    collaborativeness=int(rng.integers(1, 11)),
                )
            )
    params = {
        "setups": [
            {"name": s, "model": "openai/gpt-4.1", "prompt": "vanilla", "turns_per_call": 1 + j}
            for j, s in enumerate(setups)
        ]
    }
    return Run.model_validate(
        {"instances": insts, "continuations": conts, "judgments": {"J": js}, "manifest": {"params": params}}
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setups", type=int, default=20)
    ap.add_argument("--instances", type=int, default=300)
    ap.add_argument("--resamples", type=int, default=1000)
    a = ap.parse_args()
    t0 = time.perf_counter()
    run = make_run(a.setups, a.instances)
    f = run_frames(run)
    cond = paper_stats.conditions(run)
    build = time.perf_counter() - t0
    t1 = time.perf_counter()
    tt = convcompare.turn_taking(turn_taking_frame(run), resamples=a.resamples)
    turns = time.perf_counter() - t1
    t2 = time.perf_counter()
    board, per_b = leaderboard.leaderboard(f, cond, tt, resamples=a.resamples)
    took = time.perf_counter() - t2
    ranked = board.filter(board["rank"].is_not_null())
    print(
        f"leaderboard: {a.setups} setups x {a.instances} instances x {len(f.taxonomy.ids)} behaviours, "
        f"{a.resamples:,} resamples: {took:.2f} s (target < 5 s; {ranked.height} ranked, {per_b.height} "
        "behaviour rows, the floor and the Likert gaps included)"
    )
    print(f"turn-taking distances of the same run ({TURNS} turns per conversation): {turns:.2f} s")
    print(f"(building the run and its frames, not the leaderboard's: {build:.2f} s)")


if __name__ == "__main__":
    main()
