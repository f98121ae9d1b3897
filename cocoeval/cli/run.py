"""The ``cocoeval`` commands that run or price LLM calls: run, estimate, check, batches."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import shlex
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._args import add_set_option, float_range, int_range, out_file, params_sets, seconds

if TYPE_CHECKING:
    from cocoeval.run.outcome import RunSummary
    from cocoeval.run.params import ExperimentParams

RUN_FLAGS = {
    "batch": "llm.batch",
    "dependent": "llm.batch_dependent",
    "batch_poll": "llm.batch_poll_s",
    "processes": "llm.processes",
    "stop_when": "stopping.rule",
    "max_usd": "llm.max_usd",
}
"""The options of ``cocoeval run`` that set one key of the params' ``llm:`` section (a ``--set``)."""

COST_CAP_EXIT = 4
"""``cocoeval run``'s exit status when the cost cap (``--max-usd``, ``llm.max_usd``) stopped it."""


def _cmd_check(a: argparse.Namespace) -> int:
    from cocoeval.analysis.coverage import coverage_summary, coverage_text, paper_coverage
    from cocoeval.core.errors import ConfigError, InputError
    from cocoeval.llm import get_provider
    from cocoeval.run.stages import load_params
    from cocoeval.simulate.plugins import new_plugin
    from cocoeval.simulate.setup import ImportedSetup, PluginSetup

    exp = load_params(a.params, a.sets)
    if a.print_params:
        print(_effective(exp.params), end="")
        return 0
    missing = paper_coverage(exp)  # from the params alone: what of the paper the run will lack
    print(
        coverage_text(missing)
        if a.paper
        else coverage_summary(
            missing,
            more=shlex.join(["cocoeval", "check", str(a.params), *(f"--set={x}" for x in a.sets or ()), "--paper"]),
        )
    )
    models = sorted(
        {m for s in exp.params.setups for m in s.model_specs().values()}
        | {j.model for j in exp.params.llm_judges}
        | exp.build_models()
    )
    problems = [
        f"no data at {path} (source {spec}): fetch it first (cocoeval fetch)" for spec, path in exp.missing_sources()
    ]
    for m in models:
        try:
            get_provider(m).check_ready()
        except ConfigError as e:
            problems.append(str(e))
    prices, cap = exp.llm_config().price_table(), exp.params.llm.max_usd
    for m in models:
        if prices.price_for(m) is not None:
            continue
        if cap is not None:  # cocoeval run would refuse it before sending anything
            problems.append(f"no price for {m}, and a cost cap (llm.max_usd ${cap:g}) is set: add llm.price for it")
        else:
            print(f"note: no price for {m}: its cost will show as unknown (add llm.price for it; docs/cost.md)")
    for s in exp.params.setups:  # an imported setup's file must be there to be hashed and read
        if isinstance(s, PluginSetup):  # a plugin must be made (its __init__ runs) before a run sends anything
            try:
                new_plugin(s, exp.taxonomy)
            except ConfigError as e:
                problems.append(f"setup {s.name}: {e}")
        if isinstance(s, ImportedSetup):
            try:
                s.file_sha256()
            except InputError as e:
                problems.append(f"setup {s.name}: {e}")
    from cocoeval.bench.store import has_benchmark, load_instances, split_file
    from cocoeval.core.errors import CocoevalError

    if exp.params.bench and not has_benchmark(exp.bench_dir()):  # built (JSONL) or exported (parquet)
        f = split_file(exp.bench_dir(), "eval")
        what = (
            f"{f} is a dangling symbolic link" if f.is_symlink() else f"no benchmark at {exp.bench_dir()} (no {f.name})"
        )
        problems.append(f"{what}: build it first (docs/data.md: Building a benchmark from real data)")
    elif exp.params.bench:  # there, but readable? (run would refuse a broken one)
        try:
            load_instances(exp.bench_dir(), exp.params.instances.split)
        except CocoevalError as e:
            problems.append(str(e))
    for p in problems:
        print(f"missing: {p}", file=sys.stderr)
    print(
        f"{a.params}: {len(models)} model(s) checked; " + ("ready" if not problems else f"{len(problems)} problem(s)")
    )
    return 1 if problems else 0


