"""The ``cocoeval annotate-next`` command (beyond the paper): which conversations to label next so
the corrected intervals shrink most (``analysis.active``), exported as ``annotate-export
--random`` exports its draw and recorded in the run with each conversation's inclusion probability."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._args import out_dir, positive_int


def _cmd_annotate_next(a: argparse.Namespace) -> int:
    from cocoeval.analysis.active import FLOOR, format_plan, plan_next
    from cocoeval.analysis.frames import run_frames
    from cocoeval.analysis.judge_check import corrected_rates, llm_judges
    from cocoeval.annotate.exchange import export_items, format_export
    from cocoeval.annotate.sample import check_setups
    from cocoeval.core.errors import ConfigError
    from cocoeval.core.targets import REFERENCE, targets_for
    from cocoeval.core.taxonomy import load_taxonomy
    from cocoeval.run.humans import recorded_draws
    from cocoeval.run.rundir import Run

    tax = load_taxonomy(a.taxonomy) if a.taxonomy else None
    run = Run.open(a.run_dir)
    f = run_frames(run, tax)
    judges = llm_judges(f)
    if a.judge is not None and a.judge not in judges:
        raise ConfigError(
            f"no valid judgments of the judge {a.judge!r} in this run",
            hint="judges with valid judgments: " + (", ".join(judges) or "(none)"),
        )
    if not judges:
        raise ConfigError(
            "no LLM judge has judged this run: nothing tells which conversations the judge is unsure of",
            hint="run the judges first (cocoeval run PARAMS), or draw at random: cocoeval annotate-export RUN "
            "--out DIR --random N",
        )
    judge = a.judge or judges[0]
    names = [REFERENCE, *check_setups(a.setup, sorted(run.continuations), "annotate-next")]
    pairs = [(t.instance.id, t.name) for t in targets_for(run.instances, run.continuations) if t.name in names]
    from cocoeval.analysis.calibration import judge_votes

    votes = judge_votes(run, judge)
    number = len(recorded_draws(run.path) or []) + 1
    plan = plan_next(
        f, judge, a.budget, a.seed, names, FLOOR, pairs, corrected_rates(f, judge, run), votes, draw_number=number
    )
    if not plan.record.targets:
        raise ConfigError(
            "nothing left to draw: every judged conversation of these targets is labelled already",
            hint="the corrected rates are the humans' own means now (cocoeval report)",
        )
    out = a.out or Path(a.run_dir) / "annotation" / f"next-{number}"
    rep = export_items(run, out, seed=a.seed, taxonomy=tax, active=plan.record)
    print(format_plan(plan))
    print(format_export(rep))
    if a.html:  # the annotation page of annotate-export --html, for the same items
        from cocoeval.annotate.page import write_page

        page = write_page(out, tax or load_taxonomy())
        print(
            f"{page}: the annotation page (open it in a browser from the folder; its Export button downloads a "
            f"sheet for annotate-import --key {Path(out) / 'key.json'})"
        )
    return 0


def add_commands(sub: Any) -> None:
    an = sub.add_parser(
        "annotate-next",
        help="beyond the paper: choose the conversations to label next so the corrected intervals shrink most",
        description="Per target (the reference and each --setup), draw --budget conversations that no human "
        "has labelled yet, with probabilities that follow how far the judge is expected to be from the "
        "humans on each (the square root of its squared error, predicted from its count on the conversations "
        "already labelled; uniform before any), mixed with a uniform share so none is near 0 (active "
        "statistical inference, Zrnic and Candès 2024; a judge with samples: k uses its vote fractions instead: "
        "√Σ p(1 − p) per conversation). The draw and every conversation's inclusion "
        "probability are recorded in the run (annotation/random_draws.json), so the corrected rates weight "
        "each label by 1/π and stay unbiased; the chosen conversations are exported as annotate-export "
        "--random exports them. The error model follows the judge's total count over behaviours, so the "
        "intervals shrink most for the behaviours that drive its errors; a behaviour whose errors are spread "
        "evenly gains nothing and can come out slightly wider than after a random draw. Prints per target the "
        "widest corrected interval now (±x), about how wide after this draw (approximate: Kish's effective n of "
        "the draw's weights 1/π) and about how many more labels would halve it. The draw's number in the record "
        "joins --seed, so each round draws afresh.",
    )
    an.add_argument("run_dir", type=Path, help="the run directory")
    an.add_argument("--budget", type=positive_int, required=True, help="conversations of each target to draw")
    an.add_argument("--seed", type=int, default=0, help="seed of the draw and of the item order (default 0)")
    an.add_argument(
        "--out",
        type=out_dir,
        help="output folder (default RUN/annotation/next-K, K the draw's number in the record; give each "
        "round its own folder: key.json is written there)",
    )
    an.add_argument("--judge", help="the LLM judge whose errors guide the draw (default the first by name)")
    an.add_argument(
        "--setup", action="append", help="setups drawn beside the reference (repeatable; default every setup)"
    )
    an.add_argument(
        "--html",
        action="store_true",
        help="also write OUT/annotate.html, the annotation page of annotate-export --html for these items",
    )
    an.add_argument("--taxonomy", type=Path, help="taxonomy YAML of the run (default: the default taxonomy)")
    an.set_defaults(func=_cmd_annotate_next)
