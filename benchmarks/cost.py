"""Prompt caching, measured: pilot, forecast and bill on a small paper-shaped grid, then the paper's plan.

    python benchmarks/cost.py [--instances 6] [--params params/paper.yaml] [--data DIR | --demo] [--no-paper]

1. Builds paper-shaped instances with the project's bench builder from the QMSum sample shipped
   with cocoeval (real meetings: 30 history and 30 reference turns), with an M and an S of
   realistic length taken from QMSum's own human annotations of each meeting (M: goals from its
   topic summaries and, per participant, what they want, from its per-speaker answers, as the
   metadata prompt asks o4-mini; S: its paragraph summary of the meeting). Then does what a
   researcher would, against the loopback fake server, which bills prompt caching the providers'
   way (OpenAI's prefix rule, Anthropic's breakpoints): runs a pilot (the first instance) of a
   grid shaped like the paper's (1-, 5- and 30-turn-per-call setups on an OpenAI and an Anthropic
   model, an OpenAI reasoning judge and an Anthropic judge, both kinds); forecasts the full grid
   with ``cocoeval estimate``'s code, output and reasoning tokens per call being the pilot's
   observed means; runs the full grid (the pilot's calls come from the call cache, paid once) and
   prints per row, forecast and actual: calls, input, cached input, output, reasoning tokens,
   naive / cached / batch cost, the forecast/actual cost ratio (and the one before the pilot),
   and whether the issue's targets are met. The fake simulators answer, per instance, with turns
   of its reference's speakers of about 50 tokens each (an LLM's length, A.5) in the meeting's own
   words, shuffled per setup (every setup's continuation differs); the fake judges answer with
   fixed valid judgments.
   A judge row also prints its ceiling: the cached share if every call of an instance after the
   first read everything before its target from the cache ((N-1)/N of the shared part, for N
   targets per instance), the most any layout that keeps one target per request can bill.
2. Forecasts the params file (default: the paper's) on real data or the demo conversations and
   prints per row the naive, cached, batch and planned cost, and the totals. Nothing is sent.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cocoeval import BuildConfig, build  # noqa: E402
from cocoeval.bench.store import load_instances  # noqa: E402
from cocoeval.core.jsonio import write_jsonl  # noqa: E402
from cocoeval.core.schema import Instance, Participant  # noqa: E402
from cocoeval.core.taxonomy import load_taxonomy  # noqa: E402
from cocoeval.judge.config import PROMPTS  # noqa: E402
from cocoeval.llm.base import Usage  # noqa: E402
from cocoeval.llm.promptcache import chars_tokens, openai_cached  # noqa: E402
from cocoeval.llm.usage import PriceTable  # noqa: E402
from cocoeval.prompts.files import load_prompt  # noqa: E402
from cocoeval.prompts.render import format_metadata, judge_messages, render_target  # noqa: E402
from cocoeval.run import Run, load_params  # noqa: E402
from cocoeval.run.estimate import (  # noqa: E402
    ForecastRow,
    describe,
    forecast,
    judge_cache_bounds,
    observed_output,
    observed_reasoning,
    plan_totals,
)
from cocoeval.sources.demo import sample_dir, write_demo_data  # noqa: E402
from tests.fakes.server import FakeServer  # noqa: E402

KS = (1, 5, 30)
FIELDS = ("calls", "input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
Key = tuple[str, str, str]
"""A forecast row's (stage, name, model)."""


@dataclass
class Tokens:
    """The actual calls and tokens of one forecast row, summed from a run's call records."""

    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]


def with_paper_context(inst: Instance) -> Instance:
    """The instance with an M and an S of realistic length, from QMSum's annotations of its meeting."""
    meeting = json.loads(Path(inst.provenance.source_file).read_text(encoding="utf-8"))
    answers = [(q["query"], q["answer"]) for q in meeting.get("specific_query_list", [])]
    goals = [first_sentence(a) for q, a in answers if q.lower().startswith("summarize")][:5]
    people = []
    for p in inst.metadata.participants:
        label = (p.name.split("(")[0].strip() or p.name).lower()
        said = next(
            (
                first_sentence(a)
                for q, a in sorted(answers, key=lambda qa: not qa[0].lower().startswith(f"what did {label}"))
                if label and label in q.lower()
            ),
            None,
        )
        people.append(Participant(name=p.name, role=p.role, stance=said or p.stance))
    meta = inst.metadata.model_copy(update={"goals": goals or inst.metadata.goals, "participants": people})
    general = meeting.get("general_query_list") or [{"answer": inst.summary.text}]
    return inst.model_copy(
        update={"metadata": meta, "summary": inst.summary.model_copy(update={"text": general[0]["answer"]})}
    )


