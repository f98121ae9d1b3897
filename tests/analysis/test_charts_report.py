"""Charts via to_dict() (fields, encodings, facets), a PNG for each, and cocoeval report."""

from __future__ import annotations

import json

import polars as pl

from cocoeval.analysis import charts, stats
from cocoeval.analysis.frames import run_frames
from cocoeval.cli import main
from cocoeval.core.jsonio import write_json, write_jsonl

from ..sim_helpers import with_reference_turns, write_run_dir
from .test_stats import TAX, make_run


def _layers(spec):
    inner = spec.get("spec", spec)
    return inner.get("layer", [inner])


def test_behaviour_bars_spec(tmp_path):
    f = run_frames(make_run())
    means = stats.mean_occurrences(f, resamples=200, min_n=2)
    ch = charts.behaviour_bars(means, TAX, judge="J")
    d = ch.to_dict()
    assert d["facet"]["field"] == "panel" and d["columns"] == 3
    bars, err, mark = _layers(d)
    assert bars["mark"]["type"] == "bar" and err["mark"]["type"] == "errorbar"
    enc = bars["encoding"]
    assert enc["y"]["field"] == "mean" and enc["color"]["field"] == "category"
    assert enc["xOffset"]["field"] == "series" and enc["opacity"]["field"] == "series"
    assert err["encoding"]["y"]["field"] == "ci_low" and err["encoding"]["y2"]["field"] == "ci_high"
    # whiskers only where the interval is defined; elsewhere a cross whose tooltip says why
    assert err["transform"] == [{"filter": charts.DEFINED.format(lo="ci_low", hi="ci_high")}]
    assert mark["mark"]["type"] == "point" and mark["mark"]["shape"] == "cross"
    assert mark["transform"][0]["filter"].startswith("!(")
    assert mark["encoding"]["y"]["field"] == "mean"
    # tooltips in words, never a field name with a null (issue #28)
    assert [t["field"] for t in mark["encoding"]["tooltip"]].count("interval") == 1  # once, where the whiskers have it
    assert mark["encoding"]["tooltip"] == enc["tooltip"]  # the bar's, where its interval is undefined
    assert not any(
        t["field"] in ("ci_low", "ci_high", "ci_note") for t in [*mark["encoding"]["tooltip"], *enc["tooltip"]]
    )
    # the series legend draws squares in a category colour, as the bars are drawn
    legend = enc["opacity"]["legend"]
    assert legend["symbolType"] == "square" and legend["symbolFillColor"] == charts.CATEGORY_COLOURS["inconsistent"]
    assert d["spec"]["width"] + 170 <= charts.NOTEBOOK_WIDTH  # one panel fits the notebook's width
    assert enc["x"]["sort"][0] == "Repetition" and len(enc["x"]["sort"]) == 10
    values = d["data"]["values"]
    assert {v["series"] for v in values} == {"simulated", charts.HUMAN}
    assert {v["panel"] for v in values} == {"sim"}
    assert len(values) == 2 * 10  # aggregated: one row per series and behaviour, not per turn
    undefined = [v for v in values if v["ci_low"] is None]
    assert undefined and all(v["ci_high"] is None and v["ci_note"] for v in undefined)  # never shown
    assert any(v["ci_low"] is not None for v in values)
    paths = charts.save(ch, tmp_path / "fig3")
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[1].read_text().startswith("<svg")
    again = charts.save(ch.to_dict(), tmp_path / "fig3_spec")  # a spec made for display: the same files
    assert again[0].read_bytes() == paths[0].read_bytes()
    assert (tmp_path / "fig3_spec.vl.json").read_bytes() == (tmp_path / "fig3.vl.json").read_bytes()
    # n = 6 under the default minimum: no whisker at all, every bar gets its cross
    small = charts.behaviour_bars(stats.mean_occurrences(f, resamples=200), TAX, judge="J").to_dict()
    assert all(v["ci_low"] is None and v["ci_note"] == "n too small (n=6 < 10)" for v in small["data"]["values"])
    assert all(v["interval"] == "n too small for an interval (n = 6)" for v in small["data"]["values"])
    assert {v["interval"] for v in values if v["ci_low"] is not None} == {
        f"95% CI {v['ci_low']:.2f}–{v['ci_high']:.2f}, n = {v['n']}" for v in values if v["ci_low"] is not None
    }
    assert (
        charts.save(
            charts.behaviour_bars(stats.mean_occurrences(f, resamples=200), TAX, judge="J"), tmp_path / "small"
        )[0]
        .stat()
        .st_size
        > 1000
    )


