"""The ``cocoeval`` human-annotation commands: annotate-export, annotate-import."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._args import count, out_dir, positive_int


def _plan(plan: Any, a: argparse.Namespace, available: list[str]) -> Any:
    """The params' annotation: section with the options given on the command line put over it."""
    from cocoeval.core.errors import ConfigError
    from cocoeval.run.params import AnnotationDraw

    upd: dict[str, Any] = {} if a.seed is None else {"seed": a.seed}
    for task, n, own in (
        ("overall", a.overall_conversations, a.overall_setup),
        ("fine_grained", a.fine_conversations, a.fine_setup),
    ):
        d, setups = getattr(plan, task), own if own is not None else a.setup
        if n == 0:
            upd[task] = None
        elif d is not None and (n is not None or setups is not None):
            upd[task] = d.model_copy(
                update={k: v for k, v in (("conversations", n), ("setups", setups)) if v is not None}
            )
        elif d is None and n is not None:
            if not (setups or available):
                raise ConfigError(f"{task} task: the run has no setups to annotate beside the reference")
            upd[task] = AnnotationDraw(setups=setups or available, conversations=n)
    plan = plan.model_copy(update=upd)
    if plan.overall is None and plan.fine_grained is None:
        raise ConfigError(
            "nothing to export: the options leave no task of the params' annotation: section",
            hint="the paper's numbers are 54 overall and 36 fine-grained conversations",
        )
    for task, flag in (("overall", "--overall-setup"), ("fine_grained", "--fine-setup")):
        d = getattr(plan, task)
        unknown = [s for s in d.setups if s not in available] if d is not None else []
        if unknown:
            raise ConfigError(
                f"annotation.{task}.setups: the run has no continuations of {', '.join(unknown)}",
                hint="run those setups first (params/paper.yaml: uncomment the SFT setups), or "
                f"change annotation: or pass {flag}; the run's setups: " + (", ".join(available) or "(none)"),
            )
    return plan


def _cmd_annotate_export(a: argparse.Namespace) -> int:
    from cocoeval.annotate.exchange import export_items, format_export
    from cocoeval.annotate.sample import PAPER_CONVERSATIONS
    from cocoeval.core.taxonomy import load_taxonomy
    from cocoeval.run.rundir import Run

    run_dir, plan, tax = a.run_dir, None, load_taxonomy(a.taxonomy) if a.taxonomy else None
    if a.run_dir.suffix in (".yaml", ".yml"):  # a params file: its run directory and its annotation: section
        from cocoeval.run.stages import load_params

        exp = load_params(a.run_dir)
        run_dir, plan, tax = exp.run_dir, exp.params.annotation, tax or exp.taxonomy
    if a.exclude_annotated and a.random is None:
        from cocoeval.core.errors import ConfigError

        raise ConfigError(
            "--exclude-annotated leaves annotated conversations out of a random draw",
            hint="add --random N (the conversations of each target to draw)",
        )
    run = Run.open(run_dir)
    if a.random is not None:  # beyond the paper: a random draw for the corrected rates, recorded in the run
        rep = export_items(
            run,
            a.out,
            seed=a.seed or 0,
            setups=a.setup,
            taxonomy=tax,
            random_per_target=a.random,
            exclude_annotated=a.exclude_annotated,
        )
    elif plan is not None:
        rep = export_items(run, a.out, plan=_plan(plan, a, sorted(run.continuations)), taxonomy=tax)
    else:
        rep = export_items(
            run,
            a.out,
            seed=a.seed or 0,
            setups=a.setup,
            overall_conversations=PAPER_CONVERSATIONS["overall"]
            if a.overall_conversations is None
            else a.overall_conversations,
            fine_conversations=PAPER_CONVERSATIONS["fine_grained"]
            if a.fine_conversations is None
            else a.fine_conversations,
            overall_setups=a.overall_setup,
            fine_setups=a.fine_setup,
            taxonomy=tax,
        )
    print(format_export(rep))
    if a.html:
        from cocoeval.annotate.page import write_page

        page = write_page(a.out, tax or load_taxonomy())
        print(
            f"{page}: the annotation page (open it in a browser from the folder, no server or network needed; "
            "progress is kept in that browser; its Export button downloads a sheet for annotate-import --key "
            f"{Path(a.out) / 'key.json'})"
        )
    if a.format == "labelstudio":
        from cocoeval.annotate.labelstudio import write_labelstudio

        tasks, config = write_labelstudio(a.out, tax or load_taxonomy())
        print(
            f"{tasks} and {config}: Label Studio tasks (one per conversation) and their labelling config; import "
            f"the tasks into a project with that config, then give Label Studio's JSON export to annotate-import "
            f"with --key {Path(a.out) / 'key.json'}"
        )
    return 0


