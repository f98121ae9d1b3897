"""Every notebook executes headlessly with papermill on the offline demo params; notebooks in
the repository carry no outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from cocoeval.analysis.charts import VEGALITE_V5_MIME
from cocoeval.notebooks.context import EMBED_OPTIONS

from ..conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebooks_are_committed_without_outputs():
    from cocoeval.analysis.analyses import notebooks

    assert [p.stem for p in NOTEBOOKS] == list(notebooks())  # one per notebook of the registry, no other
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{p.name} carries outputs"


def test_each_notebook_has_one_documented_parameters_cell():
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1, p.name
        lines = [x for x in params[0].source.splitlines() if x.strip()]
        assert any(x.startswith("params_file: str = ") for x in lines)
        for x in lines:  # typed value with a trailing help comment
            assert ": " in x.split("=")[0] and "  # " in x, (p.name, x)


def test_notebooks_are_what_the_generator_writes_and_their_code_lints(tmp_path):
    """The committed notebooks are the generator's output (nobody edits them by hand), and
    their code cells, generated from Python strings, pass ruff (pyflakes, pycodestyle, bugbear,
    pyupgrade; E402 and B018 are a notebook's ordinary imports mid-way and bare display values)."""
    gen = subprocess.run(
        [sys.executable, "-m", "cocoeval.notebooks.generate", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert gen.returncode == 0, gen.stderr
    for p in NOTEBOOKS:
        assert (tmp_path / p.name).read_text() == p.read_text(), f"{p.name}: run python -m cocoeval.notebooks.generate"
        code = "\n\n".join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")
        (tmp_path / f"{p.stem}.py").write_text(code + "\n")
    ruff = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--isolated",
            "--line-length",
            "120",
            "--select",
            "E,F,W,B,UP",
            "--ignore",
            "E402,B018,E501",
            "--target-version",
            "py311",
            *sorted(str(x) for x in tmp_path.glob("*.py")),
        ],
        capture_output=True,
        text=True,
    )
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr


@pytest.fixture(scope="session")
def demo_run():
    """The offline demo run (local model); made once, then served from the call cache."""
    run_dir = ROOT / "runs" / "demo"
    manifest = run_dir / "manifest.json"
    if not (
        manifest.exists()
        and json.loads(manifest.read_text()).get("status") == "complete"
        and (run_dir / "judgments").exists()
    ):
        from ..llm.test_llm_local import HAVE_LOCAL

        if not HAVE_LOCAL:
            pytest.skip("the demo run needs the local model (make install-local)")
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "cocoeval",
                "run",
                str(ROOT / "params" / "demo.yaml"),
                "--no-progress",
                "--allow-invalid",
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert out.returncode == 0, out.stderr[-2000:]
    return run_dir


@pytest.mark.timeout(3600)  # the first one waits for the demo run (minutes on two cores)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(demo_run, path, tmp_path):
    import papermill as pm

    out = tmp_path / path.name
    pm.execute_notebook(
        str(path),
        str(out),
        cwd=str(path.parent),
        kernel_name="python3",
        progress_bar=False,
        parameters={
            "params_file": str(ROOT / "params" / "demo.yaml"),
            "run_dir": str(demo_run),
            "figures_dir": str(tmp_path / "figures"),
            "resamples": 200,
        },
    )
    nb = nbformat.read(out, as_version=4)
    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert "Traceback" not in text
    if path.stem != "00_build_benchmark":
        assert "Invalid continuations and judgments" in text  # the run summary with invalid rates
    if path.stem in ("01_rq1_human", "02_rq2_vanilla", "05_rq5_turns_per_call"):
        assert list((tmp_path / "figures" / path.stem).glob("*.png")), "figures written"
    # each figure shown once, as a Vega-Lite 5 spec the frontend draws (no widget, no JavaScript);
    # the one widget chart is the linked Figure 3 (its JavaScript bundle is in the widget state)
    shown = [o for c in nb.cells for o in c.get("outputs", []) if VEGALITE_V5_MIME in o.get("data", {})]
    saved = list((tmp_path / "figures" / path.stem).glob("*.png"))  # show() displays and saves each chart
    assert len(shown) == len(saved)
    if path.stem == "09_explore":  # its report in a folder of its own, its figures never the notebook's
        report = tmp_path / "figures" / path.stem / "report"
        assert (report / "index.md").exists() and len(list(report.glob("*.png"))) > len(shown)
        both = [p.name for p in saved if (report / p.name).exists()]
        assert both, "the report draws figures the notebook shows too (Figure 3)"
        for name in both:  # the report's keep their title (with the judge); the notebook's are its own
            ours, its = (
                json.loads((d / name.replace(".png", ".vl.json")).read_text(encoding="utf-8"))
                for d in (report, tmp_path / "figures" / path.stem)
            )
            assert ours != its and "(" in json.dumps(ours.get("title", "")), (name, ours.get("title"))
    for o in shown:
        assert o["data"][VEGALITE_V5_MIME]["$schema"].endswith("/vega-lite/v5.json")
        assert o["metadata"][VEGALITE_V5_MIME]["embed_options"] == EMBED_OPTIONS and o["data"]["text/plain"]
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    linked = "ctx.linked_chart(" in "".join(c.source for c in nb.cells if c.cell_type == "code")
    assert sum(w["model_name"] == "AnyModel" for w in state.values()) <= int(linked), "only the linked chart"
    assert out.stat().st_size < 2_000_000
