"""Regenerate the notebooks (without outputs): python notebooks/make_notebooks.py

They are written to ``OUT``, cocoeval/notebooks/, inside the package, so that a wheel ships them
(``cocoeval notebooks PARAMS --copy DIR`` copies them out for interactive use).

Each notebook: one tagged ``parameters`` cell (typed values with a ``# help`` comment each),
narrative markdown, and glue code only; the logic lives in ``cocoeval``."""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

OUT = Path(__file__).resolve().parents[1] / "cocoeval" / "notebooks"  # package data

PARAMS = '''params_file: str = "../../params/demo.yaml"  # params file of the run to analyse (relative to this notebook)
run_dir: str = ""  # run directory; empty: the one the params file names
judge: str = ""  # judge shown in figures and text; empty: the first LLM judge of the run
resamples: int = 1000  # bootstrap resamples over instances
seed: int = 0  # bootstrap seed
min_n: int = 10  # intervals and tests need at least this many instances; fewer are shown as "n too small"
correction: str = "bh"  # over/under-production verdicts corrected over behaviours x setups: "bh", "holm" or "none"
figures_dir: str = ""  # figures go to <figures_dir>/<notebook name>/; empty: the run's figures/ folder
run_if_missing: bool = False  # run the params file first when its run directory does not exist'''

EXTRA_PARAMS = {"07_participants": '''
participants_datasets: str = ""  # comma-separated datasets; empty: the participants_top datasets whose participant counts vary most
participants_top: int = 2  # how many datasets when none are named (the paper's Table 12 uses two)
participants_count: str = "conversation"  # "conversation": participants listed in M; "window": distinct speakers in x + r'''}

OPEN = '''from IPython.display import Markdown, display

from cocoeval import rq
from cocoeval.notebook import open_run

ctx = open_run(params_file, run_dir=run_dir or None, judge=judge or None, run_if_missing=run_if_missing)
display(Markdown(ctx.summary_markdown()))'''

VIEW = '''viewer = ctx.viewer()
chart = ctx.linked_chart(viewer{setups})
display(chart) if chart is not None else None
viewer.widget'''