def _cmd_annotate_import(a: argparse.Namespace) -> int:
    import dataclasses

    from cocoeval.annotate.exchange import format_report, import_into_run
    from cocoeval.annotate.progress import format_status
    from cocoeval.core.jsonio import write_json
    from cocoeval.core.taxonomy import load_taxonomy

    tax = load_taxonomy(a.taxonomy) if a.taxonomy else load_taxonomy()
    rep = import_into_run(a.file, a.run_dir, key=a.key, taxonomy=tax, replace=a.replace, dry_run=a.dry_run)
    print(format_report(rep))
    status = _status(a, tax)
    print(format_status(status, a.dry_run))
    if a.report:
        write_json(a.report, {**dataclasses.asdict(rep), "status": dataclasses.asdict(status)})
    return 0


def _status(a: argparse.Namespace, tax: Any) -> Any:
    """Each annotator's progress through the export (--key) and α per behaviour so far: computed
    here, in the cli layer, since annotate may not import analysis (where α is)."""
    from cocoeval.analysis.agreement import nominal_alpha
    from cocoeval.annotate.exchange import read_key
    from cocoeval.annotate.progress import import_status
    from cocoeval.run import Run

    key = read_key(a.key) if a.key else None
    return import_status(Run.open(a.run_dir), a.run_dir, tax, nominal_alpha, key=key, key_path=a.key)