def test_other_charts(tmp_path):
    f = run_frames(make_run())
    lk = stats.likert_means(f, resamples=100)
    d = charts.likert_chart(lk).to_dict()
    assert d["facet"]["column"]["field"] == "score"
    by_ds = stats.mean_occurrences(f, by=("judge", "target", "dataset"), resamples=100)
    h = charts.dataset_heatmap(by_ds, TAX).to_dict()
    assert _layers(h)[0]["mark"]["type"] == "rect" and _layers(h)[0]["encoding"]["color"]["field"] == "mean"
    per_conv = pl.DataFrame({"dataset": ["d"] * 4, "n_participants": [2, 3, 4, 5], "total": [1, 2, 2, 3]})
    p = charts.participants_chart(per_conv).to_dict()
    assert any("regression" in str(layer.get("transform", "")) for layer in p["layer"])
    ag = pl.DataFrame(
        {
            "comparison": ["inter-human", "J1", "J2"],
            "item": ["all"] * 3,
            "rho": [0.5, -0.1, 0.3],
            "p5": [0.2, -0.4, None],
            "p95": [0.7, 0.2, None],
            "significant": [True, False, None],
            "ci_note": [None, None, "n too small (n=4 < 10)"],
            "n": [30, 30, 4],
        }
    )
    a = charts.agreement_chart(ag).to_dict()
    bars, err, mark = _layers(a)
    assert bars["encoding"]["x"]["field"] == "rho" and err["encoding"]["x"]["field"] == "p5"
    assert bars["encoding"]["y"]["field"] == "comparison" and a["facet"]["column"]["field"] == "item"
    assert "isValid(datum.p5)" in err["transform"][0]["filter"] and mark["encoding"]["x"]["field"] == "rho"
    lk_small = stats.likert_means(f, resamples=100)  # n = 6 < 10: crosses only
    lk_layers = _layers(charts.likert_chart(lk_small).to_dict())
    assert [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in lk_layers] == [
        "errorbar",
        "point",
        "point",
    ]
    assert lk_small["ci_low"].is_null().all() and lk_small["ci_note"].str.starts_with("n too small").all()
    for name, ch in {
        "likert": charts.likert_chart(lk),
        "heat": charts.dataset_heatmap(by_ds, TAX),
        "part": charts.participants_chart(per_conv),
        "agree": charts.agreement_chart(ag),
    }.items():
        png, svg = charts.save(ch, tmp_path / name)
        assert png.stat().st_size > 1000 and svg.stat().st_size > 1000


def _write_run(d):
    write_run_dir(d, make_run(), {"status": "complete"})


def test_report_command(tmp_path, capsys):
    _write_run(tmp_path / "run")
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep"), "--resamples", "200"]) == 0
    out = tmp_path / "rep"
    index = (out / "index.md").read_text()
    for name in ("figure3_behaviours", "likert", "dataset_heatmap", "participants"):
        assert (out / f"{name}.png").exists() and (out / f"{name}.svg").exists() and name in index
    for name in (
        "behaviour_means",
        "likert_means",
        "invalid_rates",
        "paired_vs_human",
        "profile_distance",
        "detections",
        "behaviour_means_by_dataset",
        "participants",
    ):
        assert (out / f"{name}.csv").exists() and (out / f"{name}.md").exists() and f"{name}.csv" in index
    # listed in the order they are presented in, whatever the order they are computed in (the
    # behaviour means and their figures are computed first, for the rendering workers)
    judged = index.split("## Judge-based statistics")[1]
    listed = [
        judged.index(f"**{n}**")
        for n in (
            "figure3_behaviours",
            "dataset_heatmap",
            "likert",
            "invalid_rates",
            "behaviour_means",
            "behaviour_means_by_dataset",
            "detections",
            "detection_totals",
            "paired_vs_human",
            "profile_distance",
        )
    ]
    assert listed == sorted(listed)
    inv = pl.read_csv(out / "invalid_rates.csv")
    assert inv.filter(pl.col("target") == "sim2")["invalid"].sum() == 2  # its continuation and its judgment
    assert "| judge |" in (out / "behaviour_means.md").read_text()
    means = pl.read_csv(out / "behaviour_means.csv")
    assert {"judgments_invalid_rate", "continuations_invalid_rate"} <= set(means.columns)
    assert means.filter(pl.col("target") == "sim")["judgments_invalid_rate"].unique().to_list() == [0.0]
    # deterministic under the seed
    main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep2"), "--resamples", "200"])
    assert (out / "behaviour_means.csv").read_text() == (tmp_path / "rep2" / "behaviour_means.csv").read_text()
    assert json.dumps(sorted(p.name for p in out.iterdir())) == json.dumps(
        sorted(p.name for p in (tmp_path / "rep2").iterdir())
    )


