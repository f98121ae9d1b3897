"""Write the notebooks (without outputs) from the analysis registry:
``python -m cocoeval.notebooks.generate`` in a checkout writes them to its ``notebooks/``.

One notebook per ``Notebook`` of the analysis registry (``cocoeval/analysis/analyses.py``), showing
the answers of the analyses registered to it. They live in the checkout's top-level ``notebooks/``,
where a researcher opens them, and the wheel ships that folder as the package data
``cocoeval.notebooks.shipped`` (``cocoeval notebooks PARAMS --copy DIR`` copies them out).

Each notebook: one tagged ``parameters`` cell (typed values with a ``# help`` comment each),
narrative markdown, and glue code only; the logic lives in ``cocoeval``."""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

from cocoeval.analysis.analyses import Analysis, Notebook, notebooks

PARAMS = """params_file: str = "../params/demo.yaml"  # params file of the run to analyse (relative to this notebook)
run_dir: str = ""  # run directory; empty: the one the params file names
judge: str = ""  # judge shown in figures and text; empty: the first LLM judge of the run
resamples: int = 1000  # bootstrap resamples over instances
seed: int = 0  # bootstrap seed
min_n: int = 10  # intervals and tests need at least this many instances; fewer are shown as "n too small"
correction: str = "bh"  # over/under-production verdicts corrected over behaviours x setups: "bh", "holm" or "none"
figures_dir: str = ""  # figures go to <figures_dir>/<notebook name>/; empty: the run's figures/ folder
run_if_missing: bool = False  # run the params file first when its run directory does not exist"""

OPEN = """from IPython.display import Markdown, display

from cocoeval.notebooks import open_run

ctx = open_run(params_file, run_dir=run_dir or None, judge=judge or None, run_if_missing=run_if_missing)
display(Markdown(ctx.summary_markdown()))"""

OPEN_ONLY = """from cocoeval.notebooks import open_run

ctx = open_run(params_file, run_dir=run_dir or None, judge=judge or None, run_if_missing=run_if_missing)"""

VIEW = """viewer = ctx.viewer()
chart = ctx.linked_chart(viewer, answer)  # Figure 3 of the setups the answer compares
display(chart) if chart is not None else None
viewer.widget"""

VIEW_ONLY = """viewer = ctx.viewer()  # each column ends with its judge-free statistics
viewer.widget"""

ANNOTATE = """annotator = ctx.annotator()
annotator.widget if annotator else None"""

WAIT = "figures = ctx.wait_for_figures()  # the figures shown above are written in a background process: wait for them"


def answers(nb: Notebook, shown: list[Analysis]) -> str:
    """The code that computes and shows each analysis registered to the notebook."""
    lines = [nb.prelude + "\n"] if nb.prelude else []
    call = "answer = ctx.analysis("
    for a in shown:
        args = [
            f'"{a.name}", resamples, seed, min_n=min_n, correction=correction',
            *(f"{o}={o}" for o in nb.option_names),
        ]
        lines.append(call + (",\n" + " " * len(call)).join(args) + ")")
        lines.append(f'ctx.show(answer, "{nb.name}", figures_dir)')
    return "\n".join(lines)


def notebook(nb: Notebook, shown: list[Analysis]) -> nbf.NotebookNode:
    """One notebook, from its registry entry (``cocoeval.analysis.analyses``)."""
    name = nb.name
    node = nbf.v4.new_notebook()
    cells = [
        nbf.v4.new_markdown_cell(
            f"# {nb.title}\n\n**Question.** {nb.question}\n\nThe answer below is computed from the run's data "
            "(no conclusion is written in advance). Run headless with papermill, e.g. "
            f"`papermill notebooks/{name}.ipynb out/{name}.ipynb --cwd notebooks "
            "-p params_file ../params/paper.yaml`, or every notebook with `cocoeval notebooks PARAMS --out DIR`."
        ),
        nbf.v4.new_code_cell("\n".join([PARAMS, *nb.params]), metadata={"tags": ["parameters"]}),
    ]
    if not nb.run_summary:
        cells.append(nbf.v4.new_code_cell(OPEN_ONLY + "\n" + answers(nb, shown)))
    else:
        cells.append(nbf.v4.new_markdown_cell("## The run"))
        cells.append(nbf.v4.new_code_cell(OPEN))
        cells.append(nbf.v4.new_markdown_cell("## The answer"))
        cells.append(nbf.v4.new_code_cell(answers(nb, shown)))
        plain = nb.viewer == "plain"
        cells.append(
            nbf.v4.new_markdown_cell(
                "## The conversations behind the numbers\n\nPick an instance and "
                "setups; turns carry the behaviours the judge found (evidence on hover)"
                + (
                    ", and each column ends with its judge-free statistics."
                    if plain
                    else ". Click a bar of the chart to list the turns behind it."
                )
            )
        )
        cells.append(nbf.v4.new_code_cell(VIEW_ONLY if plain else VIEW))
        if nb.annotate:
            cells.append(
                nbf.v4.new_markdown_cell(
                    "## Annotate\n\nPick an instance and one of its targets (the "
                    "human reference or a setup), label its turns and scores; Save "
                    "writes your rows for that target to `annotations.csv` in the run "
                    "directory (saving again replaces them; import them with "
                    "`cocoeval annotate-import`)."
                )
            )
            cells.append(nbf.v4.new_code_cell(ANNOTATE))
    cells.append(nbf.v4.new_code_cell(WAIT))  # last: the rendering overlaps every cell above
    for i, cell in enumerate(cells):  # stable ids: regenerating changes only what changed
        cell["id"] = f"{name[:2]}-{i:02d}"
    node.cells = cells
    node.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return node


def checkout_folder() -> Path | None:
    """The top-level ``notebooks/`` of the checkout this cocoeval is imported from (None in an
    installed wheel: there is no checkout to write to)."""
    root = Path(__file__).resolve().parents[2]
    return root / "notebooks" if (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir() else None


def write_notebooks(out: Path) -> list[Path]:
    """Every notebook of the registry, written to ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    done = []
    for name, (nb, shown) in notebooks().items():
        nbf.write(notebook(nb, shown), out / f"{name}.ipynb")
        done.append(out / f"{name}.ipynb")
    return done


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m cocoeval.notebooks.generate",
        description="Write the notebooks from the analysis registry (default: the checkout's notebooks/ folder).",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=checkout_folder(),
        help="folder to write them to (default: notebooks/ of this checkout; the tests compare a copy)",
    )
    out = ap.parse_args(argv).out
    if out is None:
        ap.error("no checkout here to write to: give --out DIR")
    print(f"wrote {len(write_notebooks(out))} notebooks to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
