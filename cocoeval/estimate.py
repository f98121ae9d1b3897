"""Forecast calls, tokens and cost of a params file before anything is sent.

Simulation calls are laid out from the actual instances and prompts: for a setup with k turns per
call, step j shows the turns "written so far"; their stand-in is the human reference (same
length and style), and each call is expected to output k reference-length turns. Judge calls
render the actual judge prompts for every reference and for each setup's continuation (again
with the reference standing in). Cached input: the constant prefix (the system message) of
every call after the first of a conversation, for providers that cache prompts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .experiment import Experiment
from .judge import _Task as _JudgeTask
from .judge import targets_for
from .llm.base import get_provider, parse_model_spec
from .llm.usage import PriceTable, Usage, count_tokens, token_method
from .prompts import load_prompt
from .schema import Continuation, Instance
from .simulate import format_behaviours, step_messages

CACHING_PROVIDERS = {"openai", "azure", "anthropic"}
"""Providers that bill a repeated prompt prefix at the cached rate (OpenAI/Azure automatically
from 1,024 tokens; Anthropic through the cache_control breakpoints cocoeval sets)."""
JUDGE_OUTPUT_PER_TURN = 50
"""Expected fine-grained judge output per judged turn (the paper's appendix: ≈50 tokens)."""
JUDGE_OUTPUT_OVERALL = 120


def _row() -> dict[str, Any]:
    return {"calls": 0, "input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0}


def forecast(exp: Experiment, instances: list[Instance]) -> list[dict[str, Any]]:
    """Rows per (stage, name, model): calls, input/cached/output tokens; cost naive, with prompt
    caching and through a batch API; and ``mode``/``cost_planned_usd``: how the params file's
    ``llm`` settings (``batch``, ``batch_dependent``) would send the row, and what that costs."""
    prices = PriceTable.load(exp.llm_config().prices)
    behaviours = format_behaviours(exp.taxonomy)
    rows: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(_row)
    for s in exp.params.setups:
        prompt = load_prompt(s.prompt)
        caching = parse_model_spec(s.model).provider in CACHING_PROVIDERS
        for inst in (i for i in instances if s.applies_to(i)):
            ref = inst.reference
            r = rows[("simulate", s.name, s.model)]
            if s.kind == "human_ai":
                r["calls"] += sum(1 for t in ref if t.speaker == "user")
                r["input_tokens"] += sum(count_tokens(t.text) for t in [*inst.history, *ref]) * 2
                r["output_tokens"] += sum(count_tokens(t.text) for t in ref)
                continue
            first = True
            for j in range(0, len(ref), s.turns_per_call):
                k = min(s.turns_per_call, len(ref) - j)
                msgs = step_messages(prompt, inst, ref[:j], k, behaviours=behaviours, n_copy=s.n_copy)
                sys_tok, user_tok = count_tokens(msgs[0].content) + 4, count_tokens(msgs[1].content) + 4
                r["calls"] += 1
                r["input_tokens"] += sys_tok + user_tok
                if caching and not first and sys_tok >= 1024:
                    r["cached_input_tokens"] += sys_tok
                first = False
                copies = s.n_copy if s.prompt == "copy_then_continue" else 0
                r["output_tokens"] += sum(count_tokens(f"{t.speaker}: {t.text}") + 1
                                          for t in ref[max(0, j - copies): j + k])
    proxies = {s.name: [Continuation(instance_id=i.id, setup_id=s.name, setup_name=s.name, turns=i.reference)
                        for i in instances if s.applies_to(i)] for s in exp.params.setups}
    targets = targets_for(instances, proxies)
    for jc in exp.params.judges:
        for kind in jc.kind:
            for t in targets:
                task = _JudgeTask(jc, kind, t, exp.taxonomy)
                r = rows[("judge", f"{jc.name}:{kind}", jc.model)]
                r["calls"] += 1
                r["input_tokens"] += sum(count_tokens(m.content) + 4 for m in task.messages)
                r["output_tokens"] += (JUDGE_OUTPUT_PER_TURN * len(t.judged) if kind == "fine_grained"
                                       else JUDGE_OUTPUT_OVERALL)
    cfg = exp.llm_config()
    multi_step = {s.name for s in exp.params.setups
                  if s.kind == "human_ai" or any(s.turns_per_call < len(i.reference) for i in instances)}
    out = []
    for (stage, name, model), r in sorted(rows.items()):
        u = Usage(**r)
        naive = prices.cost(model, Usage(input_tokens=r["input_tokens"], output_tokens=r["output_tokens"]))
        cached = prices.cost(model, u)
        batch = prices.cost(model, Usage(input_tokens=r["input_tokens"], output_tokens=r["output_tokens"]), batch=True)
        # how the params file's llm settings would send this row: batch only where the provider has
        # a batch API and the calls do not wait for earlier answers (or rounds are asked for)
        batchable = get_provider(model).batch_limits is not None and (
            stage != "simulate" or name not in multi_step or cfg.batch_dependent == "rounds")
        mode = "batch" if cfg.batch and batchable else "live"
        out.append({"stage": stage, "name": name, "model": model, **r, "cost_naive_usd": naive,
                    "cost_cached_usd": cached, "cost_batch_usd": batch, "mode": mode,
                    "cost_planned_usd": batch if mode == "batch" else cached})
    return out


def compare_with_run(rows: list[dict[str, Any]], run: dict[str, Any]) -> list[dict[str, Any]]:
    """Forecast vs actual calls and tokens per (stage, model), the actual ones summed from the
    call records of the run's continuations and judgments (cache hits included: a cached call
    keeps the usage it had)."""
    fc: dict[tuple[str, str], dict[str, int]] = defaultdict(_row)
    for r in rows:
        for k in ("calls", "input_tokens", "output_tokens"):
            fc[(r["stage"], r["model"])][k] += r[k]
    actual: dict[tuple[str, str], dict[str, int]] = defaultdict(_row)
    records = [("simulate", c) for cs in run["continuations"].values() for x in cs for c in x.calls]
    records += [("judge", c) for js in run.get("judgments", {}).values() for j in js for c in j.calls]
    for stage, c in records:
        a = actual[(stage, c.model)]
        a["calls"] += 1
        a["input_tokens"] += c.input_tokens
        a["output_tokens"] += c.output_tokens
    out = []
    for key in sorted(set(fc) & set(actual)):
        f, a = fc[key], actual[key]
        out.append({"stage": key[0], "model": key[1], "forecast_calls": f["calls"], "actual_calls": a["calls"],
                    "forecast_input": f["input_tokens"], "actual_input": a["input_tokens"],
                    "input_ratio": a["input_tokens"] / f["input_tokens"] if f["input_tokens"] else math.nan,
                    "forecast_output": f["output_tokens"], "actual_output": a["output_tokens"]})
    return out


def describe() -> str:
    return f"tokens counted with {token_method()}"
