"""The ``cocoeval compare`` command: the setups of several runs compared pair by pair on their shared
instances under one judge id (``cocoeval.analysis.runcompare``; docs/analysis.md, Comparing runs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._args import int_range, out_dir


def _inside(p: Path, d: Path) -> bool:
    try:
        p.resolve().relative_to(d.resolve())
    except ValueError:
        return False
    return True


def _cmd_compare(a: argparse.Namespace) -> int:
    from cocoeval.analysis.frames import open_run_dir
    from cocoeval.analysis.runcompare import compare_runs, run_labels
    from cocoeval.analysis.runcompare_report import default_out, write_comparison
    from cocoeval.core.errors import ConfigError, InputError
    from cocoeval.core.text import visible

    if len(a.runs) < 2:
        raise ConfigError(
            f"compare needs two run directories or more, not only {visible(str(a.runs[0]))}",
            hint="cocoeval compare RUN_A RUN_B (the same run twice compares it with itself)",
        )
    for p in a.runs:
        if not p.is_dir():
            raise InputError(
                "no run directory here" + (" (it is a file)" if p.exists() else ""),
                file=visible(str(p)),
                hint="give folders written by cocoeval run (each holds manifest.json and instances.jsonl)",
            )
        if not (p / "manifest.json").is_file():
            raise InputError(
                "not a run directory: it has no manifest.json",
                file=visible(str(p)),
                hint="give folders written by cocoeval run",
            )
    labels = run_labels(a.runs)
    out = a.out if a.out is not None else default_out(labels)
    for p in a.runs:  # the report never goes into a run's own files (it would be read as part of the run)
        if _inside(out, p):
            raise InputError(
                "the report folder would be inside a run directory compared (writing there changes the run's files)",
                file=visible(str(out)),
                hint=f"choose a folder outside {visible(str(p))}, e.g. --out {default_out(labels)}",
            )
    runs = [open_run_dir(p) for p in a.runs]
    setups = [s.strip() for s in a.setups.split(",") if s.strip()] if a.setups else None
    ans = compare_runs(
        runs,
        labels,
        judge=a.judge,
        setups=setups,
        resamples=a.resamples,
        seed=a.seed,
        correction=a.correction,
        min_n=a.min_n,
    )
    rep = write_comparison(ans, runs, out)
    inter = ans.intersection
    left = inter.left_out_counts()
    print(
        f"compared {len(ans.setups)} setups of {len(runs)} runs ({', '.join(labels)}) under judge {ans.judge.judge} "
        f"(judge id {ans.judge.judge_id}, the same in every run) on {len(inter.instance_ids)} shared instances from "
        f"{inter.conversations} source conversations ({', '.join(f'{d} {n}' for d, n in inter.datasets)})"
    )
    for r in ans.runs:
        c = left.get(r.label)
        if c:
            print(
                f"  {r.label}: {sum(c.values())} of its {r.instances} instances left out ("
                + ", ".join(
                    f"{n} {k} another run" if k == "not in" else f"{n} with {k} elsewhere" for k, n in c.items()
                )
                + ")"
            )
    held = ans.held()
    print(
        f"{len(held)} difference{'s hold' if len(held) != 1 else ' holds'} ({ans.comparison.correction} over the "
        "behaviours "
        f"of each pair, α = 0.05; {sum(ans.cross_run(r) for r in held)} across runs)"
    )
    for row in held[:8]:
        diff = "–" if row.diff is None else f"{row.diff:.3f}"
        p_adj = "–" if row.p_adj is None else f"{row.p_adj:.4f}"
        print(f"  {row.a} vs {row.b}, {row.behaviour}: {row.verdict} (difference {diff}, p_adj {p_adj})")
    if len(held) > 8:
        print(f"  ... and {len(held) - 8} more in {rep.markdown}")
    print(
        f"wrote {rep.markdown}, {len(rep.tables)} tables (CSV and Markdown), {len(rep.figures)} "
        f"figure{'s' if len(rep.figures) != 1 else ''} (PNG, SVG) "
        f"and {rep.html} in {rep.out}: open it in a browser, no server needed"
    )
    if ans.pipeline_check:
        print("note: a run compared is a pipeline check (a tiny model): not results")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="compare the setups of several runs on their shared instances (beyond the paper)",
        description="Compare every setup of two or more run directories (a simulator last month and today, two "
        "labs' runs), each labelled RUNLABEL/setup (RUNLABEL: the run folder's name, numbered when two are the "
        "same), pair by pair: per behaviour and in the distance to the humans, with 95% intervals clustered by "
        "source conversation, sign-flip tests corrected over the behaviours of each pair, and rank intervals. "
        "Only the instances every run has with the same content (id and instance hash) are compared; what each "
        "run leaves out, and why, is named. A judge is compared only under the same judge id in every run (its "
        "model, prompt and taxonomy): a judge name whose id differs is refused. Writes compare.md (the answer "
        "first), the tables (CSV and Markdown), the setup x setup figure (PNG, SVG) and a self-contained index.html "
        "into --out. Beyond the paper.",
    )
    p.add_argument("runs", nargs="+", type=Path, help="two or more run directories (RUN_A RUN_B ...)")
    p.add_argument(
        "--judge",
        help="the judge compared (its id must be the same in every run); default: the first LLM judge every run "
        "has under the same id",
    )
    p.add_argument(
        "--setups",
        metavar="A,B",
        help="only these setups, comma-separated: a setup name (that setup of every run that has it) or "
        "RUNLABEL/setup (default: every setup with valid judgments on the shared instances)",
    )
    p.add_argument(
        "--out",
        type=out_dir,
        default=None,
        help="output folder, outside the runs compared (default: compare-RUNA-vs-RUNB in the current folder)",
    )
    p.add_argument("--resamples", type=int_range(1, 100_000), default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap and sign-flip seed (default 0)")
    p.add_argument(
        "--correction",
        choices=("holm", "bh"),
        default="holm",
        help="correction over the behaviours of each pair: holm (Holm, default) or bh (Benjamini-Hochberg); the "
        "distance rows are Holm-corrected over the pairs",
    )
    p.add_argument(
        "--min-n",
        type=int_range(2),
        default=10,
        help="intervals and tests need at least this many shared instances; fewer: shown as 'n too small' (default 10)",
    )
    p.set_defaults(func=_cmd_compare)