def test_report_writes_the_papers_figures_and_tables(tmp_path):
    from .test_rq import G41, OPUS, insts, make, mp, reps
    from .test_stats import overall

    it = [*insts(12, "a"), *insts(12, "b")]
    plan = {"reference": 1, "v1": 3, "t1": 4, "v5": 2, "o1": 0, "o5": 1}
    js = [reps(i.id, t, n) for i in it for t, n in plan.items()]
    js += [overall(i.id, t, "J", 5 + (t == "v1"), 6) for i in it for t in ("reference", "v1")]
    run = make(
        it,
        js,
        mp(("v1", G41, "vanilla", 1)),
        mp(("t1", G41, "taxonomy", 1)),
        mp(("v5", G41, "vanilla", 5)),
        mp(("o1", OPUS, "vanilla", 1)),
        mp(("o5", OPUS, "vanilla", 5)),
    )
    d = tmp_path / "run"
    write_json(d / "manifest.json", {"status": "complete", **run.manifest.model_dump(exclude_unset=True)})
    write_jsonl(d / "instances.jsonl", run.instances)
    write_jsonl(d / "judgments" / "J.jsonl", js)
    for name, cs in with_reference_turns(run).continuations.items():
        write_jsonl(d / "continuations" / f"{name}.jsonl", cs)
    assert main(["report", str(d), "--out", str(tmp_path / "rep"), "--resamples", "100"]) == 0
    out = tmp_path / "rep"
    index = (out / "index.md").read_text()
    for name in (
        "table4",
        "table11",
        "table12",
        "participants",
        "participant_variance",
        "rq1_human_means",
        "rq3_contrasts",
        "rq5_k_pairs",
        "rq5_k_means",
        "rq5_distance_by_k",
    ):
        assert (out / f"{name}.csv").exists() and (out / f"{name}.md").exists() and f"{name}.csv" in index, name
    for name in (
        "figure3_human",
        "figure3_openai-gpt-4.1-vanilla",
        "figure3_openai-gpt-4.1-taxonomy",
        "figure3_anthropic-claude-opus-4-vanilla",
        "rq3_openai-gpt-4.1",
        "rq5_openai-gpt-4.1-vanilla",
        "rq5_anthropic-claude-opus-4-vanilla",
        "table12",
        "participants",
        "rq1_human_behaviours",
    ):
        assert (out / f"{name}.png").exists() and (out / f"{name}.svg").exists() and name in index, name
    t4 = pl.read_csv(out / "table4.csv")
    assert t4["target"].to_list() == ["reference", "v1"] and t4["consistency_mean"].to_list() == [5.0, 6.0]
    k = pl.read_csv(out / "rq5_k_pairs.csv").filter(pl.col("behaviour") == "repetition")
    assert sorted(zip(k["setup_a"], k["setup_b"], k["diff"], strict=True)) == [("o1", "o5", 1.0), ("v1", "v5", -1.0)]
    assert "| dataset | target |" in (out / "table11.md").read_text()


def test_renderer_processes_write_the_figures_and_raise_a_failed_one(tmp_path):
    """The rendering workers (processes: vl-convert holds the GIL) write each figure's PNG, SVG
    and spec; a spec vl-convert refuses fails ``close`` (and so the report) with its error."""
    import altair as alt
    import pytest

    from cocoeval.analysis import render

    spec = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q").to_json()
    with render.Renderer(2) as r:
        for i in range(3):
            r.submit(spec, tmp_path / f"f{i}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"f{i}{s}" for i in range(3) for s in (".png", ".svg", ".vl.json")
    )
    r = render.Renderer(1)
    r.submit('{"mark": "nonsense-mark", "data": {"values": []}}', tmp_path / "bad")
    with pytest.raises(
        render.RenderError, match=r"figure .*bad failed to render: .*Vega-Lite to Vega conversion failed"
    ):
        r.close()


def test_renderer_workers_leave_no_process_behind(tmp_path):
    """Closed, the workers are gone and no other child was started (a ``multiprocessing`` pool
    leaves a resource tracker that ignores SIGTERM: a Jupyter kernel with one waits at shutdown
    until its client kills it); a worker that dies is said at ``close``, not hidden."""
    import psutil
    import pytest

    from cocoeval.analysis import render

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    r = render.Renderer(2)
    assert len({p.pid for p in me.children(recursive=True)} - before) == 2
    r.submit('{"mark": "point", "data": {"values": [{"x": 1}]}}', tmp_path / "a")
    r.close()
    assert (tmp_path / "a.svg").is_file() and {p.pid for p in me.children(recursive=True)} <= before
    r = render.Renderer(1)
    r._procs[0].kill()
    r._procs[0].wait()
    r.submit('{"mark": "point", "data": {"values": []}}', tmp_path / "b")  # to a dead worker: no error yet
    with pytest.raises(render.RenderError, match="exit status"):
        r.close()