def paper_instances(n: int, tmp: Path) -> list[Instance]:
    """n paper-shaped instances of the shipped QMSum sample, datasets interleaved."""
    build([f"qmsum:{sample_dir()}"], tmp / "built", BuildConfig(per_dataset=max(1, math.ceil(n / 3)), seed=0))
    by_ds: dict[str, list[Instance]] = defaultdict(list)
    for i in load_instances(tmp / "built", "eval"):
        by_ds[i.dataset].append(i)
    mixed = [i for row in zip(*by_ds.values(), strict=False) for i in row]
    return [with_paper_context(i) for i in mixed[:n]]


LLM_TURN_CHARS = 200
"""A fake simulated turn: about 50 tokens, what an LLM writes per turn (the paper's A.5)."""


def llm_turns(inst: Instance) -> list[str]:
    """30 simulator-like turns of an instance: the speakers of its reference, each saying about
    50 tokens of the meeting's own words (from that reference turn on)."""
    out = []
    for j, t in enumerate(inst.reference):
        words = " ".join(x.text for x in inst.reference[j:]).split()
        text = ""
        for w in words:
            text = f"{text} {w}".strip()
            if len(text) >= LLM_TURN_CHARS:
                break
        out.append(f"{t.speaker}: {text}")
    return out


def answers(insts: list[Instance]) -> list[dict]:
    """Scripted fake answers. Simulators: per instance (``context``: its last history turn) and
    setup, its ``llm_turns`` in a fresh shuffled order, k at a time, each answer used once (so
    every setup's continuation differs); judges: fixed valid judgments."""
    sim = []
    for n, inst in enumerate(insts):
        last = inst.history[-1]
        context, turns = f"{last.speaker}: {last.text[:80]}", llm_turns(inst)
        for k in sorted(KS, reverse=True):  # "next 30 turns" before "next 1 turn"
            for copy in range(2):  # the OpenAI and the Anthropic setup with k turns per call
                pool = random.Random(n * 100 + k * 10 + copy).sample(turns, len(turns))
                sim += [
                    {"match": f"next {k} turn", "context": context, "text": "\n".join(pool[j : j + k]), "times": 1}
                    for j in range(0, len(pool), k)
                ]
        # the rest of a short answer is asked for with any k: answered from the turns in order
        sim += [
            {"match": f"next {k} turn", "context": context, "text": "\n".join(turns[:k]), "times": -1}
            for k in range(30, 0, -1)
        ]
    name = load_taxonomy().behaviours[0].name
    fine = (
        '{"turns": ['
        + ", ".join(
            f'{{"turn": {i}, "behaviours": [{{"behaviour": "{name}", "evidence": '
            '"the speaker repeats the earlier point"}]}'
            for i in range(1, 31)
        )
        + "]}"
    )
    rationale = ("The speakers stay in role and build on the history; a few turns drift from the agenda. " * 3)[:290]
    return [
        {"match": "Continuation to annotate", "text": fine, "times": -1},
        {
            "match": "Continuation to evaluate",
            "times": -1,
            "text": f'{{"consistency": 7, "collaborativeness": 7, "rationale": "{rationale}"}}',
        },
        *sim,
    ]


def actual_rows(run: Run) -> dict[Key, Tokens]:
    """Tokens per forecast row from the run's call records (cache hits included: the pilot paid them)."""
    rows: dict[Key, Tokens] = defaultdict(Tokens)
    recs = [(("simulate", x.setup_name or n), c) for n, xs in run.continuations.items() for x in xs for c in x.calls]
    recs += [
        (("judge", f"{j.judge_name or n}:{j.kind}"), c)
        for n, js in run.all_judgments.items()
        for j in js
        for c in j.calls
    ]
    for (stage, name), c in recs:
        r = rows[(stage, name, c.model)]
        r.calls += 1
        for k in FIELDS[1:]:
            setattr(r, k, getattr(r, k) + getattr(c, k))
    return rows


