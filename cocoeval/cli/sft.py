"""The ``cocoeval`` fine-tuning commands: sft-export, finetune."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ._args import int_range, out_dir, positive_int


def _cmd_sft_export(a: argparse.Namespace) -> int:
    from cocoeval.bench.store import load_instances
    from cocoeval.core.errors import InputError
    from cocoeval.simulate.sft import SFTConfig, export_sft, export_summary

    cfg, bench = SFTConfig(), a.bench_dir
    if a.bench_dir.suffix in (".yaml", ".yml"):  # a params file: its bench and its sft: section
        from cocoeval.run.stages import load_params

        exp = load_params(a.bench_dir)
        cfg, bench = exp.params.sft, exp.bench_dir()
    given = {
        k: v
        for k, v in (
            ("ks", a.k),
            ("prompt", a.prompt),
            ("seed", a.seed),
            ("total", a.total),
            ("n_datasets", a.n_datasets),
            ("datasets", [d.strip() for d in a.datasets.split(",") if d.strip()] if a.datasets else None),
        )
        if v is not None
    }
    cfg = cfg.model_copy(update=given)
    instances = load_instances(bench, "train")
    if not instances:
        raise InputError(
            "no train instances to export",
            file=str(bench / "train.jsonl"),
            hint="build with a train split (--eval-share below 1, --train-per-dataset above 0)",
        )
    report = export_sft(
        instances,
        a.out,
        ks=cfg.ks,
        prompt=cfg.prompt,
        seed=cfg.seed,
        max_example_tokens=a.max_example_tokens,
        total=cfg.total,
        datasets=cfg.datasets,
        n_datasets=cfg.n_datasets,
    )
    for line in export_summary(report, cfg):
        print(line, file=sys.stderr if line.startswith("warning") else sys.stdout)
    return 0 if all(f.valid for f in report.files.values()) else 1


def _cmd_finetune(a: argparse.Namespace) -> int:
    from cocoeval.simulate.sft import finetune_status, start_finetune

    if a.file is not None:  # a malformed file is reported before any key or request
        from cocoeval.core.errors import InputError
        from cocoeval.simulate.sft import validate_sft_file

        rep = validate_sft_file(a.file)
        if not rep.valid:
            raise InputError(
                f"not a valid fine-tuning file: {'; '.join(rep.problems[:3])}",
                file=str(a.file),
                hint="re-export it with cocoeval sft-export",
            )
    if (a.status or a.file) and not os.environ.get("OPENAI_API_KEY"):
        from cocoeval.core.errors import ConfigError

        raise ConfigError("fine-tuning needs OPENAI_API_KEY", hint="export OPENAI_API_KEY=...")
    if a.status:
        print(json.dumps(finetune_status(a.status, base_url=a.base_url), indent=2))
        return 0
    if not a.file or not a.model:
        print("error: give FILE and --model, or --status JOB_ID", file=sys.stderr)
        return 2
    out = start_finetune(a.file, a.model, suffix=a.suffix, seed=a.seed, n_epochs=a.n_epochs, base_url=a.base_url)
    print(json.dumps(out, indent=2))
    print(f"poll with: cocoeval finetune --status {out['job_id']}")
    return 0


def add_commands(sub: Any) -> None:
    x = sub.add_parser(
        "sft-export",
        help="write the train split as fine-tuning chat JSONL",
        description="Export the SFT training set (paper A.4: 1,450 train instances from the "
        "4 datasets with the most train conversations, split in proportion to their train "
        "instances) as OpenAI fine-tuning chat JSONL, one file per k (turns per call), with "
        "the simulation prompt; validates each file. Given a params file, its bench and its "
        "sft: section are used; options override them.",
    )
    x.add_argument("bench_dir", type=Path, help="folder written by cocoeval build, or a params file (.yaml)")
    x.add_argument("--out", type=out_dir, required=True, help="output folder")
    x.add_argument(
        "--k",
        type=int_range(1, 1_000),
        action="append",
        help="turns per call, 1 to 1,000, repeatable (default 1, 5, 30)",
    )
    x.add_argument("--prompt", help="simulation prompt (default vanilla)")
    x.add_argument("--seed", type=int, help="seed of the instance draw and the starting turns (default 0)")
    x.add_argument("--total", type=positive_int, help="training instances (default 1450, as in the paper)")
    x.add_argument(
        "--datasets",
        help="comma-separated datasets to train on (default: the --n-datasets "
        "with the most train conversations, printed)",
    )
    x.add_argument("--n-datasets", type=positive_int, help="how many datasets without --datasets (default 4)")
    x.add_argument(
        "--max-example-tokens",
        type=positive_int,
        default=65536,
        help="token limit per example of the base model (default 65536)",
    )
    x.set_defaults(func=_cmd_sft_export)

    ft = sub.add_parser("finetune", help="upload a training file and start an OpenAI fine-tuning job")
    ft.add_argument("file", nargs="?", type=Path, help="sft_k*.jsonl from cocoeval sft-export")
    ft.add_argument("--model", help="base model, e.g. gpt-4.1-2025-04-14")
    ft.add_argument("--suffix", help="suffix of the fine-tuned model name")
    ft.add_argument("--seed", type=int, help="training seed")
    ft.add_argument(
        "--n-epochs",
        type=positive_int,
        default=1,
        help="training epochs (default 1, as in the paper; other hyperparameters: the provider's defaults)",
    )
    ft.add_argument("--status", metavar="JOB_ID", help="print a job's status (and simulator spec)")
    ft.add_argument("--base-url", help="API base URL (default: OpenAI's)")
    ft.set_defaults(func=_cmd_finetune)