def add_commands(sub: Any) -> None:
    ae = sub.add_parser(
        "annotate-export",
        help="draw conversations for blind human annotation (as the paper's Appendix B.1)",
        description="Per task, draw conversations (instances x targets: the human reference and each setup) at "
        "random and evenly over the source datasets, as the paper did (54 overall and 36 fine-grained "
        "conversations), and write them blind with the judge's own instructions. Anything that keeps the draw "
        "from being even is printed and kept in export.json. Given a params file whose annotation: section is "
        "set, the draws are that section's (the options below override single fields of it).",
    )
    ae.add_argument(
        "run_dir",
        type=Path,
        help="a run directory, or a params file (.yaml): its run directory and, when set, its annotation: section",
    )
    ae.add_argument("--out", type=out_dir, required=True, help="output folder")
    ae.add_argument(
        "--seed", type=int, help="seed of the draw and of the item order (default 0, or the params' annotation.seed)"
    )
    ae.add_argument(
        "--setup",
        action="append",
        help="setups whose continuations are annotated beside the human "
        "references (repeatable; default every setup of the run)",
    )
    ae.add_argument(
        "--overall-setup", action="append", help="setups for the overall task only (repeatable; default --setup)"
    )
    ae.add_argument(
        "--fine-setup", action="append", help="setups for the fine-grained task only (repeatable; default --setup)"
    )
    ae.add_argument(
        "--overall-conversations",
        type=count,
        help="conversations to score overall "
        "(instances x targets; default 54 as in the paper, or the params' annotation.overall; "
        "0: no overall task)",
    )
    ae.add_argument(
        "--fine-conversations",
        type=count,
        help="conversations to label turn by turn "
        "(instances x targets; default 36 as in the paper, or the params' annotation.fine_grained; "
        "0: no fine-grained task)",
    )
    ae.add_argument("--taxonomy", type=Path, help="taxonomy YAML of the run (default: the default taxonomy)")
    ae.add_argument(
        "--random",
        type=positive_int,
        metavar="N",
        help="beyond the paper: instead of B.1's draws, N conversations of each target (the reference "
        "and each --setup) drawn at random, stratified by dataset, for the fine-grained task; the draw "
        "is recorded in the run (annotation/random_draws.json) for the corrected rates of judge_check, "
        "once: the same seed gives the same draw, and exporting it again does not record it again. "
        "N above the conversations a target has (to draw from) is an error (exit 2) naming the most "
        "that can be asked for; nothing is written",
    )
    ae.add_argument(
        "--exclude-annotated",
        action="store_true",
        help="with --random: leave out the conversations a human has already annotated turn by turn "
        "(in the run's judgments/human/), to draw a further round after importing one; the "
        "conversations left out are recorded with the draw, so the same command gives the same draw "
        "again (a round after that needs another --seed)",
    )
    ae.add_argument(
        "--html",
        action="store_true",
        help="also write OUT/annotate.html: a self-contained page (opened from file://, no network) that "
        "shows the same blind, shuffled items and instructions, with a checkbox per behaviour for each "
        "numbered turn (keys: 1-9 and 0 toggle behaviours, x no behaviour, n/p next/previous turn), the "
        "overall scores, progress kept in the browser, and an Export button that downloads a sheet "
        "annotate-import reads with --key OUT/key.json",
    )
    ae.add_argument(
        "--format",
        choices=["csv", "labelstudio"],
        default="csv",
        help="labelstudio: also write OUT/labelstudio/tasks.json (one Label Studio task per conversation, "
        "blind) and OUT/labelstudio/config.xml (its labelling config: per turn to label a choice of "
        "behaviours, 'none' and a text for one the taxonomy lacks; the overall scores 1-10); the JSON "
        "Label Studio exports is read by annotate-import (default: csv, the sheet template.csv only)",
    )
    ae.set_defaults(func=_cmd_annotate_export)

    ai = sub.add_parser(
        "annotate-import",
        help="import human annotations (CSV/JSONL) as judgments, one store per annotator",
        description="Merge annotation rows into RUN_DIR/judgments/human/<annotator>.jsonl. New turns and items "
        "are added; importing the same rows again changes nothing; rows that change stored labels, rows that "
        "contradict each other, unusable rows and annotator names that clash with a judge are refused with a "
        "list of them, and nothing is written. Every repaired value (e.g. 'repetitions' read as Repetition) "
        "and duplicate row is reported. Write none in behaviours for a turn without behaviour (JSONL: []): a "
        "row left empty (behaviours, or both scores of an overall row) is not annotated, skipped and "
        "reported, never counted as zero; a target with only some turns annotated is an invalid judgment. "
        "Then reports each annotator's progress through the export (items labelled of those in --key) and, beyond "
        "the paper, the agreement so far: Krippendorff's α (nominal) per behaviour among all annotators whose "
        "labels the run holds, over the turns two or more of them labelled.",
    )
    ai.add_argument(
        "file",
        type=Path,
        help="filled template.csv, rows as CSV/JSONL, or a Label Studio JSON export (.json) of the tasks of "
        "annotate-export --format labelstudio",
    )
    ai.add_argument("run_dir", type=Path, help="the run directory the items came from")
    ai.add_argument("--key", type=Path, help="key.json of a blind export (needed for item_id rows)")
    ai.add_argument(
        "--replace",
        action="store_true",
        help="let the file's values replace different stored ones of the same annotator (listed)",
    )
    ai.add_argument("--dry-run", action="store_true", help="check and report, write nothing")
    ai.add_argument("--taxonomy", type=Path, help="taxonomy YAML of the run (default: the default taxonomy)")
    ai.add_argument(
        "--report", type=Path, help="also write the report as JSON to this file (progress and α under status)"
    )
    ai.set_defaults(func=_cmd_annotate_import)