def target_turns(run: Run) -> dict[tuple[str, str], list]:
    """The turns of every judge target by (instance id, target): each continuation and the reference."""
    turns = {(c.instance_id, c.setup_id): c.turns for xs in run.continuations.values() for c in xs}
    return turns | {(i.id, "reference"): i.reference for i in run.instances}


def ceilings(run: Run) -> dict[tuple[str, str, str], float]:
    """Per judge row: the cached share if every call of an instance after the first read all of
    its prompt before the target (OpenAI: in 128-token steps from 1,024)."""
    turns = target_turns(run)
    groups: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    total: dict[tuple[str, str, str], int] = defaultdict(int)
    for n, js in run.all_judgments.items():
        for j in js:
            if not j.calls or any(x.input_tokens is None for x in j.calls):  # unknown usage: no share
                continue
            c = j.calls[0]
            key = ("judge", f"{j.judge_name or n}:{j.kind}", c.model)
            target = chars_tokens(render_target(turns[(j.instance_id, j.target)], j.judged_turns) + "\n")
            shared = c.input_tokens - target
            groups[(*key, j.instance_id)].append(openai_cached(shared) if c.model.startswith("openai/") else shared)
            total[key] += sum(x.input_tokens for x in j.calls)
    best: dict[tuple[str, str, str], int] = defaultdict(int)
    for (stage, name, model, _), shared in groups.items():
        best[(stage, name, model)] += sum(sorted(shared)[:-1])  # all but one call of the instance read it
    return {k: best[k] / total[k] for k in total if total[k]}


Sections = dict[str, dict[str, dict]]
"""Per judge (its row label) and instance: ``instructions`` per kind, ``context``, ``targets`` (tokens)."""


def sections(run: Run) -> Sections:
    """The token sizes of each judge prompt's parts, per judge and instance, for the layout bounds."""
    turns = target_turns(run)
    insts, tax = {i.id: i for i in run.instances}, load_taxonomy()
    out: Sections = defaultdict(lambda: defaultdict(lambda: {"instructions": {}, "context": None, "targets": {}}))
    for n, js in run.all_judgments.items():
        for j in js:
            if not j.calls:
                continue
            (system, user), at = judge_messages(
                load_prompt(PROMPTS[j.kind]),
                insts[j.instance_id],
                turns[(j.instance_id, j.target)],
                j.judged_turns,
                tax,
            )
            s = out[f"{j.judge_name or n} ({j.calls[0].model.split('@')[0].split('/')[-1]})"][j.instance_id]
            ctx = chars_tokens(user.content[:at])
            s["instructions"][j.kind] = chars_tokens(system.content)
            s["context"] = ctx if s["context"] is None else min(s["context"], ctx)  # the kinds' headers differ
            s["targets"][j.target] = chars_tokens(user.content[at:])
    return out


def bounds(per_instance: dict[str, dict], n_targets: int | None = None) -> dict[str, float]:
    """Cached-share bounds of a judge over its instances (``judge_cache_bounds``); with
    ``n_targets``, for an instance of the mean sizes with that many targets."""
    sums: dict[str, int] = defaultdict(int)
    if n_targets is not None:
        xs = list(per_instance.values())
        kinds = {k for x in xs for k in x["instructions"]}
        mean_t = sum(sum(x["targets"].values()) for x in xs) / sum(len(x["targets"]) for x in xs)
        per_instance = {
            "mean": {
                "instructions": {k: round(sum(x["instructions"].get(k, 0) for x in xs) / len(xs)) for k in kinds},
                "context": round(sum(x["context"] for x in xs) / len(xs)),
                "targets": dict.fromkeys(range(n_targets), round(mean_t)),
            }
        }
    for x in per_instance.values():
        for k, v in judge_cache_bounds(x["instructions"], x["context"], list(x["targets"].values())).items():
            sums[k] += v
    return {k: sums[k] / sums["total"] for k in ("paper", "reordered", "free")} if sums["total"] else {}