def _cmd_estimate(a: argparse.Namespace) -> int:
    from cocoeval.run.estimate import (
        assumed_counts,
        compare_with_run,
        describe,
        forecast,
        observed_output,
        observed_reasoning,
        plan_totals,
    )
    from cocoeval.run.rundir import Run
    from cocoeval.run.stages import load_params

    exp = load_params(a.params, params_sets(a, {"stop_when": "stopping.rule"}))
    run = Run.open(a.run) if a.run else None
    observed = observed_reasoning(run) if run is not None else None
    observed_out = observed_output(run) if run is not None else None
    insts = exp.prepare_instances(write=False)
    plan = exp.build_plan()  # the build's clean-up, M and S calls (build.context), or None
    rows = forecast(exp, insts, observed=observed, observed_out=observed_out, build=plan)

    def usd(v: float | None) -> str:
        return "unknown" if v is None else f"${v:,.2f}"

    print(
        f"{'stage':<9} {'name':<28} {'model':<30} {'calls':>7} {'input':>12} {'cached':>11} {'output':>10} "
        f"{'reasoning':>10} {'naive':>10} {'cached':>10} {'batch':>10} {'planned':>10}"
    )
    for r in rows:
        print(
            f"{r.stage:<9} {r.name[:28]:<28} {r.model[:30]:<30} {r.calls:>7,} {r.input_tokens:>12,} "
            f"{r.cached_input_tokens:>11,} {r.output_tokens:>10,} {r.reasoning_tokens:>10,} "
            f"{usd(r.cost_naive_usd):>10} {usd(r.cost_cached_usd):>10} {usd(r.cost_batch_usd):>10} "
            f"{usd(r.cost_planned_usd):>10}" + (f"  ({r.note})" if r.note else "")
        )
    tot = plan_totals(rows)  # a sum over no known price is unknown, never $0
    unknown = f" (+{tot.unknown} row(s) at unknown prices)" if tot.unknown else ""
    n_obs = sum(r.output_source == "observed" for r in rows)
    batched = sum(r.calls for r in rows if r.mode == "batch")
    print(
        f"total: {sum(r.calls for r in rows):,} calls, {sum(r.input_tokens for r in rows):,} input "
        f"({sum(r.cached_input_tokens for r in rows):,} cached) and {sum(r.output_tokens for r in rows):,} "
        f"output tokens ({sum(r.reasoning_tokens for r in rows):,} reasoning); naive "
        f"{usd(tot.naive)}, with prompt caching {usd(tot.live)}; planned, as this params file "
        f"sends them ({batched:,} calls through batch APIs, the rest live): {usd(tot.planned)}{unknown}"
        + f"; {describe(rows)}"
        + ("; reasoning tokens: the run's observed means" if observed else "")
        + (f"; output tokens: the run's observed means for {n_obs} of {len(rows)} rows" if n_obs else "")
    )
    if any(r.cost_if_batch_usd != r.cost_cached_usd for r in rows):  # some row can go through a batch API
        print(
            f"choice: every call live (with prompt caching) {usd(tot.live)}; with --batch (what can go "
            f"through a batch API does, at half price with no cache credit, answers within 24 h; dependent steps "
            f"{'in rounds of batches' if exp.llm_config().batch_dependent == 'rounds' else 'live'}, "
            f"llm.batch_dependent) {usd(tot.with_batch)}{unknown}"
        )
    if (cap := exp.params.llm.max_usd) is not None:  # what --max-usd / llm.max_usd would let through
        print(_cap_line(cap, tot.planned, tot.unknown))
    print("instances assumed, per dataset:")
    for line in assumed_counts(insts, plan):
        print(f"  {line}")
    if exp.params.stopping is not None:
        _stopping_forecast(exp, insts, rows, run)
    if run is not None:
        for c in compare_with_run(rows, run):
            print(
                f"actual vs forecast, {c.stage} {c.model}: calls {c.actual_calls}/{c.forecast_calls}, "
                f"input tokens {c.actual_input:,}/{c.forecast_input:,} ({c.input_ratio:.2f}x), "
                f"cached share {c.actual_cached_share:.2f}/{c.forecast_cached_share:.2f}, "
                f"output {c.actual_output:,}/{c.forecast_output:,}"
                + (
                    f" (actual tokens leave out {n} call(s) of unknown usage)"
                    if (n := c.actual_usage_unknown_calls)
                    else ""
                )
            )
    return 0


