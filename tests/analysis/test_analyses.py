"""The analysis registry: each analysis answers from a Run and Params; the report and the
notebooks are derived from it (a new analysis reaches both with one function and its entry)."""

from __future__ import annotations

import altair as alt
import nbformat
import polars as pl
import pytest

from cocoeval.analysis import analyses, inference, rq
from cocoeval.analysis.analyses import Notebook, Out, Params, ReportSpec
from cocoeval.analysis.answer import Answer
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.report import write_report
from cocoeval.core.errors import ConfigError

from ..conftest import ROOT
from ..sim_helpers import write_run_dir
from .test_rq import FT1, G41, insts, make, mp, reps
from .test_stats import make_run


def _run(*, fine_tuned: bool = True):
    it = [*insts(6, "a"), *insts(6, "b")]
    plan = {"reference": 1, "v1": 3, "t1": 1, "ft": 2}
    js = [reps(i.id, t, n) for i in it for t, n in plan.items() if fine_tuned or t != "ft"]
    setups = [mp(("v1", G41, "vanilla", 1)), mp(("t1", G41, "taxonomy", 1))]
    return make(it, js, *setups, *([mp(("ft", FT1, "vanilla", 1))] if fine_tuned else []))


def test_each_analysis_answers_from_a_run_and_params():
    run = _run()
    p = Params(judge="J", resamples=100, min_n=2)
    rq2 = analyses.compute("rq2", run, p)
    assert rq2.setups == ["v1", "ft"]  # every vanilla multi-party setup; the viewer shows the same ones
    dist = {r["target"]: r["distance"] for r in rq2.tables["distance"].iter_rows(named=True)}
    assert dist == {"v1": pytest.approx(2.0), "ft": pytest.approx(1.0)}  # |3 - 1| and |2 - 1| repetitions
    assert analyses.compute("rq4", run, p).setups == ["ft"]
    assert analyses.compute("rq4", _run(fine_tuned=False), p).setups is None  # none fine-tuned: every setup
    assert analyses.compute("generalization", run, p).setups is None  # no human–AI setup
    assert analyses.compute("paper", run, Params(judge=None)) is None  # nothing to show without a judge
    # the registered analysis is the rq computation, with the run's frames made once when not given
    direct = rq.human_rates(run_frames(run), "J", 100, 0, min_n=2)
    assert analyses.compute("rq1", run, p).tables["human_means"].equals(direct.tables["human_means"])
    # options: a notebook's extra parameters
    only_a = analyses.compute("participants", run, Params(judge="J", min_n=2, options={"participants_datasets": "a"}))
    assert set(only_a.tables["spearman"]["dataset"]) == {"a"}
    with pytest.raises(ConfigError, match="no analysis named 'rq9'"):
        analyses.compute("rq9", run, p)


def test_a_notebook_asks_the_registry_through_its_run_context(tmp_path):
    from cocoeval.notebooks.context import RunContext

    run = _run()
    ctx = RunContext(None, tmp_path, run, run_frames(run), "J")  # type: ignore[arg-type]
    assert ctx.analysis("rq2", 100, min_n=2).setups == ["v1", "ft"]
    only_b = ctx.analysis("participants", min_n=2, participants_datasets="b")  # a notebook's extra parameter
    assert set(only_b.tables["spearman"]["dataset"]) == {"b"}
    assert ctx.show(None, "09_explore") == []  # no answer (no judge): nothing shown


def test_the_registry_refuses_a_name_twice_and_an_undeclared_notebook():
    with pytest.raises(ValueError, match="registered twice"):
        analyses.analysis("rq1", "again")(lambda run, p: None)
    with pytest.raises(ValueError, match="not declared"):
        analyses.analysis("zz_new", "new", notebook="99_nowhere")(lambda run, p: None)
    with pytest.raises(ValueError, match="declared twice"):
        analyses.analysis("zz_new", "new", notebook=Notebook("01_rq1_human", "t", "q"))(lambda run, p: None)
    assert "zz_new" not in analyses.ANALYSES