def print_bounds(secs: Sections, n_targets: int | None = None) -> None:
    for name, per in sorted(secs.items()):
        n = n_targets or round(sum(len(x["targets"]) for x in per.values()) / len(per))
        b = bounds(per, n_targets)
        print(
            f"judge {name}, both kinds, {n} targets per instance: at most {b['paper']:.2f} cached in the paper's "
            f"order (instructions, M, S, x, target); {b['reordered']:.2f} in the best order of the same words "
            f"(M, S, x, target, then each kind's instructions); {b['free']:.2f} if instructions cost nothing "
            "(the limit of any layout with one target per request)"
        )


def share(r: ForecastRow | Tokens) -> float:
    return r.cached_input_tokens / r.input_tokens if r.input_tokens else float("nan")


def measured(n: int, tmp: Path) -> Sections:
    insts = paper_instances(n, tmp)
    write_jsonl(tmp / "bench" / "eval.jsonl", insts)
    write_jsonl(tmp / "bench" / "train.jsonl", [])
    os.environ["COCOEVAL_ALLOW_KEY_TO_LOOPBACK"] = "1"
    os.environ.setdefault("OPENAI_API_KEY", "sk-fake-benchmark")
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-fake-benchmark")
    with FakeServer() as srv:
        srv.configure(answers=answers(insts), reasoning_tokens=400)
        oai, ant = f"openai/gpt-4.1@{srv.openai_base}", f"anthropic/claude-sonnet-4-20250514@{srv.anthropic_base}"
        setups = [
            {"name": f"{p}-k{k}", "model": m, "turns_per_call": k, "prompt": "taxonomy" if k == 5 else "vanilla"}
            for p, m in (("oai", oai), ("ant", ant))
            for k in KS
        ]
        params = {
            "name": "cost",
            "out": "run",
            "bench": "bench",
            "setups": setups,
            "judges": [
                {"name": "o4mini", "model": f"openai/o4-mini@{srv.openai_base}", "reasoning_effort": "medium"},
                {"name": "sonnet", "model": ant},
            ],
            "llm": {"cache": "c.sqlite", "progress": False, "concurrency": 16},
        }
        (tmp / "pilot.yaml").write_text(yaml.safe_dump({**params, "instances": {"ids": [insts[0].id]}}))
        (tmp / "p.yaml").write_text(yaml.safe_dump(params))
        load_params(tmp / "pilot.yaml").run()
        pilot = Run.open(tmp / "run")
        exp = load_params(tmp / "p.yaml")
        ready = exp.prepare_instances(write=False)
        before = {(r.stage, r.name, r.model): r for r in forecast(exp, ready)}
        rows = forecast(exp, ready, observed=observed_reasoning(pilot), observed_out=observed_output(pilot))
        exp.run()
        run = Run.open(tmp / "run")
    report(insts, rows, before, actual_rows(run), ceilings(run))
    notes: dict[str, int] = defaultdict(int)
    for xs in run.continuations.values():
        for x in xs:
            for note in x.notes:
                notes[re.sub(r"\d+", "N", re.sub(r"^turn \d+: ", "", note))] += 1
    if notes:
        print(
            "simulation calls beyond the plan (the forecast plans every answer usable) came from these notes: "
            + "; ".join(f"{k} ({v}x)" for k, v in sorted(notes.items(), key=lambda kv: -kv[1]))
        )
    secs = sections(run)
    print("judging's cached share, upper bounds (no 1,024-token minimum, no 128-token steps):")
    print_bounds(secs)
    return secs