def _cap_line(cap: float, planned: float | None, unknown: int) -> str:
    """The forecast beside a cost cap (``llm.max_usd``): whether the planned cost fits under it."""
    if unknown or planned is None:
        return (
            f"cost cap (llm.max_usd) ${cap:,.2f}: the price of some model is unknown, so cocoeval run refuses the cap "
            "before sending anything: add llm.price for it (docs/cost.md)"
        )
    if planned <= cap:
        return f"cost cap (llm.max_usd) ${cap:,.2f}: the planned ${planned:,.2f} fits under it"
    return (
        f"cost cap (llm.max_usd) ${cap:,.2f}: below the planned ${planned:,.2f}; the run would stop sending at about "
        f"{cap / planned:.0%} of it (exit 4), to go on with a larger --max-usd"
    )


def _stopping_forecast(exp: Any, insts: list[Any], rows: list[Any], run: Any) -> None:
    """The expected saving of the params' ``stopping:`` section (beyond the paper), by Monte Carlo of
    the rule (``stopping.forecast_saving``), printed with its assumption."""
    from cocoeval.run.stopping import forecast_saving, human_counts_of

    sec = exp.params.stopping
    judge = sec.judge or next(j.name for j in exp.params.llm_judges if "fine_grained" in j.kind)
    counts = human_counts_of(run.judgments.get(judge, []), judge, exp.taxonomy) if run is not None else None
    f = forecast_saving(insts, sec, exp.taxonomy, counts)
    calls = sum(r.calls for r in rows if r.stage in ("simulate", "judge"))
    rule = sec.rule + (f" (eps {sec.eps:g})" if sec.eps is not None else "")
    print(
        f"stopping (beyond the paper): rule {rule}, alpha {sec.alpha:g} over all rounds, rounds of "
        f"{sec.round_conversations} source conversations; forecast by Monte Carlo of the rule on {f.worlds} worlds "
        f"shaped as these instances, with the humans' rates from {f.human_rates}; assumed: {f.assumption}. "
        f"A clearly separated setup uses {f.separated_share:.0%} of the instances (stopped as 'differs' in "
        f"{f.separated_correct:.0%} of the worlds); a setup equal to the humans uses {f.equal_share:.0%} "
        f"(declared different in {f.equal_wrong:.0%}). Simulate and judge calls: {calls:,} without stopping; "
        f"about {round(calls * f.separated_share):,} if every setup is that separated, "
        f"{round(calls * f.equal_share):,} if every setup equals the humans"
    )


def _cmd_run(a: argparse.Namespace) -> int:
    from cocoeval.llm.errors import CostCapReached
    from cocoeval.run.stages import load_params

    exp = load_params(a.params, params_sets(a, RUN_FLAGS))
    stages = tuple(a.stage) if a.stage else ("simulate", "judge")
    _refuse_cap_on_unknown_spend(exp.params.llm.max_usd, exp.run_dir)
    try:
        run_dir = exp.run(stages, progress=False if a.no_progress else None)
    except CostCapReached as e:  # stopped sending; what finished is kept (manifest: status stopped)
        print(f"run directory: {exp.run_dir} (stopped: {e.reason})")
        if (exp.run_dir / "usage.json").exists():
            print(usage_summary(json.loads((exp.run_dir / "usage.json").read_text())))
        print(
            f"stopped: {e.reason}; {e.not_sent} call(s) not sent, the calls in flight finished and are kept. "
            f"Run the same command with a larger --max-usd to go on (no completed call is sent again); "
            f"exit status {COST_CAP_EXIT}",
            file=sys.stderr,
        )
        return COST_CAP_EXIT
    manifest = json.loads((run_dir / "manifest.json").read_text())
    usage = json.loads((run_dir / "usage.json").read_text())
    from cocoeval.run.outcome import RunSummary

    summary = RunSummary.model_validate(manifest.get("summary", {}))  # written by this run just now
    print(f"run directory: {run_dir}")
    for name, s in summary.simulate.items():
        print(f"  setup {name:<28} {s.ok:>4} ok  {s.invalid:>4} invalid  {s.failed:>4} failed  of {s.total}")
    for name, s in summary.judge.items():
        print(
            f"  judge {name:<28} {s.ok:>4} ok  {s.repaired:>4} repaired  {s.invalid:>4} invalid  "
            f"{s.failed:>4} failed  of {s.total}"
        )
    if stop := manifest.get("stopping"):  # beyond the paper: where each setup stopped (the report says why)
        for name, st in stop["setups"].items():
            print(
                f"  stop  {name:<28} {st['status']} at round {st['round']} of {stop['rounds_planned']}: "
                f"{st['instances']} of {stop['instances_planned']} instances"
            )
    print(usage_summary(usage))
    _keep_frames(run_dir)
    return _run_outcome(summary, a.allow_invalid)


