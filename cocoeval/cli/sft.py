"""The ``cocoeval`` fine-tuning commands: sft-export, finetune."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ._args import out_dir, positive_int


def _cmd_sft_export(a: argparse.Namespace) -> int:
    from ..bench import load_instances
    from ..errors import InputError
    from ..sft import export_sft

    instances = load_instances(a.bench_dir, "train")
    if not instances:
        raise InputError("no train instances to export", file=str(a.bench_dir / "train.jsonl"),
                         hint="build with a train split (--eval-share below 1, --train-per-dataset above 0)")
    report = export_sft(instances, a.out, ks=a.k or [1, 5, 30],
                        prompt=a.prompt, seed=a.seed, max_example_tokens=a.max_example_tokens)
    for k, f in report["files"].items():
        state = "valid" if f["valid"] else f"INVALID: {'; '.join(f['problems'][:3])}"
        print(f"k={k:>2}: {f['file']}: {f['examples']} examples, {f['tokens']} tokens "
              f"(largest {f['max_example_tokens']}; {f['token_method']}) — {state}")
    return 0 if all(f["valid"] for f in report["files"].values()) else 1


def _cmd_finetune(a: argparse.Namespace) -> int:
    from ..sft import finetune_status, start_finetune

    if a.file is not None:  # a malformed file is reported before any key or request
        from ..errors import InputError
        from ..sft import validate_sft_file

        rep = validate_sft_file(a.file)
        if not rep["valid"]:
            raise InputError(f"not a valid fine-tuning file: {'; '.join(rep['problems'][:3])}", file=str(a.file),
                             hint="re-export it with cocoeval sft-export")
    if (a.status or a.file) and not os.environ.get("OPENAI_API_KEY"):
        from ..errors import ConfigError

        raise ConfigError("fine-tuning needs OPENAI_API_KEY", hint="export OPENAI_API_KEY=...")
    if a.status:
        print(json.dumps(finetune_status(a.status, base_url=a.base_url), indent=2))
        return 0
    if not a.file or not a.model:
        print("error: give FILE and --model, or --status JOB_ID", file=sys.stderr)
        return 2
    out = start_finetune(a.file, a.model, suffix=a.suffix, seed=a.seed, base_url=a.base_url)
    print(json.dumps(out, indent=2))
    print(f"poll with: cocoeval finetune --status {out['job_id']}")
    return 0


def add_commands(sub: Any) -> None:
    x = sub.add_parser("sft-export", help="write the train split as fine-tuning chat JSONL",
                       description="Export the train split as OpenAI fine-tuning chat JSONL, one file "
                       "per k (turns per call), with the simulation prompt; validates each file.")
    x.add_argument("bench_dir", type=Path, help="folder written by cocoeval build")
    x.add_argument("--out", type=out_dir, required=True, help="output folder")
    x.add_argument("--k", type=positive_int, action="append", help="turns per call, repeatable (default 1, 5, 30)")
    x.add_argument("--prompt", default="vanilla", help="simulation prompt (default vanilla)")
    x.add_argument("--seed", type=int, default=0, help="seed of the starting turns (default 0)")
    x.add_argument("--max-example-tokens", type=positive_int, default=65536,
                   help="token limit per example of the base model (default 65536)")
    x.set_defaults(func=_cmd_sft_export)

    ft = sub.add_parser("finetune", help="upload a training file and start an OpenAI fine-tuning job")
    ft.add_argument("file", nargs="?", type=Path, help="sft_k*.jsonl from cocoeval sft-export")
    ft.add_argument("--model", help="base model, e.g. gpt-4.1-2025-04-14")
    ft.add_argument("--suffix", help="suffix of the fine-tuned model name")
    ft.add_argument("--seed", type=int, help="training seed")
    ft.add_argument("--status", metavar="JOB_ID", help="print a job's status (and simulator spec)")
    ft.add_argument("--base-url", help="API base URL (default: OpenAI's)")
    ft.set_defaults(func=_cmd_finetune)