BOOKS = {
    "00_build_benchmark": (
        "Build and inspect the benchmark",
        "What does the benchmark contain? Counts per dataset, turn lengths and speakers per instance, and "
        "what the builder skipped and why.",
        '''from cocoeval.notebook import open_run
from cocoeval.rq import bench_summary

ctx = open_run(params_file, run_dir=run_dir or None, judge=judge or None, run_if_missing=run_if_missing)
summary = bench_summary(ctx.run.instances, ctx.experiment.bench_dir())
ctx.show(summary, "00_build_benchmark", figures_dir)''',
        ""),
    "01_rq1_human": ("RQ1: humans", "How often do humans show each inconsistent or uncollaborative behaviour in "
                     "multi-party conversations? (Human–AI chat instances are left out and counted; they are the "
                     "generalization notebook's subject.)",
                     "answer = rq.human_rates(ctx.frames, ctx.judge, resamples, seed, min_n=min_n, correction=correction)", ""),
    "02_rq2_vanilla": ("RQ2: vanilla prompting", "Do LLMs prompted plainly to continue the conversation show "
                       "these behaviours as often as the humans did, on the same instances?",
                       'setups = rq.pick_setups(ctx.run, prompt="vanilla", kind="multiparty")\n'
                       'answer = rq.compare_to_humans(ctx.frames, ctx.judge, setups, "RQ2 — Vanilla prompting vs humans", resamples, seed, min_n=min_n, correction=correction, run=ctx.run)',
                       ", setups=setups"),
    "03_rq3_prompting": ("RQ3: taxonomy-guided prompting", "Does telling the simulator about the behaviours (and "
                         "how often the history shows them) change them, per model and per turns per call "
                         "(taxonomy − vanilla, paired per instance)? And how far is each from the humans?",
                         'ctx.show(rq.prompting(ctx.frames, ctx.run, ctx.judge, resamples, seed, min_n=min_n, correction=correction), "03_rq3_prompting", figures_dir)\n'
                         'setups = rq.pick_setups(ctx.run, kind="multiparty", prompt=lambda p: p in ("vanilla", "taxonomy", "copy_then_continue"))\n'
                         'answer = rq.compare_to_humans(ctx.frames, ctx.judge, setups, "RQ3 — Each prompt vs the humans", resamples, seed, min_n=min_n, correction=correction, run=ctx.run)',
                         ", setups=setups"),
    "04_rq4_sft": ("RQ4: fine-tuned simulators", "Do simulators fine-tuned on human continuations (exported with "
                   "`cocoeval sft-export`) behave more like humans? Fine-tuned setups are those whose model is a "
                   "fine-tuned id (`ft:`).",
                   'from cocoeval.bench import load_instances\nfrom cocoeval.sft import sft_examples\n\n'
                   'train = load_instances(ctx.experiment.bench_dir(), "train")\n'
                   'display(Markdown(f"{len(train)} train instances give {len(sft_examples(train, 5))} SFT examples per k "\n'
                   '                 "(export: `cocoeval sft-export BENCH --out sft/`)."))\n'
                   'setups = rq.pick_setups(ctx.run, model=lambda m: ":ft:" in m or "/ft:" in m)\n'
                   'answer = rq.compare_to_humans(ctx.frames, ctx.judge, setups, "RQ4 — Fine-tuned simulators vs humans", resamples, seed, min_n=min_n, correction=correction, run=ctx.run)',
                   ", setups=setups or None"),
    "05_rq5_turns_per_call": ("RQ5: turns per call", "Does generating 1, 5 or 30 turns per call change the "
                              "behaviours? Compared within each model × prompt, only between the k values that "
                              "model has (never pooled across models or prompts).",
                              "answer = rq.by_turns_per_call(ctx.frames, ctx.run, ctx.judge, resamples, seed, min_n=min_n, correction=correction)", ""),
    "06_generalization": ("Human–AI generalization", "When an LLM simulates the *user* of a chatbot (one turn per "
                          "call), are its user turns as inconsistent/uncollaborative as real users'? Only user turns "
                          "are judged.",
                          'setups = rq.pick_setups(ctx.run, kind="human_ai")\n'
                          'answer = rq.compare_to_humans(ctx.frames, ctx.judge, setups, "Simulated users vs real users", resamples, seed, min_n=min_n, correction=correction)',
                          ", setups=setups or None"),
    "07_participants": ("Participants (D.4, Table 12)", "Do behaviour counts change with the number of "
                        "participants, in human conversations and in every simulator setup? Per dataset, by default "
                        "on the two datasets whose participant counts vary most, as the paper does.",
                        'chosen = [x.strip() for x in participants_datasets.split(",") if x.strip()] or None\n'
                        'answer = rq.participants(ctx.frames, ctx.judge, ctx.run, datasets=chosen, top=participants_top,\n'
                        '                         count=participants_count, min_n=min_n, correction=correction)', ""),
    "08_agreement": ("Judge–human agreement", "Do the LLM judges agree with human annotators (leave-one-out "
                     "Spearman, one-sided bootstrap)? Add human labels with the annotator below or with "
                     "`cocoeval annotate-export` / `annotate-import`.",
                     "answer = rq.agreement_answer(ctx.frames, resamples, seed, min_n=min_n)", ""),
    "09_explore": ("Explore a run", "Browse any run: pick instances, setups, behaviours; click a bar to list the "
                   "turns behind it; annotate a target yourself.",
                   'from cocoeval.report import write_report\n\nrep = write_report(ctx.run_dir, ctx.figures_path(figures_dir, "09_explore"), judge=ctx.judge, resamples=resamples, seed=seed,\n                   min_n=min_n, correction=correction)\n'
                   'display(Markdown(f"Report with {len(rep[\'figures\'])} figures and {len(rep[\'tables\'])} tables in `{rep[\'out\']}`."))\n'
                   "answer = rq.paper_tables(ctx.frames, ctx.run, ctx.judge, resamples, seed, min_n=min_n) if ctx.judge else None",
                   ""),
    "10_judge_free": ("Judge-free statistics", "Measured on the turns themselves, with no model and no judge: "
                      "how long are the turns, how evenly do the participants speak, how often does the speaker "
                      "change, how much is repeated, how varied is the wording, are questions asked and answered, "
                      "how many turns are backchannels, how close is the talk to the goals? The human reference "
                      "against every setup, paired over instances; and a sanity check of each judge against the "
                      "closest statistic. Definitions: `cocoeval/convstats.py` and the README.",
                      "from cocoeval.rq_free import judge_free\n\n"
                      "answer = judge_free(ctx.run, ctx.frames, resamples, seed, min_n=min_n, correction=correction)",
                      None),
}

