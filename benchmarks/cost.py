"""Prompt caching, measured: forecast vs bill on a small paper-shaped grid, then the paper's plan.

    python benchmarks/cost.py [--instances 4] [--params params/paper.yaml] [--data DIR | --demo] [--no-paper]

1. Runs a small grid shaped like the paper's (1-, 5- and 30-turn-per-call setups on an OpenAI
   and an Anthropic model, an OpenAI reasoning judge and an Anthropic judge, both kinds) on
   synthetic meetings long enough to pass the providers' minimum cacheable length, against the
   loopback fake server, which bills prompt caching the providers' way (OpenAI prefix rule,
   Anthropic breakpoints). Prints per stage and model: input tokens, the cached share of input
   forecast by ``cocoeval estimate`` and billed by the server, and the forecast/actual cost
   ratio (the actual cost: the run's call records at ``prices.yaml``).
2. Forecasts the params file (default: the paper's) on real data or the demo conversations and
   prints per row the naive, cached, batch and planned cost, and the totals. Nothing is sent.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cocoeval import BuildConfig, build  # noqa: E402
from cocoeval.demo import write_demo_data  # noqa: E402
from cocoeval.estimate import compare_with_run, describe, forecast  # noqa: E402
from cocoeval.experiment import load_params  # noqa: E402
from cocoeval.jsonio import write_jsonl  # noqa: E402
from cocoeval.llm.base import Usage  # noqa: E402
from cocoeval.llm.usage import PriceTable  # noqa: E402
from cocoeval.run import Run  # noqa: E402
from cocoeval.schema import Instance, Metadata, Participant, Provenance, Summary, Turn  # noqa: E402
from cocoeval.taxonomy import load_taxonomy  # noqa: E402
from tests.fakes.server import FakeServer  # noqa: E402

SPEAKERS = ["Alice", "Bob", "Carol", "Dan"]
WORDS = ["budget", "design", "remote", "control", "battery", "case", "button", "plastic", "market", "users", "price", "trend", "colour", "shape", "kinetic", "rubber", "young", "fancy", "feature", "scroll", "wheel", "display", "cost", "target", "euro", "meeting"]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def meeting(i: int, rng: random.Random, n_hist: int = 40, n_ref: int = 30) -> Instance:
    def turns(n: int) -> list[Turn]:
        return [Turn(speaker=SPEAKERS[(j * 3 + i) % 4], text=sentence(rng, rng.randint(12, 40))) for j in range(n)]

    return Instance(
        id=f"bench/m{i}/0", dataset="bench", split="eval",
        metadata=Metadata(goals=["Agree on the remote control's design and budget"],
                          participants=[Participant(name=s, role="designer") for s in SPEAKERS]),
        summary=Summary(text=" ".join(sentence(rng, 20) for _ in range(5)), covers_turns=20),
        history=turns(n_hist), reference=turns(n_ref),
        provenance=Provenance(source_file="synthetic", source_format="qmsum", conversation_id=f"m{i}",
                              start_index=20, seed=0, builder_version="bench"))


def answers(insts: list[Instance]) -> list[dict]:
    """Scripted fake answers: reference-like turns for the simulators, valid judgments."""
    ref = meeting(99, random.Random(1)).reference  # like a reference, but none of them
    text = {k: "\n".join(f"{t.speaker}: {t.text}" for t in ref[:k]) for k in range(1, 31)}
    name = load_taxonomy().behaviours[0].name  # answers about as long as the forecast expects
    fine = '{"turns": [' + ", ".join(f'{{"turn": {i}, "behaviours": [{{"behaviour": "{name}", "evidence": '
                                     f'"{"the speaker repeats the earlier point"[: 36]}"}}]}}'
                                     for i in range(1, 31)) + "]}"
    rationale = "The speakers stay in role and build on the history; a few turns drift from the budget. " * 3
    return [{"match": "Continuation to annotate", "text": fine},
            {"match": "Continuation to evaluate",
             "text": f'{{"consistency": 7, "collaborativeness": 7, "rationale": "{rationale[:290]}"}}'},
            *({"match": f"next {k} turn", "text": text[k]} for k in range(30, 0, -1))]


def measured(n: int, tmp: Path) -> None:
    rng = random.Random(0)
    insts = [meeting(i, rng) for i in range(n)]
    write_jsonl(tmp / "bench" / "eval.jsonl", insts)
    write_jsonl(tmp / "bench" / "train.jsonl", [])
    os.environ["COCOEVAL_ALLOW_KEY_TO_LOOPBACK"] = "1"
    os.environ.setdefault("OPENAI_API_KEY", "sk-fake-benchmark")
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-fake-benchmark")
    with FakeServer() as srv:
        srv.configure(answers=answers(insts), reasoning_tokens=400)
        oai, ant = f"openai/gpt-4.1@{srv.openai_base}", f"anthropic/claude-sonnet-4-20250514@{srv.anthropic_base}"
        setups = [{"name": f"{p}-k{k}", "model": m, "turns_per_call": k, "prompt": "taxonomy" if k == 5 else "vanilla"}
                  for p, m in (("oai", oai), ("ant", ant)) for k in (1, 5, 30)]
        params = {"name": "cost", "out": "run", "bench": "bench", "setups": setups,
                  "judges": [{"name": "o4mini", "model": f"openai/o4-mini@{srv.openai_base}"},
                             {"name": "sonnet", "model": ant}],
                  "llm": {"cache": "c.sqlite", "progress": False, "concurrency": 16}}
        (tmp / "p.yaml").write_text(yaml.safe_dump(params))
        exp = load_params(tmp / "p.yaml")
        ready = exp.prepare_instances(write=False)
        exp.run()
        run = Run.open(tmp / "run")
    rows = forecast(exp, ready, observed={("judge", f"openai/o4-mini@{srv.openai_base}"): 400.0})
    prices = PriceTable.load()
    actual_cost: dict[tuple[str, str], float] = {}
    for stage, group in (("simulate", run.continuations), ("judge", run.all_judgments)):
        for xs in group.values():
            for x in xs:
                for c in (c for c in x.calls if not c.cache_hit):
                    u = Usage(input_tokens=c.input_tokens, cached_input_tokens=c.cached_input_tokens,
                              cache_write_tokens=c.cache_write_tokens, output_tokens=c.output_tokens)
                    actual_cost[(stage, c.model)] = actual_cost.get((stage, c.model), 0.0) + (
                        prices.cost(c.model, u) or 0.0)
    fcost: dict[tuple[str, str], float] = {}
    for r in rows:
        fcost[(r["stage"], r["model"])] = fcost.get((r["stage"], r["model"]), 0.0) + (r["cost_cached_usd"] or 0.0)
    print(f"measured: {n} synthetic meetings (40 history + 30 reference turns), fake server billing "
          f"prompt caching; {describe()}")
    print(f"{'stage':<9} {'model':<34} {'calls':>6} {'input':>10} {'cached fc':>9} {'cached act':>10} "
          f"{'cost fc':>9} {'cost act':>9} {'fc/act':>7}")
    for c in compare_with_run(rows, run):
        key = (c["stage"], c["model"])
        model = c["model"].split("@")[0]
        ratio = fcost[key] / actual_cost[key] if actual_cost.get(key) else float("nan")
        print(f"{c['stage']:<9} {model:<34} {c['actual_calls']:>6} {c['actual_input']:>10,} "
              f"{c['forecast_cached_share']:>9.2f} {c['actual_cached_share']:>10.2f} "
              f"${fcost[key]:>8.3f} ${actual_cost[key]:>8.3f} {ratio:>7.2f}")
    by_setup: dict[str, list[int]] = {}
    for name, xs in run.continuations.items():
        for x in xs:
            for c in x.calls:
                s = by_setup.setdefault(name, [0, 0])
                s[0] += c.cached_input_tokens
                s[1] += c.input_tokens
    for name, xs in run.all_judgments.items():
        for x in xs:
            for c in x.calls:
                s = by_setup.setdefault(f"judge {name}:{x.kind}", [0, 0])
                s[0] += c.cached_input_tokens
                s[1] += c.input_tokens
    print("cached share of input billed, per setup / judge: "
          + ", ".join(f"{k} {v[0] / v[1]:.2f}" for k, v in by_setup.items() if v[1]))


def sources(data: Path | None, tmp: Path) -> tuple[list[str], str]:
    if data is not None and (data / "qmsum").is_dir() and (data / "iq2-corpus").is_dir():
        return [f"qmsum:{data / 'qmsum'}", f"convokit:{data / 'iq2-corpus'}"], f"real data under {data}"
    paths = write_demo_data(tmp / "demo-data")
    return [f"{kind}:{p}" for kind, p in paths.items()], "the demo conversations (illustrative, not human data)"


def usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.2f}"


def paper(params: Path, data: Path | None, tmp: Path) -> None:
    exp = load_params(params)
    srcs, what = sources(data, tmp)
    build(srcs, tmp / "pbench", BuildConfig(per_dataset=50, seed=0))
    exp.params = exp.params.model_copy(update={"bench": str(tmp / "pbench"), "build": None})
    insts = exp.prepare_instances(write=False)
    rows = forecast(exp, insts)
    print(f"\n{params.name} over {len(insts)} instances from {what}; {describe()}")
    print(f"{'stage':<8} {'name':<26} {'calls':>7} {'input':>12} {'cached':>12} {'output':>10} {'reasoning':>10} "
          f"{'naive':>10} {'cached':>10} {'batch':>10} {'planned':>10}")
    tot = dict.fromkeys(("naive", "cached", "batch", "planned"), 0.0)
    for r in rows:
        print(f"{r['stage']:<8} {r['name'][:26]:<26} {r['calls']:>7,} {r['input_tokens']:>12,} "
              f"{r['cached_input_tokens']:>12,} {r['output_tokens']:>10,} {r['reasoning_tokens']:>10,} "
              f"{usd(r['cost_naive_usd']):>10} {usd(r['cost_cached_usd']):>10} {usd(r['cost_batch_usd']):>10} "
              f"{usd(r['cost_planned_usd']):>10}")
        if r["cost_naive_usd"] is not None:
            for k in tot:
                tot[k] += r[f"cost_{k}_usd"]
    print("total: " + ", ".join(f"{k} {usd(v)}" for k, v in tot.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=4, help="synthetic meetings in the measured grid")
    ap.add_argument("--params", type=Path, default=ROOT / "params" / "paper.yaml")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                    help="folder with qmsum/ and iq2-corpus/ (default ../shared/data)")
    ap.add_argument("--demo", action="store_true", help="forecast the params file on the demo conversations")
    ap.add_argument("--no-paper", action="store_true", help="only the measured grid")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measured(a.instances, Path(tmp))
        if not a.no_paper:
            paper(a.params, None if a.demo else a.data, Path(tmp))


if __name__ == "__main__":
    main()