def report(
    insts: list[Instance],
    rows: list[ForecastRow],
    before: dict[Key, ForecastRow],
    actual: dict[Key, Tokens],
    ceil: dict[Key, float],
) -> None:
    prices = PriceTable.load()
    hist = sum(chars_tokens("\n".join(f"{t.speaker}: {t.text}" for t in i.history)) for i in insts) / len(insts)
    ref = sum(chars_tokens("\n".join(f"{t.speaker}: {t.text}" for t in i.reference)) for i in insts) / len(insts)
    meta = sum(chars_tokens(format_metadata(i.metadata)) for i in insts) / len(insts)
    summ = sum(chars_tokens(i.summary.text) for i in insts) / len(insts)
    print(
        f"measured: {len(insts)} paper-shaped instances of real QMSum meetings (30 history turns, ~{hist:,.0f} "
        f"tokens; 30 reference turns, ~{ref:,.0f}; M ~{meta:,.0f}, S ~{summ:,.0f}; means), pilot {insts[0].id}; "
        f"fake server billing prompt caching; {describe()}"
    )
    print(
        f"{'row':<46} {'':<8} {'calls':>6} {'input':>10} {'cached':>10} {'share':>6} {'output':>9} "
        f"{'reasoning':>9} {'naive':>8} {'cached':>8} {'batch':>8}"
    )

    def cost(model: str, r: ForecastRow | Tokens, **kw) -> tuple[float, float, float]:
        plain = Usage(input_tokens=r.input_tokens, output_tokens=r.output_tokens)
        cached = Usage(**{k: getattr(r, k) for k in FIELDS[1:5]})
        return (
            prices.cost(model, plain) or 0.0,
            prices.cost(model, cached) or 0.0,
            prices.cost(model, plain, batch=True) or 0.0,
        )

    met_all = True
    for f in rows:
        key = (f.stage, f.name, f.model)
        a = actual.get(key)
        label = f"{f.stage} {f.name} ({f.model.split('@')[0].split('/')[-1]})"
        pair: tuple[tuple[str, ForecastRow | Tokens | None], ...] = (("forecast", f), ("actual", a))
        for what, r in pair:
            if r is None:
                print(f"{label:<46} {what:<8} (no calls)")
                continue
            naive, cached, batch = cost(f.model, r)
            print(
                f"{label if what == 'forecast' else '':<46} {what:<8} {r.calls:>6,} {r.input_tokens:>10,} "
                f"{r.cached_input_tokens:>10,} {share(r):>6.2f} {r.output_tokens:>9,} "
                f"{r.reasoning_tokens:>9,} ${naive:>7.3f} ${cached:>7.3f} ${batch:>7.3f}"
            )
        if a is None:
            met_all = False
            continue
        act = cost(f.model, a)[1]
        ratio, ratio0 = cost(f.model, f)[1] / act, cost(f.model, before[key])[1] / act
        checks = [
            ("forecast cost within ±10%", abs(ratio - 1) <= 0.10),
            ("forecast cached share within 0.05", abs(share(f) - share(a)) <= 0.05),
        ]
        if f.stage == "judge":
            checks.insert(0, ("judging cached ≥ 0.80", share(a) >= 0.80))
        elif f.name.endswith("-k1"):
            checks.insert(0, ("1-turn simulation cached ≥ 0.90", share(a) >= 0.90))
        met_all &= all(ok for _, ok in checks)
        extra = f"; ceiling {ceil[key]:.2f}" if key in ceil else ""
        print(
            f"{'':<46} {'fc/act':<8} cost {ratio:.2f} (before the pilot, output "
            f"{before[key].output_source}: {ratio0:.2f}){extra}; "
            + ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in checks)
        )
    print("targets: " + ("all met" if met_all else "some missed (MISSED above)"))


def sources(data: Path | None, tmp: Path) -> tuple[list[str], str]:
    if data is not None and (data / "qmsum").is_dir() and (data / "iq2-corpus").is_dir():
        return [f"qmsum:{data / 'qmsum'}", f"convokit:{data / 'iq2-corpus'}"], f"real data under {data}"
    paths = write_demo_data(tmp / "demo-data")
    return [f"{kind}:{p}" for kind, p in paths.items()], "the demo conversations (illustrative, not human data)"


def usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.2f}"