def _refuse_cap_on_unknown_spend(cap: float | None, run_dir: Path) -> None:
    """A cost cap on a run directory whose usage journal counts calls of unknown cost is refused
    before the manifest says "running" (the runner refuses it too): they cannot count against it."""
    if cap is None:
        return
    from cocoeval.llm.runner import unknown_spend_refusal
    from cocoeval.llm.usage import journal_totals
    from cocoeval.run.rundir import USAGE_JOURNAL, spent_outside_journal

    journal = run_dir / USAGE_JOURNAL
    unknown = spent_outside_journal(run_dir)[1]
    unknown += sum(int(v.get("cost_unknown_calls") or 0) for v in journal_totals(journal).values())
    if unknown:
        raise unknown_spend_refusal(cap, journal, unknown)


def _effective(params: ExperimentParams) -> str:
    """The params as read (``ExperimentParams``: the files merged, the overrides applied, the
    defaults filled in) as YAML, in the schema's key order."""
    import yaml

    return str(yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100))


def _keep_frames(run_dir: Path) -> None:
    """The run's analysis frames kept in its ``cache/`` (``frames.keep_frames``): the first report
    or notebook then reads them, not every record. A run whose files cannot be read says so here
    (the report would refuse it with the same message); the run's exit status is its own."""
    import time

    from cocoeval.analysis.frames import keep_frames
    from cocoeval.core.errors import CocoevalError

    t = time.perf_counter()
    try:
        folder = keep_frames(run_dir)
    except CocoevalError as e:
        print(f"the run's analysis frames are not kept: {e}", file=sys.stderr)
        return
    if folder is not None:
        print(
            f"analysis frames kept in {folder.relative_to(run_dir)} ({time.perf_counter() - t:.1f} s): "
            "the report and the notebooks start from them"
        )


def _money(usd: float | None, unknown: int) -> str:
    """A cost with the calls whose price is unknown; "unknown" when nothing of it is known, never $0."""
    if usd is None:
        return f"unknown ({unknown} calls at unknown prices)" if unknown else "unknown"
    if unknown and not usd:
        return f"unknown ({unknown} calls at unknown prices)"
    return f"${usd:.4f}" + (f" (+{unknown} calls at unknown prices)" if unknown else "")


def _plus(a: float | None, b: float | None) -> float | None:
    """Two costs of usage.json summed; unknown (None) when neither is known."""
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


def usage_summary(usage: dict[str, Any]) -> str:
    """What ``usage.json`` says a run paid: this invocation (cache hits cost nothing), the cached
    answers it re-used at what they cost when first paid, and every invocation together."""
    t = usage["totals"]
    batched = f", {usage['requests_batched']} through batches" if usage.get("requests_batched") else ""
    out = (
        f"calls: {t['calls']} ({t['cache_hits']} from cache, {usage['requests_sent']} sent live{batched}, "
        f"{t['failed']} failed); tokens paid in/out: {t['input_tokens']}/{t['output_tokens']}; "
        f"paid by this run: {_money(t['cost_usd'], t['cost_unknown_calls'])}"
        + (
            f"; paid, answer lost or unreadable: {t['lost_attempts']} attempt(s), {t['lost_input_tokens']} input "
            f"tokens, {_money(t['lost_cost_usd'], t.get('lost_cost_unknown_calls', 0))} (in the cost)"
            if t.get("lost_attempts")
            else ""
        )
    )
    if t.get("reused_calls"):
        r_unknown = t.get("reused_cost_unknown_calls", 0)
        out += (
            f"\nre-used from the call cache, not paid again: {t['reused_calls']} answer(s), "
            f"{t['reused_input_tokens']}/{t['reused_output_tokens']} tokens in/out, "
            f"{_money(t['reused_cost_usd'], r_unknown)} when first paid; the answers this run used cost "
            f"{_money(_plus(t['cost_usd'], t['reused_cost_usd']), t['cost_unknown_calls'] + r_unknown)}"
        )
    every = usage.get("all_invocations") or {}
    if every.get("invocations", 1) > 1:
        out += (
            f"\nthis run directory, all {every['invocations']} invocations of cocoeval run: paid "
            f"{_money(every['cost_usd'], every.get('cost_unknown_calls', 0))}"
        )
    return out


