"""The ``cocoeval`` analysis commands: report, notebooks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._args import int_range, out_dir


def add_analysis_args(p: argparse.ArgumentParser) -> None:
    from cocoeval.analysis.inference import CORRECTIONS, MIN_N

    p.add_argument("--resamples", type=int_range(1, 100_000), default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument(
        "--min-n",
        type=int_range(2),
        default=MIN_N,
        help=f"intervals and tests need at least this many instances; fewer: shown as 'n too small' (default {MIN_N})",
    )
    p.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="bh",
        help="multiple-comparison correction of the over/under-production verdicts over behaviours x "
        "setups: bh (Benjamini-Hochberg, default), holm or none (the setup-against-setup comparisons keep "
        "Holm over each pair's behaviours: a familywise error rate)",
    )


def _cmd_report(a: argparse.Namespace) -> int:
    from cocoeval.analysis.report import write_report

    rep = write_report(
        a.run_dir,
        a.out,
        judge=a.judge,
        resamples=a.resamples,
        seed=a.seed,
        min_n=a.min_n,
        correction=a.correction,
        html=a.html,
        history=not a.no_history,
    )
    print(
        f"judge: {rep.judge}; {len(rep.figures)} figures, {len(rep.tables)} tables in {rep.out} "
        f"(see {rep.out}/index.md)"
    )
    if rep.html is not None:
        print(f"wrote {rep.html} ({Path(rep.html).stat().st_size:,} bytes): open it in a browser, no server needed")
    for w in rep.warnings:  # also at the top of index.md
        print(f"warning: {w}", file=sys.stderr)
    return 0


def _cmd_notebooks(a: argparse.Namespace) -> int:
    from cocoeval.notebooks.execute import copy_notebooks, execute_notebooks
    from cocoeval.run.stages import load_params

    exp = load_params(a.params)  # a malformed params file is reported here, not from inside a notebook
    if a.copy and a.only:
        from cocoeval.core.errors import ConfigError

        raise ConfigError(
            "--only selects notebooks to execute (--out); --copy copies every notebook",
            hint="drop --only, or execute them with --out",
        )
    if a.copy:
        for p in copy_notebooks(a.params, a.copy, figures_dir=a.figures):
            print(f"copied {p}")
        print(f"open them with: jupyter lab {a.copy}  (params_file is set to {a.params} in each)")
        return 0
    for p in execute_notebooks(
        a.params,
        a.out,
        figures_dir=a.figures,
        resamples=a.resamples,
        min_n=a.min_n,
        correction=a.correction,
        jobs=a.jobs,
        only=a.only,
    ):
        print(f"executed {p}")
    print(f"figures in {a.figures or exp.run_dir / 'figures'}/<notebook>/")
    return 0


def add_commands(sub: Any) -> None:
    rp = sub.add_parser(
        "report",
        help="figures and tables of a run",
        description="Write every figure (PNG and SVG) and table (CSV and Markdown) of a "
        "run directory, with an index.md listing them.",
    )
    rp.add_argument("run_dir", type=Path, help="a run directory")
    rp.add_argument("--out", type=out_dir, required=True, help="output folder")
    rp.add_argument("--judge", help="judge shown in the figures (default: the first LLM judge)")
    add_analysis_args(rp)
    rp.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    rp.add_argument(
        "--html",
        action="store_true",
        help="also write OUT/index.html: one self-contained file (no network, no server; opens from "
        "file://) with every figure (interactive), every table, the provenance and the conversation viewer",
    )
    rp.add_argument(
        "--no-history",
        action="store_true",
        help="do not append the judges' agreement to judge_history.jsonl beside the run (beyond the paper; "
        "the report still compares with the entries already there)",
    )
    rp.set_defaults(func=_cmd_report)

    nbp = sub.add_parser(
        "notebooks",
        help="execute every notebook headlessly (papermill) on a run, or copy them",
        description="Execute every notebook shipped with cocoeval headlessly (papermill) on a "
        "params file's run (--out), or copy them into a folder for interactive use, with the "
        "params file (and --figures) set in their parameters cell (--copy).",
    )
    nbp.add_argument("params", type=Path, help="params file of the run")
    mode = nbp.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=out_dir, help="folder for the executed notebooks")
    mode.add_argument(
        "--copy",
        type=out_dir,
        metavar="DIR",
        help="copy the notebooks (without outputs) into DIR instead, e.g. for jupyter lab DIR",
    )
    nbp.add_argument(
        "--figures",
        type=out_dir,
        default=None,
        help="figures folder (default: the run's figures/; `make figures` writes the committed figures/)",
    )
    nbp.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="notebooks executed at once, each in a process of its own (default: 2 on two cores or "
        "more, else 1; 1: one after the other)",
    )
    nbp.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="execute only this notebook, named whole (05_rq5_turns_per_call) or by its number (05); "
        "repeat for several (default: every notebook)",
    )
    add_analysis_args(nbp)
    nbp.set_defaults(func=_cmd_notebooks)
