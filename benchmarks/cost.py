"""Forecast the bill of a params file three ways: naive, prompt-cached and batch.

    python benchmarks/cost.py [--params params/paper.yaml] [--data DIR | --demo]

Builds the benchmark the params file would run on (by default the real QMSum and IQ2 data under
../shared/data with 50 instances per dataset, as the paper; ``--demo`` or no real data: the
illustrative demo conversations), lays out every call from the actual instances and prompts
(``cocoeval estimate``), and prints per setup and judge the calls, input (and cached) and output
tokens and the cost of: naive live calls; live calls with prompt caching (the constant prefix at
the cached rate); the batch APIs (half price; for 1- and 5-turn-per-call setups, rounds of
batches); then the ratio of the cheapest way to naive. Nothing is sent; no key is needed.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from cocoeval import BuildConfig, build
from cocoeval.demo import write_demo_data
from cocoeval.estimate import describe, forecast
from cocoeval.experiment import load_params

ROOT = Path(__file__).resolve().parents[1]


def sources(data: Path | None, tmp: Path) -> tuple[list[str], str]:
    if data is not None and (data / "qmsum").is_dir() and (data / "iq2-corpus").is_dir():
        return [f"qmsum:{data / 'qmsum'}", f"convokit:{data / 'iq2-corpus'}"], f"real data under {data}"
    paths = write_demo_data(tmp / "demo-data")
    return [f"{kind}:{p}" for kind, p in paths.items()], "the demo conversations (illustrative, not human data)"


def usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=Path, default=ROOT / "params" / "paper.yaml")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                    help="folder with qmsum/ and iq2-corpus/ (default ../shared/data)")
    ap.add_argument("--demo", action="store_true", help="use the demo conversations")
    a = ap.parse_args()
    exp = load_params(a.params)
    with tempfile.TemporaryDirectory() as tmp:
        srcs, what = sources(None if a.demo else a.data, Path(tmp))
        build(srcs, Path(tmp) / "bench", BuildConfig(per_dataset=50, seed=0))
        exp.params = exp.params.model_copy(update={"bench": str(Path(tmp) / "bench"), "build": None})
        insts = exp.prepare_instances(write=False)
        rows = forecast(exp, insts)
    print(f"{a.params.name} over {len(insts)} instances from {what}; {describe()}")
    print(f"{'stage':<8} {'name':<28} {'calls':>7} {'input':>12} {'cached':>12} {'output':>10} "
          f"{'naive':>11} {'cached':>11} {'batch':>11} {'cheapest':>9}")
    totals = {"naive": 0.0, "cheapest": 0.0}
    unknown = []
    for r in rows:
        costs = {"naive": r["cost_naive_usd"], "cached": r["cost_cached_usd"], "batch": r["cost_batch_usd"]}
        known = {k: v for k, v in costs.items() if v is not None}
        best = min(known, key=known.__getitem__) if known else "-"
        print(f"{r['stage']:<8} {r['name'][:28]:<28} {r['calls']:>7,} {r['input_tokens']:>12,} "
              f"{r['cached_input_tokens']:>12,} {r['output_tokens']:>10,} {usd(costs['naive']):>11} "
              f"{usd(costs['cached']):>11} {usd(costs['batch']):>11} {best:>9}")
        if r["cost_naive_usd"] is None:
            unknown.append(r["name"])
            continue
        totals["naive"] += r["cost_naive_usd"]
        totals["cheapest"] += known[best]
    ratio = totals["cheapest"] / totals["naive"] if totals["naive"] else float("nan")
    print(f"total naive {usd(totals['naive'])}; cheapest per row {usd(totals['cheapest'])}; "
          f"ratio cheapest/naive {ratio:.2f}" + (f" ({len(unknown)} row(s) at unknown prices left out: "
                                                  f"{', '.join(unknown)})" if unknown else ""))


if __name__ == "__main__":
    main()