def _run_outcome(summary: RunSummary, allow_invalid: bool) -> int:
    """The end summary on stderr when something ended invalid or failed; the exit status."""
    from cocoeval.run.outcome import INVALID_EXIT, bad_count, describe

    if summary.warnings:
        print(f"{len(summary.warnings)} warning(s), printed above (manifest.json: summary.warnings)", file=sys.stderr)
    bad = bad_count(summary)
    if not bad:
        return 0
    print(
        f"summary: {bad} continuation(s) or judgment(s) ended invalid or failed (they count as invalid in "
        "the report, never as zeros):",
        file=sys.stderr,
    )
    for line in describe(summary):
        print(f"  {line}", file=sys.stderr)
    print(
        "  'failed': a call failed; failed calls are not cached, a re-run sends them again. 'invalid': the "
        "answer could not be used; it is cached, a re-run with the same params gives the same result.",
        file=sys.stderr,
    )
    if allow_invalid:
        print("exit status 0: --allow-invalid", file=sys.stderr)
        return 0
    print(f"exit status {INVALID_EXIT} (pass --allow-invalid to exit 0 when this is expected)", file=sys.stderr)
    return INVALID_EXIT


def _cmd_batches(a: argparse.Namespace) -> int:
    from cocoeval.core.errors import CocoevalError
    from cocoeval.llm import CallCache, CallError, get_provider
    from cocoeval.llm.batch import BatchStore, cancel_batch

    if not Path(a.cache).exists():
        print(f"no call cache at {a.cache}: no batch was submitted from it")
        return 0
    store = BatchStore(CallCache(a.cache))
    rows = store.all()
    known = {r["ref"]: r for r in rows}
    for ids in (a.cancel, a.forget):
        for ref in ids or []:
            if ref != "open" and ref not in known:
                print(f"error: no batch {ref} in {a.cache}", file=sys.stderr)
                return 2

    def chosen(ids: list[str]) -> list[str]:
        return sorted({r["ref"] for r in rows if r["state"] == "submitted"} if ids == ["open"] else set(ids))

    if a.forget:
        for ref in chosen(a.forget):
            store.mark(ref, "collected", "forgotten")
            print(f"forgot {ref}: no run will poll it or collect its answers")
        return 0
    if a.cancel:
        failed = 0
        for ref in chosen(a.cancel):
            try:
                prov = get_provider(known[ref]["model"])
                prov.check_ready()
                status = cancel_batch(prov, ref)
            except (CocoevalError, CallError) as e:
                failed += 1
                print(f"cancel {ref}: not cancelled: {e}", file=sys.stderr)
                continue
            print(
                f"cancel {ref}: {status} (a later run collects what it finished; the rest fail and are "
                "sent again by the next run)"
            )
        return 1 if failed else 0
    print(f"{'batch':<40} {'model':<44} {'state':<10} {'status':<12} {'requests':>8}  submitted")
    for r in rows:
        when = _dt.datetime.fromtimestamp(r["created"], _dt.UTC).strftime("%Y-%m-%d %H:%M")
        print(
            f"{r['ref'][:40]:<40} {r['model'][:44]:<44} {r['state']:<10} {r['status'] or '-'!s:<12} "
            f"{r['requests']:>8}  {when}"
        )
    print(
        f"{len(rows)} batch(es); {sum(r['state'] != 'collected' for r in rows)} not yet collected "
        "(a run with the same calls resumes polling them)"
    )
    return 0