def paper(params: Path, data: Path | None, tmp: Path, secs: Sections | None = None) -> None:
    exp = load_params(params)
    srcs, what = sources(data, tmp)
    build(srcs, tmp / "pbench", BuildConfig(per_dataset=50, seed=0))
    exp.params = exp.params.model_copy(update={"bench": str(tmp / "pbench"), "build": None})
    insts = exp.prepare_instances(write=False)
    rows = forecast(exp, insts)
    print(f"\n{params.name} over {len(insts)} instances from {what}; {describe()}")
    print(
        f"{'stage':<8} {'name':<26} {'calls':>7} {'input':>12} {'cached':>12} {'share':>6} {'output':>10} "
        f"{'reasoning':>10} {'naive':>10} {'cached':>10} {'batch':>10} {'planned':>10}"
    )
    for r in rows:
        print(
            f"{r.stage:<8} {r.name[:26]:<26} {r.calls:>7,} {r.input_tokens:>12,} "
            f"{r.cached_input_tokens:>12,} {share(r):>6.2f} {r.output_tokens:>10,} {r.reasoning_tokens:>10,} "
            f"{usd(r.cost_naive_usd):>10} {usd(r.cost_cached_usd):>10} {usd(r.cost_batch_usd):>10} "
            f"{usd(r.cost_planned_usd):>10}"
        )
    tot = plan_totals(rows)
    print(
        "total: "
        + ", ".join(
            f"{label} {usd(getattr(tot, k))}"
            for label, k in (("naive", "naive"), ("cached", "live"), ("batch", "batch"), ("planned", "planned"))
        )
        + (f" (+{tot.unknown} row(s) at unknown prices, left out)" if tot.unknown else "")
    )
    print(f"choice: every call live {usd(tot.live)}; with --batch {usd(tot.with_batch)}")
    judge_gap(exp, rows, len(insts), tot.planned, secs)


TARGET_JUDGE_SHARE = 0.80
"""The issue's target for judging's cached share, priced on the paper grid by ``judge_gap``."""


def judge_gap(exp, rows: list[ForecastRow], n_insts: int, planned: float | None, secs: Sections | None) -> None:
    """What judging's cached-share target is worth on the paper grid, and the bounds at its targets per instance."""
    prices = PriceTable.load(exp.llm_config().prices)
    judge = [r for r in rows if r.stage == "judge" and r.cost_cached_usd is not None]
    if not judge or planned is None:  # None: no known price, so no judge row either
        return
    at_target = sum(
        prices.cost(
            r.model,
            Usage(
                input_tokens=r.input_tokens,
                cached_input_tokens=round(TARGET_JUDGE_SHARE * r.input_tokens),
                output_tokens=r.output_tokens,
                reasoning_tokens=r.reasoning_tokens,
            ),
        )
        or 0.0
        for r in judge
    )
    cached, batch = sum(r.cost_cached_usd or 0.0 for r in judge), sum(r.cost_batch_usd or 0.0 for r in judge)
    print(
        f"judging: ${cached:,.2f} with caching (share {sum(r.cached_input_tokens for r in judge) / sum(r.input_tokens for r in judge):.2f}), "
        f"${batch:,.2f} through a batch API; at the target's {TARGET_JUDGE_SHARE:.2f} cached it would be "
        f"${at_target:,.2f}, ${cached - at_target:,.2f} less ({(cached - at_target) / planned:.1%} of the planned total)"
    )
    if secs:
        n = round(max(r.calls for r in judge) / n_insts)
        print(
            f"judging's cached share, upper bounds at the paper grid's {n} targets per instance (mean sizes "
            "of the measured grid's prompts):"
        )
        print_bounds(secs, n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--instances",
        type=int,
        default=6,
        help="paper-shaped instances of the QMSum sample in the measured grid (the first is the pilot)",
    )
    ap.add_argument("--params", type=Path, default=ROOT / "params" / "paper.yaml")
    ap.add_argument(
        "--data",
        type=Path,
        default=ROOT.parent / "shared" / "data",
        help="folder with qmsum/ and iq2-corpus/ (default ../shared/data)",
    )
    ap.add_argument("--demo", action="store_true", help="forecast the params file on the demo conversations")
    ap.add_argument("--no-paper", action="store_true", help="only the measured grid")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        secs = measured(a.instances, Path(tmp))
        if not a.no_paper:
            paper(a.params, None if a.demo else a.data, Path(tmp), secs)


if __name__ == "__main__":
    main()
