"""The ``cocoeval`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
import traceback
from pathlib import Path

from . import __version__
from ._cli_args import count, int_range, out_dir, out_file, positive_int, seconds, share
from ._cli_llm import add_llm_commands
from .errors import CocoevalError


def _cmd_build(a: argparse.Namespace) -> int:
    from .bench import BuildConfig, build

    cfg = BuildConfig(
        history_turns=a.history_turns, reference_turns=a.reference_turns,
        min_prior_turns=a.min_prior_turns, per_dataset=a.per_dataset,
        train_per_dataset=a.train_per_dataset, eval_share=a.eval_share,
        max_windows_per_conversation=a.max_windows_per_conversation,
        min_speakers=a.min_speakers, merge_same_speaker=a.merge_same_speaker, seed=a.seed,
    )
    llm_opts = runner = None
    if a.metadata or a.summary or a.clean:
        from .context_llm import LLMContextOptions
        from .llm import LLMConfig, Runner

        llm_opts = LLMContextOptions(metadata=a.metadata, summary=a.summary, clean=a.clean)
        runner = Runner(LLMConfig(cache=str(a.llm_cache), concurrency=a.concurrency, batch=a.batch,
                                  batch_poll_s=a.batch_poll))
    report = build(a.source, a.out, cfg, on_error=a.on_error, llm_context=llm_opts, runner=runner)
    from ._build_section import context_lines

    ctx = report.get("llm_context", {})
    for line in context_lines(report):
        print(line)
    print(f"wrote {a.out}/eval.jsonl, train.jsonl and report.json")
    print(f"{'dataset':<20} {'convs':>6} {'usable':>6} {'eval':>5} {'train':>6}")
    for ds, d in report["datasets"].items():
        print(f"{ds:<20} {d['conversations']:>6} {d['usable_conversations']:>6} "
              f"{d['eval_instances']:>5} {d['train_instances']:>6}")
        if "eval_shortfall" in d:
            print(f"  note: {d['eval_shortfall']}")
    skipped = report["skipped_conversations"]
    files = [s for src in report["sources"] for s in src["skipped"]]
    if skipped or files:
        print(f"skipped {len(skipped)} conversation(s) and {len(files)} file/record(s); "
              f"reasons in {a.out}/report.json")
    if report["totals"]["eval_instances"] + report["totals"]["train_instances"] == 0:
        print(f"error: no instance could be built from {', '.join(a.source)}; see the skip reasons in "
              f"{a.out}/report.json\n  how to fix: " + (
                  "see llm_context there: LLM stages left conversations or instances out (a rebuild "
                  "sends failed calls again)" if ctx else "give longer conversations or lower "
                  "--history-turns, --reference-turns, --min-prior-turns"), file=sys.stderr)
        return 2
    return 0


def _cmd_sft_export(a: argparse.Namespace) -> int:
    from .bench import load_instances
    from .errors import InputError
    from .sft import SFTConfig, export_sft, export_summary

    cfg, bench = SFTConfig(), a.bench_dir
    if a.bench_dir.suffix in (".yaml", ".yml"):  # a params file: its bench and its sft: section
        from .experiment import load_params

        exp = load_params(a.bench_dir)
        cfg, bench = exp.params.sft, exp.bench_dir()
    given = {k: v for k, v in (("ks", a.k), ("prompt", a.prompt), ("seed", a.seed), ("total", a.total),
                               ("n_datasets", a.n_datasets),
                               ("datasets", [d.strip() for d in a.datasets.split(",") if d.strip()]
                                if a.datasets else None)) if v is not None}
    cfg = cfg.model_copy(update=given)
    instances = load_instances(bench, "train")
    if not instances:
        raise InputError("no train instances to export", file=str(bench / "train.jsonl"),
                         hint="build with a train split (--eval-share below 1, --train-per-dataset above 0)")
    report = export_sft(instances, a.out, ks=cfg.ks, prompt=cfg.prompt, seed=cfg.seed,
                        max_example_tokens=a.max_example_tokens, total=cfg.total, datasets=cfg.datasets,
                        n_datasets=cfg.n_datasets)
    for line in export_summary(report, cfg):
        print(line, file=sys.stderr if line.startswith("warning") else sys.stdout)
    return 0 if all(f["valid"] for f in report["files"].values()) else 1


def _cmd_finetune(a: argparse.Namespace) -> int:
    from .sft import finetune_status, start_finetune

    if a.file is not None:  # a malformed file is reported before any key or request
        from .errors import InputError
        from .sft import validate_sft_file

        rep = validate_sft_file(a.file)
        if not rep["valid"]:
            raise InputError(f"not a valid fine-tuning file: {'; '.join(rep['problems'][:3])}", file=str(a.file),
                             hint="re-export it with cocoeval sft-export")
    if (a.status or a.file) and not os.environ.get("OPENAI_API_KEY"):
        from .errors import ConfigError

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


def _cmd_annotate_export(a: argparse.Namespace) -> int:
    from .annotate import export_items, format_export
    from .experiment import read_run
    from .taxonomy import load_taxonomy

    rep = export_items(read_run(a.run_dir), a.out, seed=a.seed, setups=a.setup,
                       overall_conversations=a.overall_conversations, fine_conversations=a.fine_conversations,
                       overall_setups=a.overall_setup, fine_setups=a.fine_setup,
                       taxonomy=load_taxonomy(a.taxonomy) if a.taxonomy else None)
    print(format_export(rep))
    return 0


def _cmd_annotate_import(a: argparse.Namespace) -> int:
    from .annotate import format_report, import_into_run
    from .jsonio import write_json
    from .taxonomy import load_taxonomy

    rep = import_into_run(a.file, a.run_dir, key=a.key, taxonomy=load_taxonomy(a.taxonomy) if a.taxonomy else None,
                          replace=a.replace, dry_run=a.dry_run)
    print(format_report(rep))
    if a.report:
        write_json(a.report, rep)
    return 0


def add_analysis_args(p: argparse.ArgumentParser) -> None:
    from ._inference import CORRECTIONS, MIN_N

    p.add_argument("--resamples", type=int_range(1, 100_000), default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--min-n", type=int_range(2), default=MIN_N,
                   help=f"intervals and tests need at least this many instances; fewer: shown as 'n too small' "
                   f"(default {MIN_N})")
    p.add_argument("--correction", choices=CORRECTIONS, default="bh",
                   help="multiple-comparison correction of the over/under-production verdicts over behaviours x "
                   "setups: bh (Benjamini-Hochberg, default), holm or none")


def _cmd_report(a: argparse.Namespace) -> int:
    from .report import write_report

    rep = write_report(a.run_dir, a.out, judge=a.judge, resamples=a.resamples, seed=a.seed, min_n=a.min_n,
                       correction=a.correction)
    print(f"judge: {rep['judge']}; {len(rep['figures'])} figures, {len(rep['tables'])} tables in {rep['out']} "
          f"(see {rep['out']}/index.md)")
    return 0


def _cmd_notebooks(a: argparse.Namespace) -> int:
    from .experiment import load_params
    from .notebook import execute_notebooks

    exp = load_params(a.params)  # a malformed params file is reported here, not from inside a notebook
    for p in execute_notebooks(a.params, a.out, figures_dir=a.figures, resamples=a.resamples, min_n=a.min_n,
                               correction=a.correction):
        print(f"executed {p}")
    print(f"figures in {a.figures or exp.run_dir / 'figures'}/<notebook>/")
    return 0


def _cmd_show(a: argparse.Namespace) -> int:
    from ._text import visible
    from .bench import find_instance

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
    out(f"source: {p.source_file} ({p.source_format}), conversation {p.conversation_id}, "
          f"turns {p.start_index}-{p.start_index + len(inst.history) + len(inst.reference) - 1}")
    out(f"turns: {p.text_method}" + (f" clean-up by {p.text_model} ({p.text_prompt}); source text kept as raw_text"
                                      if p.text_method == "llm" else " (the loader's artefact removal)"))
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


def _cmd_demo_data(a: argparse.Namespace) -> int:
    from .demo import sample_dir, write_demo_data

    paths = write_demo_data(a.out)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    print("(illustrative conversations written by cocoeval, not human data; real meetings: "
          f"qmsum:{sample_dir()}, the QMSum sample the demo uses)")
    return 0


def _cmd_fetch(a: argparse.Namespace) -> int:
    from .errors import ConfigError
    from .fetch import CATALOGUE, build_command, fetch

    names = list(dict.fromkeys(a.name))
    if a.url and len(names) > 1:
        raise ConfigError("--url names one archive: give one dataset with it", hint=f"e.g. cocoeval fetch {names[0]} --url URL")
    for n in names:
        fetch(n, a.out, url=a.url, force=a.force)
    print(f"\nbuild the benchmark with (licences: {', '.join(CATALOGUE[n].about for n in names)}):")
    print("  " + build_command(a.out, names))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cocoeval", description="CoCoEval workbench: build benchmarks "
                                "from human conversations, simulate, judge and analyse.")
    p.add_argument("--version", action="version", version=f"cocoeval {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an internal error (also COCOEVAL_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="cut conversations into benchmark instances",
                       description="Build CoCoEval instances (metadata, summary, history x, "
                       "reference r) from source conversations. Writes OUT/eval.jsonl, "
                       "OUT/train.jsonl and OUT/report.json; same inputs and seed give "
                       "byte-identical files.")
    b.add_argument("--source", action="append", required=True, metavar="KIND:PATH[#DATASET]",
                   help="a source to read, repeatable; KIND is qmsum, convokit, tcr or chat; "
                   "#DATASET overrides the inferred dataset name")
    b.add_argument("--out", required=True, type=out_dir, help="output folder")
    b.add_argument("--per-dataset", type=count, default=50, help="eval instances per dataset (default 50)")
    b.add_argument("--train-per-dataset", type=count, default=None,
                   help="train instances per dataset (default: every window of the train conversations)")
    b.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    b.add_argument("--history-turns", type=positive_int, default=30, help="turns in the history x (default 30)")
    b.add_argument("--reference-turns", type=positive_int, default=30,
                   help="turns in the reference r (default 30)")
    b.add_argument("--min-prior-turns", type=count, default=10,
                   help="turns that must precede x, for the summary (default 10)")
    b.add_argument("--min-speakers", type=positive_int, default=2,
                   help="fewest distinct speakers in a window (default 2)")
    b.add_argument("--merge-same-speaker", action="store_true",
                   help="merge consecutive turns of one speaker (off by default)")
    b.add_argument("--eval-share", type=share, default=0.5,
                   help="share of each dataset's conversations held out for eval, grown when "
                   "needed to reach --per-dataset (default 0.5)")
    b.add_argument("--max-windows-per-conversation", type=positive_int, default=None,
                   help="cap on instances from one conversation (default: no cap)")
    b.add_argument("--on-error", choices=["fail", "skip"], default="fail",
                   help="on a malformed file: stop (default) or skip it and report it")
    b.add_argument("--metadata", metavar="MODEL", help="make M from the whole conversation with this model "
                   "(the paper: openai/o4-mini); default: extractive, offline")
    b.add_argument("--summary", metavar="MODEL", help="make S, a paragraph about the turns before x, with this "
                   "model (the paper: openai/o4-mini); default: extractive")
    b.add_argument("--clean", metavar="MODEL", help="clean the turns of QMSum Product and Academic (disfluencies, fillers, repetitions, "
                   "special tokens) with this model before windowing, as the paper did (A.3); default: the "
                   "loaders' rule-based artefact removal only")
    b.add_argument("--llm-cache", type=out_file, default=Path(".cocoeval/cache.sqlite"),
                   help="call cache for --metadata/--summary/--clean (default .cocoeval/cache.sqlite)")
    b.add_argument("--concurrency", type=positive_int, default=8, help="concurrent LLM calls (default 8)")
    b.add_argument("--batch", action="store_true", help="send the --metadata/--summary/--clean calls "
                   "through the provider's batch API (half price, answers within 24 h; a killed build "
                   "resumes polling)")
    b.add_argument("--batch-poll", type=seconds, default=30.0, metavar="SECONDS",
                   help="seconds between polls of a running batch (default 30)")
    b.set_defaults(func=_cmd_build)

    s = sub.add_parser("show", help="print one instance readably")
    s.add_argument("bench_dir", type=Path, help="folder written by cocoeval build")
    s.add_argument("instance_id", help="instance id, e.g. qmsum_product/ES2002a/120")
    s.add_argument("--json", action="store_true", help="print the instance as JSON")
    s.add_argument("--width", type=int_range(20, 10_000), default=100, help="wrap width (default 100)")
    s.add_argument("--max-chars", type=positive_int, default=2000, help="longest turn printed (default 2000)")
    s.set_defaults(func=_cmd_show)

    d = sub.add_parser("demo-data", help="write the illustrative demo conversations")
    d.add_argument("--out", type=out_dir, required=True, help="output folder")
    d.set_defaults(func=_cmd_demo_data)

    x = sub.add_parser("sft-export", help="write the train split as fine-tuning chat JSONL",
                       description="Export the SFT training set (paper A.4: 1,450 train instances from the "
                       "4 datasets with the most train conversations, split in proportion to their train "
                       "instances) as OpenAI fine-tuning chat JSONL, one file per k (turns per call), with "
                       "the simulation prompt; validates each file. Given a params file, its bench and its "
                       "sft: section are used; options override them.")
    x.add_argument("bench_dir", type=Path, help="folder written by cocoeval build, or a params file (.yaml)")
    x.add_argument("--out", type=out_dir, required=True, help="output folder")
    x.add_argument("--k", type=positive_int, action="append", help="turns per call, repeatable (default 1, 5, 30)")
    x.add_argument("--prompt", help="simulation prompt (default vanilla)")
    x.add_argument("--seed", type=int, help="seed of the instance draw and the starting turns (default 0)")
    x.add_argument("--total", type=positive_int, help="training instances (default 1450, as in the paper)")
    x.add_argument("--datasets", help="comma-separated datasets to train on (default: the --n-datasets "
                   "with the most train conversations, printed)")
    x.add_argument("--n-datasets", type=positive_int, help="how many datasets without --datasets (default 4)")
    x.add_argument("--max-example-tokens", type=positive_int, default=65536,
                   help="token limit per example of the base model (default 65536)")
    x.set_defaults(func=_cmd_sft_export)

    ft = sub.add_parser("finetune", help="upload a training file and start an OpenAI fine-tuning job")
    ft.add_argument("file", nargs="?", type=Path, help="sft_k*.jsonl from cocoeval sft-export")
    ft.add_argument("--model", help="base model, e.g. gpt-4.1-2025-04-14")
    ft.add_argument("--suffix", help="suffix of the fine-tuned model name")
    ft.add_argument("--seed", type=int, help="training seed")
    ft.add_argument("--n-epochs", type=positive_int, default=1,
                    help="training epochs (default 1, as in the paper; other hyperparameters: the provider's defaults)")
    ft.add_argument("--status", metavar="JOB_ID", help="print a job's status (and simulator spec)")
    ft.add_argument("--base-url", help="API base URL (default: OpenAI's)")
    ft.set_defaults(func=_cmd_finetune)

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
        "and duplicate row is reported.")
    ai.add_argument("file", type=Path, help="filled template.csv, or rows as CSV/JSONL")
    ai.add_argument("run_dir", type=Path, help="the run directory the items came from")
    ai.add_argument("--key", type=Path, help="key.json of a blind export (needed for item_id rows)")
    ai.add_argument("--replace", action="store_true",
                    help="let the file's values replace different stored ones of the same annotator (listed)")
    ai.add_argument("--dry-run", action="store_true", help="check and report, write nothing")
    ai.add_argument("--taxonomy", type=Path, help="taxonomy YAML of the run (default: the default taxonomy)")
    ai.add_argument("--report", type=Path, help="also write the report as JSON to this file")
    ai.set_defaults(func=_cmd_annotate_import)

    rp = sub.add_parser("report", help="figures and tables of a run",
                        description="Write every figure (PNG and SVG) and table (CSV and Markdown) of a "
                        "run directory, with an index.md listing them.")
    rp.add_argument("run_dir", type=Path, help="a run directory")
    rp.add_argument("--out", type=out_dir, required=True, help="output folder")
    rp.add_argument("--judge", help="judge shown in the figures (default: the first LLM judge)")
    add_analysis_args(rp)
    rp.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    rp.set_defaults(func=_cmd_report)

    nbp = sub.add_parser("notebooks", help="execute every notebook headlessly (papermill) on a run")
    nbp.add_argument("params", type=Path, help="params file of the run")
    nbp.add_argument("--out", type=out_dir, required=True, help="folder for the executed notebooks")
    nbp.add_argument("--figures", type=out_dir, default=None,
                     help="figures folder (default: the run's figures/; `make figures` writes the committed figures/)")
    add_analysis_args(nbp)
    nbp.set_defaults(func=_cmd_notebooks)

    add_llm_commands(sub)

    f = sub.add_parser("fetch", help="download QMSum, IQ2 or TCR from their public homes, verified",
                       description="Download each dataset's public archive into OUT (resuming a broken "
                       "download from OUT/.partial), check it and read it with the loaders, move it into "
                       "OUT/<folder> and record the sha256 of every file in OUT/fetch-manifest.json (which "
                       "cocoeval build copies into its report). A dataset already there and matching the "
                       "manifest is skipped. Prints the build command. Mirrors: --url or "
                       "COCOEVAL_FETCH_<NAME>_URL.")
    f.add_argument("name", nargs="+", choices=["qmsum", "iq2", "tcr"], help="dataset(s) to fetch")
    f.add_argument("--out", type=out_dir, default=Path("data"), help="data folder (default data/)")
    f.add_argument("--url", help="fetch the archive from this URL (a mirror) instead; one dataset only")
    f.add_argument("--force", action="store_true", help="fetch again and replace what is there")
    f.set_defaults(func=_cmd_fetch)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log = logging.getLogger("cocoeval")
    if not log.handlers:  # batch submissions and their ends, on stderr
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        return int(args.func(args) or 0)
    except CocoevalError as e:
        from .llm.secrets import redact  # a provider may have echoed the key in its error text

        print(f"error: {redact(str(e))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Exception as e:  # defence in depth: a bug still ends with a message, not a bare traceback
        from .llm.secrets import redact

        if getattr(args, "debug", False) or os.environ.get("COCOEVAL_DEBUG") == "1":
            print(redact(traceback.format_exc()), file=sys.stderr, end="")
        print(redact(f"internal error: {type(e).__name__}: {e}\n  please report it with the command line "
                     "(rerun with --debug or COCOEVAL_DEBUG=1 for the traceback)"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