def test_a_worker_whose_caller_ended_without_waiting_exits_quietly(tmp_path):
    """A caller that ends without ``close`` (a notebook kernel shut down before its last cell)
    leaves its workers a broken answer pipe: each renders what it was given and exits, status 0,
    with nothing on stderr (no traceback in the terminal that runs Jupyter)."""
    import subprocess
    import sys

    from cocoeval.analysis import render

    render.spec_path(tmp_path / "a").write_text('{"mark": "point", "data": {"values": [{"x": 1}]}}', encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cocoeval.analysis.render"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=render.process_env(),
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the caller is gone: nobody reads the answer
    proc.stdin.write(json.dumps({"base": str(tmp_path / "a"), "scale": 1.0}) + "\n")
    proc.stdin.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and err == ""
    assert (tmp_path / "a.svg").is_file() and (tmp_path / "a.png").is_file()


def test_charts_checked_once_give_the_same_spec_and_still_raise_when_written():
    """``checked_once`` (every analysis's charts are built in it) leaves out Altair's check of each
    part at its creation: the same spec, and a chart that breaks the schema still raises, when written."""
    import altair as alt
    import jsonschema
    import pytest

    from cocoeval.analysis import analyses
    from cocoeval.analysis.registry import Params

    f = run_frames(make_run())
    means = stats.mean_occurrences(f, resamples=200, min_n=2)
    plain = charts.behaviour_bars(means, TAX, judge="J").to_json()
    with charts.checked_once():
        assert not alt.utils.schemapi.DEBUG_MODE
        once = charts.behaviour_bars(means, TAX, judge="J")
        bad = alt.Chart(alt.Data(values=({"a": 1},))).mark_bar().encode(x=alt.X("a:Q", bin=alt.BinParams(maxbins="x")))
    assert alt.utils.schemapi.DEBUG_MODE  # back as it was
    assert once.to_json() == plain
    with pytest.raises(jsonschema.ValidationError):
        bad.to_dict()
    ans = analyses.compute("rq1", make_run(), Params(judge="J", resamples=50, min_n=2))
    assert ans is not None and ans.charts and alt.utils.schemapi.DEBUG_MODE
    with pytest.raises(jsonschema.ValidationError):  # made outside the block, a bad part raises at its creation
        alt.BinParams(maxbins="x")


def test_a_report_in_a_process_that_read_the_run_does_not_read_it_again(tmp_path, monkeypatch):
    """``write_report`` takes the run through ``frames.open_run_dir``: in a notebook kernel that
    opened the run (notebook 09 writes the report) it is not read again while its files are
    unchanged; a changed file is read anew."""
    from cocoeval.analysis.frames import open_run_dir
    from cocoeval.analysis.report import write_report
    from cocoeval.analysis.store import RunStore

    _write_run(tmp_path / "run")
    first = open_run_dir(tmp_path / "run")
    reads = []
    real = RunStore.open.__func__

    def counted(cls, path, **kw):
        reads.append(path)
        return real(cls, path, **kw)

    monkeypatch.setattr(RunStore, "open", classmethod(counted))
    a = write_report(tmp_path / "run", tmp_path / "a", resamples=50)
    assert reads == [] and open_run_dir(tmp_path / "run") is first
    manifest = tmp_path / "run" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"complete"', '"complete" '))  # changed: another size
    b = write_report(tmp_path / "run", tmp_path / "b", resamples=50)
    # read anew (opened, read whole, its frames kept), then opened again: the records go
    assert len(reads) == 2 and open_run_dir(tmp_path / "run") is not first
    assert (tmp_path / "a" / "behaviour_means.csv").read_bytes() == (
        tmp_path / "b" / "behaviour_means.csv"
    ).read_bytes()
    assert sorted(a.figures) == sorted(b.figures)


def test_open_run_dir_keeps_the_last_runs_read():
    """``open_run_dir`` keeps the last ``OPEN_RUNS`` run directories read, not every one a long
    kernel or a program reporting on many runs has read."""
    import tempfile
    from pathlib import Path

    from cocoeval.analysis import frames, store

    with tempfile.TemporaryDirectory() as tmp:
        dirs = [Path(tmp) / f"run{i}" for i in range(store.OPEN_RUNS + 1)]
        for d in dirs:
            _write_run(d)
        runs = [frames.open_run_dir(d) for d in dirs]
        kept = [k for k in store._CACHE if k[0] == "open" and k[1].startswith(tmp)]
        assert kept == [("open", str(d.resolve())) for d in dirs[1:]]
        assert frames.open_run_dir(dirs[-1]) is runs[-1]  # kept: the same object
        assert frames.open_run_dir(dirs[0]) is not runs[0]  # dropped: read again


def test_chart_builders_hand_altair_no_shorthand_to_wrap(tmp_path, monkeypatch):
    """Every encoding of the report's charts is given as its channel class (``alt.X("a:Q")``,
    ``alt.Tooltip``, ``alt.ColorValue``), never as a string or dict: Altair wraps those with
    ``from_dict``, which hashes the schema of every one of its classes at each call (6 ms; 154 calls
    were 0.9 s of the paper-shaped report). The specs are the same either way."""
    from altair.utils import schemapi

    from cocoeval.analysis.report import write_report

    from .test_report_same import paper_scale

    run = tmp_path / "run"
    paper_scale().write_paper_run(run, per_dataset=11, chats=3, turns_n=8)
    made = []
    real = schemapi._FromDict.__init__

    def counted(self, *a, **k):
        made.append(1)
        real(self, *a, **k)

    monkeypatch.setattr(schemapi._FromDict, "__init__", counted)
    rep = write_report(run, tmp_path / "rep", resamples=50)
    assert len(rep.figures) > 20 and made == []


def test_unchecked_json_is_to_json_and_leaves_other_data_to_altair():
    """``charts.unchecked_json`` writes ``to_json(validate=False)``'s very text (the report's every
    figure: ``test_report_same``); data it cannot put in itself (a date, a numpy number, data
    given by URL) goes through Altair, and the chart is left as it was."""
    import datetime as dt

    import altair as alt
    import numpy as np

    f = run_frames(make_run())
    means = stats.mean_occurrences(f, resamples=200, min_n=2)
    ch = charts.behaviour_bars(means, TAX, judge="J")
    before = ch.to_json(validate=False)
    assert charts.unchecked_json(ch) == before and ch.to_json(validate=False) == before
    for values in [({"a": dt.date(2026, 1, 2), "b": 1},), ({"a": np.float64(0.5)},), ({"a": [1, 2]},)]:
        c = alt.Chart(alt.Data(values=values)).mark_point().encode(x=alt.X("a:N"))
        assert charts.unchecked_json(c) == c.to_json(validate=False)
    for data in (alt.Data(url="x.json"), alt.Data(values=({"a": 1},), name="named")):
        c = alt.Chart(data).mark_point().encode(x=alt.X("a:N"))
        assert charts.unchecked_json(c) == c.to_json(validate=False)


def test_no_tooltip_of_the_report_shows_a_field_twice(tmp_path):
    """Every tooltip of every figure names each field once (the cross of an undefined interval
    once listed its interval twice)."""
    import json

    from cocoeval.analysis.report import write_report

    from .test_report_same import paper_scale

    paper_scale().write_paper_run(tmp_path / "run", per_dataset=11, chats=3, turns_n=8)
    write_report(tmp_path / "run", tmp_path / "rep", resamples=50)

    def tooltips(node):
        if isinstance(node, dict):
            if isinstance(node.get("tooltip"), list):
                yield node["tooltip"]
            for v in node.values():
                yield from tooltips(v)
        elif isinstance(node, list):
            for v in node:
                yield from tooltips(v)

    specs = sorted((tmp_path / "rep").glob("*.vl.json"))
    seen = [[t.get("field") for t in tip] for p in specs for tip in tooltips(json.loads(p.read_text()))]
    assert len(specs) > 20 and len(seen) > 40
    assert [fields for fields in seen if len(fields) != len(set(fields))] == []


def test_rendering_workers_run_at_a_lower_priority_than_their_caller():
    """Each worker lowers its own priority by ``render.NICE`` as it starts (before loading
    vl-convert): on two cores the caller's statistics are not slowed by the two workers."""
    import os
    import time

    import pytest

    from cocoeval.analysis import render

    if not hasattr(os, "getpriority"):
        pytest.skip("no process priorities on this platform")
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    with render.Renderer(1) as r:
        pid = r._procs[0].pid
        deadline = time.monotonic() + 30
        while os.getpriority(os.PRIO_PROCESS, pid) == mine and time.monotonic() < deadline:
            time.sleep(0.02)
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(mine + render.NICE, 19)