VIEW_ONLY = '''viewer = ctx.viewer()  # each column ends with its judge-free statistics
viewer.widget'''

ANNOTATE = '''annotator = ctx.annotator()
annotator.widget if annotator else None'''


def notebook(name: str, title: str, question: str, analysis: str, view: str | None) -> nbf.NotebookNode:
    nb = nbf.v4.new_notebook()
    cells = [nbf.v4.new_markdown_cell(
        f"# {title}\n\n**Question.** {question}\n\nThe answer below is computed from the run's data "
        "(no conclusion is written in advance). Run headless with papermill, e.g. "
        f"`papermill cocoeval/notebooks/{name}.ipynb out/{name}.ipynb --cwd cocoeval/notebooks "
        "-p params_file ../../params/paper.yaml`, or every notebook with `cocoeval notebooks PARAMS --out DIR`."),
        nbf.v4.new_code_cell(PARAMS + EXTRA_PARAMS.get(name, ""), metadata={"tags": ["parameters"]})]
    if name == "00_build_benchmark":
        cells.append(nbf.v4.new_code_cell(analysis))
    else:
        cells.append(nbf.v4.new_markdown_cell("## The run"))
        # the rq import only where the answer uses it (generated cells are linted: tests/test_notebooks.py)
        cells.append(nbf.v4.new_code_cell(OPEN if "rq." in analysis else OPEN.replace("from cocoeval import rq\n", "")))
        cells.append(nbf.v4.new_markdown_cell("## The answer"))
        cells.append(nbf.v4.new_code_cell(analysis + f'\nif answer is not None:\n    ctx.show(answer, "{name}", figures_dir)'))
        cells.append(nbf.v4.new_markdown_cell("## The conversations behind the numbers\n\nPick an instance and "
                                              "setups; turns carry the behaviours the judge found (evidence on hover)"
                                              + (", and each column ends with its judge-free statistics." if view is None
                                                 else ". Click a bar of the chart to list the turns behind it.")))
        cells.append(nbf.v4.new_code_cell(VIEW_ONLY if view is None else VIEW.format(setups=view)))
        if name in ("08_agreement", "09_explore"):
            cells.append(nbf.v4.new_markdown_cell("## Annotate\n\nPick a target, label its turns and scores; Save "
                                                  "writes your rows for that target to `annotations.csv` in the run "
                                                  "directory (saving again replaces them; import them with "
                                                  "`cocoeval annotate-import`)."))
            cells.append(nbf.v4.new_code_cell(ANNOTATE))
    for i, cell in enumerate(cells):  # stable ids: regenerating changes only what changed
        cell["id"] = f"{name[:2]}-{i:02d}"
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Write the notebooks (default: cocoeval/notebooks/, the package data).")
    ap.add_argument("--out", type=Path, default=OUT, help="folder to write them to (the tests compare a copy)")
    out = ap.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    for name, (title, question, analysis, view) in BOOKS.items():
        nbf.write(notebook(name, title, question, analysis, view), out / f"{name}.ipynb")


if __name__ == "__main__":
    main()
