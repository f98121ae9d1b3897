"""The ``cocoeval`` human-annotation commands: annotate-export, annotate-import."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._args import count, out_dir


def _cmd_annotate_export(a: argparse.Namespace) -> int:
    from cocoeval.annotate.exchange import export_items, format_export
    from cocoeval.core.taxonomy import load_taxonomy
    from cocoeval.run.rundir import read_run

    rep = export_items(read_run(a.run_dir), a.out, seed=a.seed, setups=a.setup,
                       overall_conversations=a.overall_conversations, fine_conversations=a.fine_conversations,
                       overall_setups=a.overall_setup, fine_setups=a.fine_setup,
                       taxonomy=load_taxonomy(a.taxonomy) if a.taxonomy else None)
    print(format_export(rep))
    return 0


def _cmd_annotate_import(a: argparse.Namespace) -> int:
    from cocoeval.annotate.exchange import format_report, import_into_run
    from cocoeval.core.jsonio import write_json
    from cocoeval.core.taxonomy import load_taxonomy

    rep = import_into_run(a.file, a.run_dir, key=a.key, taxonomy=load_taxonomy(a.taxonomy) if a.taxonomy else None,
                          replace=a.replace, dry_run=a.dry_run)
    print(format_report(rep))
    if a.report:
        write_json(a.report, rep)
    return 0


def add_commands(sub: Any) -> None:
    ae = sub.add_parser(
        "annotate-export", help="draw conversations for blind human annotation (as the paper's Appendix B.1)",
        description="Per task, draw conversations (instances x targets: the human reference and each setup) at "
        "random and evenly over the source datasets, as the paper did (54 overall and 36 fine-grained "
        "conversations), and write them blind with the judge's own instructions. Anything that keeps the draw "
        "from being even is printed and kept in export.json.")
    ae.add_argument("run_dir", type=Path, help="a run directory")
    ae.add_argument("--out", type=out_dir, required=True, help="output folder")
    ae.add_argument("--seed", type=int, default=0, help="seed of the draw and of the item order (default 0)")
    ae.add_argument("--setup", action="append", help="setups whose continuations are annotated beside the human "
                    "references (repeatable; default every setup of the run)")
    ae.add_argument("--overall-setup", action="append", help="setups for the overall task only (repeatable; "
                    "default --setup)")
    ae.add_argument("--fine-setup", action="append", help="setups for the fine-grained task only (repeatable; "
                    "default --setup)")
    ae.add_argument("--overall-conversations", type=count, default=54, help="conversations to score overall "
                    "(instances x targets; default 54 as in the paper; 0: no overall task)")
    ae.add_argument("--fine-conversations", type=count, default=36, help="conversations to label turn by turn "
                    "(instances x targets; default 36 as in the paper; 0: no fine-grained task)")
    ae.add_argument("--taxonomy", type=Path, help="taxonomy YAML of the run (default: the default taxonomy)")
    ae.set_defaults(func=_cmd_annotate_export)

    ai = sub.add_parser(
        "annotate-import", help="import human annotations (CSV/JSONL) as judgments, one store per annotator",
        description="Merge annotation rows into RUN_DIR/judgments/human/<annotator>.jsonl. New turns and items "
        "are added; importing the same rows again changes nothing; rows that change stored labels, rows that "
        "contradict each other, unusable rows and annotator names that clash with a judge are refused with a "
        "list of them, and nothing is written. Every repaired value (e.g. 'repetitions' read as Repetition) "
        "and duplicate row is reported. Write none in behaviours for a turn without behaviour (JSONL: []): a "
        "row left empty (behaviours, or both scores of an overall row) is not annotated, skipped and "
        "reported, never counted as zero; a target with only some turns annotated is an invalid judgment.")
    ai.add_argument("file", type=Path, help="filled template.csv, or rows as CSV/JSONL")
    ai.add_argument("run_dir", type=Path, help="the run directory the items came from")
    ai.add_argument("--key", type=Path, help="key.json of a blind export (needed for item_id rows)")
    ai.add_argument("--replace", action="store_true",
                    help="let the file's values replace different stored ones of the same annotator (listed)")
    ai.add_argument("--dry-run", action="store_true", help="check and report, write nothing")
    ai.add_argument("--taxonomy", type=Path, help="taxonomy YAML of the run (default: the default taxonomy)")
    ai.add_argument("--report", type=Path, help="also write the report as JSON to this file")
    ai.set_defaults(func=_cmd_annotate_import)