def add_commands(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="run the stages a params file asks for",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "Run a params file (see params/demo.yaml): build or load the benchmark, simulate "
            "every setup, judge references and continuations, write a run directory. Every LLM "
            "call is cached: a re-run sends no request and a killed run resumes. Last, the run's "
            "analysis frames are kept in its cache/ folder, for the report and the notebooks.",
            79,
        ),
        epilog="exit status:\n"
        "  0  everything ended valid (or --allow-invalid)\n"
        "  2  bad input, usage or set-up (params file, names, options, API key): the\n"
        "     message says what to fix\n"
        "  3  the run completed, but some continuations or judgments ended invalid or\n"
        "     failed; a summary on stderr gives the counts per setup and judge and the top\n"
        "     reasons (a re-run sends the failed calls again)\n"
        "  4  the cost cap (--max-usd, llm.max_usd) was reached: no further request was\n"
        "     sent, the calls in flight finished and are kept, the manifest says\n"
        "     'stopped' and why; the same command with a larger --max-usd goes on\n"
        "  1  an unexpected error (a bug: please report it with the traceback)",
    )
    r.add_argument("params", type=Path, help="params YAML file")
    r.add_argument(
        "--stage",
        action="append",
        choices=["simulate", "judge"],
        help="stage to run, repeatable (default: simulate and judge)",
    )
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument(
        "--allow-invalid",
        action="store_true",
        help="exit 0 even when continuations or judgments ended invalid or failed (the summary "
        "is printed all the same; e.g. the demo's tiny local model)",
    )
    r.add_argument(
        "--batch",
        action="store_true",
        help="send every request that does not depend on an earlier answer (judging, "
        "whole-continuation simulation) through the OpenAI Batch or Anthropic Message Batches "
        "API: half price, answers within 24 h; a killed run resumes polling its batches "
        "(same as llm.batch: true)",
    )
    r.add_argument(
        "--dependent",
        choices=["live", "rounds"],
        help="with --batch, the 1- and k-turn-per-call simulation steps and judge re-asks: "
        "live, or rounds of batches, one per step (default: llm.batch_dependent, live)",
    )
    r.add_argument(
        "--batch-poll",
        type=seconds,
        metavar="SECONDS",
        help="seconds between polls of a running batch (default: llm.batch_poll_s, 30)",
    )
    r.add_argument(
        "--processes",
        type=int_range(1, 64),
        metavar="N",
        help="worker processes sending live calls, for a fast self-hosted server at high "
        "concurrency (default: llm.processes, 1: all from this process)",
    )
    r.add_argument(
        "--stop-when",
        choices=["differs", "precise", "differs_or_precise"],
        help="stop each setup once its comparison with the humans is settled (beyond the paper): "
        "same as --set stopping.rule=RULE (precise needs --set stopping.eps=EPS); the other "
        "settings of the stopping: section keep their defaults (docs/experiments.md)",
    )
    r.add_argument(
        "--max-usd",
        type=float_range(0.0, 1e9),
        metavar="USD",
        help="stop sending once what this run directory's invocations paid together reaches USD (same as "
        "--set llm.max_usd=USD): the calls in flight finish and are kept, exit status 4; the same command with "
        "a larger cap resumes. Every model needs a known price (llm.price for one the table lacks); "
        "not with --batch",
    )
    add_set_option(r)
    r.set_defaults(func=_cmd_run)

    es = sub.add_parser(
        "estimate",
        help="forecast calls, tokens and cost of a params file",
        description="Forecast, before anything is sent, the calls, input/cached/output/"
        "reasoning tokens and the cost (naive, with prompt caching by each provider's "
        "rules, batch, and as the params file would send them) per setup and stage, from "
        "the actual instances and prompts. With --run (e.g. a pilot on a few instances), "
        "output and reasoning tokens per call are the run's observed means, and the "
        "forecast is compared with what the run's calls used.",
    )
    es.add_argument("params", type=Path, help="params YAML file")
    es.add_argument(
        "--run",
        type=Path,
        help="a run directory to compare with (and to take the mean output and reasoning tokens per call from)",
    )
    es.add_argument(
        "--stop-when",
        choices=["differs", "precise", "differs_or_precise"],
        help="forecast with this stopping rule (same as --set stopping.rule=RULE; beyond the paper)",
    )
    add_set_option(es)
    es.set_defaults(func=_cmd_estimate)

    ck = sub.add_parser("check", help="check a params file: API keys, model files, benchmark")
    ck.add_argument("params", type=Path, help="params YAML file")
    add_set_option(ck)
    ck.add_argument(
        "--print-params",
        action="store_true",
        help="print the params as read (the files it extends merged, --set applied, defaults "
        "filled in) as YAML, and check nothing else",
    )
    ck.add_argument(
        "--paper",
        action="store_true",
        help="list every element of the paper the run will lack (the simulators, judges, human annotations and "
        "data), each with the step that adds it (by default: one line counting them)",
    )
    ck.set_defaults(func=_cmd_check)

    bt = sub.add_parser(
        "batches",
        help="list (or cancel) the batches submitted from a call cache",
        description="List the provider batches that batch mode submitted from a call "
        "cache (id, model, state, provider status, requests), or cancel them.",
    )
    bt.add_argument(
        "--cache",
        type=out_file,
        default=Path(".cocoeval/cache.sqlite"),
        help="the call cache (llm.cache of the params file; default .cocoeval/cache.sqlite)",
    )
    bt.add_argument(
        "--cancel", nargs="+", metavar="BATCH_ID", help="cancel these batches ('open': every batch not yet collected)"
    )
    bt.add_argument(
        "--forget",
        nargs="+",
        metavar="BATCH_ID",
        help="stop tracking these batches without asking the provider (e.g. one it no longer "
        "knows); their requests are sent again by the next run ('open': all not collected)",
    )
    bt.set_defaults(func=_cmd_batches)
