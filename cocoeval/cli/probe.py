"""The ``cocoeval probe`` command: the judge probes of a params file (beyond the paper)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from ._args import add_set_option, int_range, params_sets


def _cmd_probe(a: argparse.Namespace) -> int:
    from cocoeval.analysis.probes import probe_tables, probe_text
    from cocoeval.llm.errors import CostCapReached
    from cocoeval.run.probes import run_probes
    from cocoeval.run.rundir import Run
    from cocoeval.run.stages import load_params

    from .run import COST_CAP_EXIT

    exp = load_params(a.params, params_sets(a, {"processes": "llm.processes"}))
    try:
        done = run_probes(exp, progress=False if a.no_progress else None)
    except CostCapReached as e:  # stopped sending; the probe items judged and every answer are kept
        print(
            f"stopped: {e.reason}; {e.not_sent} call(s) not sent, the calls in flight finished and are kept in the "
            f"call cache (usage: {exp.run_dir / 'usage.json'}). Run the same command with a larger cap, "
            f"--set llm.max_usd=USD, to go on (no completed call is sent again); exit status {COST_CAP_EXIT}",
            file=sys.stderr,
        )
        return COST_CAP_EXIT
    print(f"run directory: {exp.run_dir}")
    run = Run.open(exp.run_dir)
    for judge, counts in done.items():
        items = ", ".join(f"{n} {p}" for p, n in sorted(counts.items())) or "nothing"
        print(f"judge {judge}: {items} probe item(s) in probes/{judge}.jsonl")
        for line in probe_text(probe_tables(run, judge, resamples=a.resamples, seed=a.seed, taxonomy=exp.taxonomy)):
            print(f"  {line}")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "probe",
        help="probe the judges of a run: names, planted behaviours, stability",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "Beyond the paper: send the judge probes of the params file's probes: section "
            "against its run directory (run the judge stage first): the same targets with "
            "the participants' names replaced by letters, human references with one planted "
            "behaviour each, and the same targets judged again as a new sample. Calls go "
            "through the run's call cache (a killed probe run resumes; cocoeval estimate "
            "forecasts them); records go to <run>/probes/<judge>.jsonl; the tables are "
            "printed (and are in the report's judge check). Under a cost cap (--set "
            "llm.max_usd=USD, counted with the run's invocations) it stops sending at the "
            "cap and exits 4; the same command with a larger cap goes on.",
            79,
        ),
    )
    p.add_argument("params", type=Path, help="params YAML file with a probes: section")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--processes",
        type=int_range(1, 64),
        metavar="N",
        help="worker processes sending live calls (default: llm.processes)",
    )
    p.add_argument(
        "--resamples",
        type=int_range(1, 100_000),
        default=1000,
        help="bootstrap resamples of the printed intervals (default 1000)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    add_set_option(p)
    p.set_defaults(func=_cmd_probe)
