"""The ``cocoeval export`` command: a run in a format other tools read (Inspect AI eval logs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._args import out_dir

EEE_NOTE = (
    "Every Eval Ever records are not written by cocoeval: their schema is published as the "
    "every-eval-ever package, which needs Python >= 3.12 (cocoeval runs on 3.11)"
)
EEE_HINT = (
    "write Inspect logs (--format inspect), then convert each with Every Eval Ever's own converter under "
    "Python >= 3.12: pip install 'every-eval-ever[inspect]'; "
    "every_eval_ever convert inspect --log_path LOG.eval --output_dir DIR"
)


def _cmd_export(a: argparse.Namespace) -> int:
    from cocoeval.core.errors import ConfigError

    if a.format == "eee":
        raise ConfigError(EEE_NOTE, hint=EEE_HINT)
    from cocoeval.analysis.inspect_log import export_inspect

    rep = export_inspect(a.run_dir, a.out)
    print(f"wrote {len(rep.logs)} Inspect eval log(s) to {a.out} (beyond the paper):")
    for lg in rep.logs:
        judge = f"judged by {lg.judge}" if lg.judge else "no LLM judgment"
        print(f"  {lg.file}: {lg.target}, {judge}: {lg.samples} samples, {lg.scored} scored")
    print(f"open them with: inspect view --log-dir {a.out}")
    return 0


def add_commands(sub: Any) -> None:
    x = sub.add_parser(
        "export",
        help="write a run as Inspect AI eval logs (beyond the paper)",
        description="Write a run directory in a format other tools read. --format inspect: one Inspect AI "
        "eval log (OUT/<target>__<judge>.eval) per setup, and the human reference, and LLM judge; each "
        "instance a sample (input: the instance's context; target: the human continuation; output: the "
        "setup's turns) with the judge's scores per behaviour and its Likert scores (an invalid judgment "
        "gives no score, its reason in the sample's metadata). inspect_ai reads them back; inspect view "
        "shows them. --format eee explains how to get Every Eval Ever records (its schema package needs "
        "Python >= 3.12).",
    )
    x.add_argument("run_dir", type=Path, help="a run directory")
    x.add_argument(
        "--format",
        choices=["inspect", "eee"],
        default="inspect",
        help="inspect (Inspect AI eval logs; the default) or eee",
    )
    x.add_argument("--out", type=out_dir, required=True, help="output folder")
    x.set_defaults(func=_cmd_export)