def test_every_analysis_is_shown_in_a_generated_notebook_or_written_by_the_report():
    for name, (nb, shown) in analyses.notebooks().items():
        path = ROOT / "notebooks" / f"{name}.ipynb"
        code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        assert shown and all(f'ctx.analysis("{a.name}"' in code for a in shown), name
        assert all(f"{o}={o}" in code for o in nb.option_names), name
    shown_nowhere = {a.name for a in analyses.ANALYSES.entries().values() if a.notebook is None and a.report is None}
    assert shown_nowhere == set()
    # the report's own outputs (the behaviour means, the paired comparisons with the humans, the Likert
    # means) are registered analyses too, shown in no notebook
    report_only = {a.name for a in analyses.ANALYSES.entries().values() if a.notebook is None}
    assert report_only == {"behaviour_means", "paired_vs_human", "likert"}


@pytest.fixture
def toy_analysis():
    """A new analysis, registered as docs/extending.md says: one function and its entry."""

    @analyses.analysis(
        "zz_toy",
        "A toy analysis",
        notebook=Notebook(
            "99_toy", "Toy", "How many judgments?", params=("toy_factor: int = 2  # multiplies the count",)
        ),
        report=ReportSpec(
            "paper", other_figures="zz_", tables={"counts": Out("zz_counts", "Toy counts ({judge}); p: {test}")}
        ),
    )
    def toy(run, p):
        f = p.frames_of(run)
        a = Answer("How many judgments?")
        a.tables["counts"] = pl.DataFrame(
            {"target": ["x", "y"], "n": [f.counts.height * p.options.get("toy_factor", 1), 0], "p": [0.01, None]}
        )
        a.charts["bars"] = alt.Chart(a.tables["counts"]).mark_bar().encode(x="target:N", y="n:Q")
        return a

    yield toy
    analyses.ANALYSES.forget("zz_toy")
    del analyses.NOTEBOOKS["99_toy"]


def test_a_new_analysis_reaches_the_report_and_its_notebook(toy_analysis, tmp_path):
    write_run_dir(tmp_path / "run", make_run(), {"status": "complete"})
    rep = write_report(tmp_path / "run", tmp_path / "rep", resamples=50)
    assert "zz_counts" in rep.tables and "zz_bars" in rep.figures
    index = (tmp_path / "rep" / "index.md").read_text()
    assert f"Toy counts (J); p: {inference.describe_test('bh', 1)}" in index  # {judge} and {test} filled in
    assert pl.read_csv(tmp_path / "rep" / "zz_counts.csv")["n"][0] == run_frames(make_run()).counts.height
    from cocoeval.notebooks import generate as gen

    nb, shown = analyses.notebooks()["99_toy"]
    cells = gen.notebook(nb, shown).cells
    code = "\n".join(c.source for c in cells if c.cell_type == "code")
    assert 'ctx.analysis("zz_toy", resamples, seed, min_n=min_n, correction=correction,' in code
    assert "toy_factor=toy_factor" in code and "toy_factor: int = 2" in cells[1].source


def test_rq4_notebook_counts_the_sft_training_set_of_the_params_not_every_train_instance(tmp_path):
    """The RQ4 notebook's first cell counts the SFT examples of the training set the params' sft:
    section chooses (the paper's 1,450 from four datasets; here 10), as cocoeval sft-export does."""
    from types import SimpleNamespace

    from cocoeval.core.jsonio import write_jsonl
    from cocoeval.run import load_params

    from ..simulate.test_sft import train_split

    bench = tmp_path / "bench"
    write_jsonl(bench / "train.jsonl", train_split({"a": (5, 12), "b": (4, 9), "c": (3, 6), "d": (2, 3), "e": (1, 30)}))
    (tmp_path / "p.yaml").write_text("name: p\nbench: bench\nsft: {total: 10, ks: [1, 5], seed: 3}\n")
    shown: list[str] = []
    ctx = SimpleNamespace(experiment=load_params(tmp_path / "p.yaml"))
    exec(analyses.SFT_PRELUDE, {"ctx": ctx, "display": shown.append, "Markdown": str})
    [text] = shown
    assert text.startswith("10 of 60 train instances (from a, b, c, d;")
    assert "10 SFT examples at k = 1, 10 SFT examples at k = 5" in text
    assert analyses.NOTEBOOKS["04_rq4_sft"].prelude == analyses.SFT_PRELUDE
