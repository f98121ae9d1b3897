"""The ``cocoeval`` commands about the benchmark: build, show, bench-export, demo-data, fetch."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from ._args import count, int_range, out_dir, out_file, positive_int, seconds, share


def _cmd_build(a: argparse.Namespace) -> int:
    from cocoeval.bench.build import build
    from cocoeval.bench.config import BuildConfig

    cfg = BuildConfig(
        history_turns=a.history_turns,
        reference_turns=a.reference_turns,
        min_prior_turns=a.min_prior_turns,
        per_dataset=a.per_dataset,
        train_per_dataset=a.train_per_dataset,
        eval_share=a.eval_share,
        max_windows_per_conversation=a.max_windows_per_conversation,
        min_speakers=a.min_speakers,
        merge_same_speaker=a.merge_same_speaker,
        seed=a.seed,
    )
    llm_opts = runner = None
    if a.metadata or a.summary or a.clean:
        from cocoeval.bench.config import LLMContextOptions
        from cocoeval.llm import LLMConfig, Runner

        llm_opts = LLMContextOptions(metadata=a.metadata, summary=a.summary, clean=a.clean)
        runner = Runner(
            LLMConfig(cache=str(a.llm_cache), concurrency=a.concurrency, batch=a.batch, batch_poll_s=a.batch_poll)
        )
    report = build(a.source, a.out, cfg, on_error=a.on_error, llm_context=llm_opts, runner=runner)
    from cocoeval.bench.step import context_lines

    ctx = report.get("llm_context", {})
    for line in context_lines(report):
        print(line)
    print(f"wrote {a.out}/eval.jsonl, train.jsonl and report.json")
    print(f"{'dataset':<20} {'convs':>6} {'usable':>6} {'eval':>5} {'train':>6}")
    for ds, d in report["datasets"].items():
        print(
            f"{ds:<20} {d['conversations']:>6} {d['usable_conversations']:>6} "
            f"{d['eval_instances']:>5} {d['train_instances']:>6}"
        )
        if "eval_shortfall" in d:
            print(f"  note: {d['eval_shortfall']}")
    skipped = report["skipped_conversations"]
    files = [s for src in report["sources"] for s in src["skipped"]]
    if skipped or files:
        print(f"skipped {len(skipped)} conversation(s) and {len(files)} file/record(s); reasons in {a.out}/report.json")
        whole = [s for s in files if s["record"] is None]  # whole files (unreadable, malformed) by name
        for s in whole[:10]:
            print(f"  skipped {s['file']}: {s['reason']}")
        if len(whole) > 10:
            print(f"  ... and {len(whole) - 10} more file(s), listed in {a.out}/report.json")
    if merges := [m for src in report["sources"] for m in src.get("merged_speakers", [])]:
        print(
            f"merged the speaker labels of {len(merges)} person(s) named in several ways; "
            f"listed in {a.out}/report.json (sources: merged_speakers)"
        )
    if report["totals"]["eval_instances"] + report["totals"]["train_instances"] == 0:
        print(
            f"error: no instance could be built from {', '.join(a.source)}; see the skip reasons in "
            f"{a.out}/report.json\n  how to fix: "
            + (
                "see llm_context there: LLM stages left conversations or instances out (a rebuild "
                "sends failed calls again)"
                if ctx
                else "give longer conversations or lower --history-turns, --reference-turns, --min-prior-turns"
            ),
            file=sys.stderr,
        )
        return 2
    return 0


def _cmd_show(a: argparse.Namespace) -> int:
    from cocoeval.bench.store import find_instance
    from cocoeval.core.text import visible

    inst = find_instance(a.bench_dir, a.instance_id)
    if a.json:  # JSON escapes control characters; bidi and other format characters are made visible
        print(visible(inst.model_dump_json(indent=2, exclude_none=True), json=True))
        return 0
    w = a.width

    def para(text: str, indent: str = "  ") -> str:
        return textwrap.fill(visible(text), width=w, initial_indent=indent, subsequent_indent=indent)

    def out(text: str = "") -> None:  # data text never reaches the terminal raw
        print(visible(text))

    out(f"{inst.id}  [{inst.dataset}, {inst.split}]")
    p = inst.provenance
    out(
        f"source: {p.source_file} ({p.source_format}), conversation {p.conversation_id}, "
        f"turns {p.start_index}-{p.start_index + len(inst.history) + len(inst.reference) - 1}"
    )
    out(
        f"turns: {p.text_method}"
        + (
            f" clean-up by {p.text_model} ({p.text_prompt}); source text kept as raw_text"
            if p.text_method == "llm"
            else " (the loader's artefact removal)"
        )
    )
    out(f"\nMetadata ({inst.metadata.method}" + (f", {inst.metadata.model}" if inst.metadata.model else "") + ")")
    out("Goals:")
    for g in inst.metadata.goals:
        out(para(f"- {g}"))
    out("Participants:")
    for pt in inst.metadata.participants:
        extra = ", ".join(x for x in (pt.role, pt.stance) if x)
        out(f"  - {pt.name}" + (f" ({extra})" if extra else ""))
    out(f"\nSummary ({inst.summary.method}" + (f", {inst.summary.model}" if inst.summary.model else "") + "):")
    out(para(inst.summary.text or "(no earlier turns)"))
    for title, turns in (("History x", inst.history), ("Reference r", inst.reference)):
        out(f"\n{title} ({len(turns)} turns):")
        for i, t in enumerate(turns):
            out(para(f"{i + 1:>2}. {t.speaker}: {t.text}", "  ")[: a.max_chars])
    return 0


def _cmd_bench_export(a: argparse.Namespace) -> int:
    from cocoeval.bench.export import export_bench

    rep = export_bench(a.bench_dir, a.out, a.format)
    print(
        f"wrote {a.out}/eval.parquet ({rep.eval} instances), train.parquet ({rep.train}), README.md "
        "(the dataset card) and report.json"
    )
    print(f'load it with: datasets.load_dataset("{a.out}"), or bench: {a.out} in a params file')
    return 0


def _cmd_demo_data(a: argparse.Namespace) -> int:
    from cocoeval.sources.demo import sample_dir, write_demo_data

    paths = write_demo_data(a.out)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    print(
        "(illustrative conversations written by cocoeval, not human data; real meetings: "
        f"qmsum:{sample_dir()}, the QMSum sample the demo uses)"
    )
    return 0


def _cmd_fetch(a: argparse.Namespace) -> int:
    from cocoeval.core.errors import ConfigError
    from cocoeval.sources.fetch import CATALOGUE, build_command, fetch

    names = list(dict.fromkeys(a.name))
    if a.url and len(names) > 1:
        raise ConfigError(
            "--url names one archive: give one dataset with it", hint=f"e.g. cocoeval fetch {names[0]} --url URL"
        )
    for n in names:
        fetch(n, a.out, url=a.url, force=a.force)
    print(f"\nbuild the benchmark with (licences: {', '.join(CATALOGUE[n].about for n in names)}):")
    print("  " + build_command(a.out, names))
    return 0


def add_commands(sub: Any) -> None:
    b = sub.add_parser(
        "build",
        help="cut conversations into benchmark instances",
        description="Build CoCoEval instances (metadata, summary, history x, "
        "reference r) from source conversations. Writes OUT/eval.jsonl, "
        "OUT/train.jsonl and OUT/report.json; same inputs and seed give "
        "byte-identical files.",
    )
    b.add_argument(
        "--source",
        action="append",
        required=True,
        metavar="KIND:PATH[#DATASET]",
        help="a source to read, repeatable; KIND is qmsum, convokit, tcr or chat; "
        "#DATASET overrides the inferred dataset name",
    )
    b.add_argument("--out", required=True, type=out_dir, help="output folder")
    b.add_argument("--per-dataset", type=count, default=50, help="eval instances per dataset (default 50)")
    b.add_argument(
        "--train-per-dataset",
        type=count,
        default=None,
        help="train instances per dataset (default: every window of the train conversations)",
    )
    b.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    b.add_argument("--history-turns", type=positive_int, default=30, help="turns in the history x (default 30)")
    b.add_argument("--reference-turns", type=positive_int, default=30, help="turns in the reference r (default 30)")
    b.add_argument(
        "--min-prior-turns", type=count, default=10, help="turns that must precede x, for the summary (default 10)"
    )
    b.add_argument(
        "--min-speakers", type=positive_int, default=2, help="fewest distinct speakers in a window (default 2)"
    )
    b.add_argument(
        "--merge-same-speaker", action="store_true", help="merge consecutive turns of one speaker (off by default)"
    )
    b.add_argument(
        "--eval-share",
        type=share,
        default=0.5,
        help="share of each dataset's conversations held out for eval, grown when "
        "needed to reach --per-dataset (default 0.5)",
    )
    b.add_argument(
        "--max-windows-per-conversation",
        type=positive_int,
        default=None,
        help="cap on instances from one conversation (default: no cap)",
    )
    b.add_argument(
        "--on-error",
        choices=["fail", "skip"],
        default="fail",
        help="on a malformed file: stop (default) or skip it and report it",
    )
    b.add_argument(
        "--metadata",
        metavar="MODEL",
        help="make M from the whole conversation with this model "
        "(the paper: openai/o4-mini-2025-04-16); default: extractive, offline",
    )
    b.add_argument(
        "--summary",
        metavar="MODEL",
        help="make S, a paragraph about the turns before x, with this "
        "model (the paper: openai/o4-mini-2025-04-16); default: extractive",
    )
    b.add_argument(
        "--clean",
        metavar="MODEL",
        help="clean the turns of QMSum Product and Academic (disfluencies, fillers, repetitions, "
        "special tokens) with this model before windowing, as the paper did (A.3); default: the "
        "loaders' rule-based artefact removal only",
    )
    b.add_argument(
        "--llm-cache",
        type=out_file,
        default=Path(".cocoeval/cache.sqlite"),
        help="call cache for --metadata/--summary/--clean (default .cocoeval/cache.sqlite)",
    )
    b.add_argument("--concurrency", type=positive_int, default=8, help="concurrent LLM calls (default 8)")
    b.add_argument(
        "--batch",
        action="store_true",
        help="send the --metadata/--summary/--clean calls "
        "through the provider's batch API (half price, answers within 24 h; a killed build "
        "resumes polling)",
    )
    b.add_argument(
        "--batch-poll",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="seconds between polls of a running batch (default 30)",
    )
    b.set_defaults(func=_cmd_build)

    s = sub.add_parser("show", help="print one instance readably")
    s.add_argument("bench_dir", type=Path, help="folder written by cocoeval build")
    s.add_argument("instance_id", help="instance id, e.g. qmsum_product/ES2002a/120")
    s.add_argument("--json", action="store_true", help="print the instance as JSON")
    s.add_argument("--width", type=int_range(20, 10_000), default=100, help="wrap width (default 100)")
    s.add_argument("--max-chars", type=positive_int, default=2000, help="longest turn printed (default 2000)")
    s.set_defaults(func=_cmd_show)

    x = sub.add_parser(
        "bench-export",
        help="write a benchmark as a dataset: parquet splits and a dataset card",
        description="Write a benchmark folder's eval and train splits as parquet (OUT/eval.parquet, "
        "OUT/train.parquet) with a README.md dataset card in the Hugging Face format (licence, "
        "configs, splits, features; how it was built, counts per dataset, provenance and hashes "
        "from the build report) and the build report. The folder loads with datasets.load_dataset "
        "and is a benchmark folder for cocoeval too (bench: in a params file, show, sft-export, "
        "export-instances); read back, every instance is byte-identical.",
    )
    x.add_argument("bench_dir", type=Path, help="folder written by cocoeval build")
    x.add_argument("--format", choices=["parquet"], default="parquet", help="output format (default parquet)")
    x.add_argument("--out", type=out_dir, required=True, help="output folder")
    x.set_defaults(func=_cmd_bench_export)

    d = sub.add_parser("demo-data", help="write the illustrative demo conversations")
    d.add_argument("--out", type=out_dir, required=True, help="output folder")
    d.set_defaults(func=_cmd_demo_data)

    f = sub.add_parser(
        "fetch",
        help="download QMSum, IQ2 or TCR from their public homes, verified",
        description="Download each dataset's public archive into OUT (resuming a broken "
        "download from OUT/.partial), check it and read it with the loaders, move it into "
        "OUT/<folder> and record the sha256 of every file in OUT/fetch-manifest.json (which "
        "cocoeval build copies into its report). A dataset already there and matching the "
        "manifest is skipped. Prints the build command. Mirrors: --url or "
        "COCOEVAL_FETCH_<NAME>_URL.",
    )
    f.add_argument("name", nargs="+", choices=["qmsum", "iq2", "tcr"], help="dataset(s) to fetch")
    f.add_argument("--out", type=out_dir, default=Path("data"), help="data folder (default data/)")
    f.add_argument("--url", help="fetch the archive from this URL (a mirror) instead; one dataset only")
    f.add_argument("--force", action="store_true", help="fetch again and replace what is there")
    f.set_defaults(func=_cmd_fetch)
