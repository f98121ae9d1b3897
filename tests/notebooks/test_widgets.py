"""Viewers tested headlessly: set selections and values, assert on the rendered content."""

from __future__ import annotations

import csv

import altair as alt
import pytest

from cocoeval import InputError
from cocoeval.analysis import charts, stats
from cocoeval.analysis.frames import run_frames
from cocoeval.annotate.exchange import import_annotations
from cocoeval.core.schema import Continuation, Turn
from cocoeval.core.targets import targets_for
from cocoeval.notebooks.widgets import ALL, Annotator, ConversationViewer, charts_scope

from ..analysis.test_stats import TAX, make_run


def _run_with_script():
    run = make_run(3)
    inst = run.instances[0]
    evil = inst.model_copy(
        update={"history": [Turn(speaker="Mallory", text="<script>alert('x')</script>"), *inst.history[1:]]}
    )
    run.instances[0] = evil
    return run


def test_viewer_renders_escaped_text_side_by_side_with_tags():
    run = _run_with_script()
    v = ConversationViewer(run, judge="J")
    v.instance.value = run.instances[0].id
    html = v.html.value
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert ">human reference</div>" in html and ">sim</div>" in html and "<details>" in html
    v.instance.value = run.instances[2].id
    assert 'data-behaviour="repetition"' in v.html.value and "Repetition" in v.html.value
    assert "#c0392b" in v.html.value  # inconsistent colour


def test_viewer_filters():
    run = make_run(3)
    v = ConversationViewer(run, judge="J")
    assert len(v.instance.options) == 3
    v.behaviour.value = "off_topic"
    assert v.instance.options == () and "No instance matches" in v.html.value
    v.behaviour.value = "repetition"
    # instance 0 has no repetition in the reference but one in the simulation
    assert len(v.instance.options) == 3
    v.setups.value = ()
    assert run.instances[0].id not in v.instance.options
    v.behaviour.value = ALL
    v.dataset.value = "d"
    assert len(v.instance.options) == 3


def _partial_run():
    """Six instances; setup 'sim' simulated (and judged) only the last three."""
    run = make_run(6)
    keep = {i.id for i in run.instances[3:]}
    run.continuations["sim"] = [c for c in run.continuations["sim"] if c.instance_id in keep]
    run.judgments["J"] = [j for j in run.judgments["J"] if j.target not in ("sim", "sim2") or j.instance_id in keep]
    # 'sim2' has only an invalid continuation, of the first instance
    run.continuations["sim2"] = [
        Continuation(instance_id=run.instances[0].id, setup_id="sim2", status="invalid", reason="x")
    ]
    return run, sorted(keep)


def _bar_row(ch, panel, series, behaviour):
    rows = [
        r
        for r in ch.to_dict()["data"]["values"]
        if (r["panel"], r["series"], r["behaviour"]) == (panel, series, behaviour)
    ]
    assert len(rows) == 1
    return rows[0]


def test_chart_selection_lists_the_turns_behind_a_bar():
    run, keep = _partial_run()
    ch = charts.behaviour_bars(stats.figure3_means(run_frames(run), "J", resamples=50), TAX, selectable=True)
    pick = [p for p in ch.to_dict()["params"] if p["name"] == "pick"]
    assert pick and pick[0]["select"]["fields"] == ["panel", "series", "behaviour"]
    jc = alt.JupyterChart(ch)
    v = ConversationViewer(run, judge="J")
    v.link(jc)
    for series, target in (("simulated", "sim"), (charts.HUMAN, "reference")):
        v.behaviour.value, v.setups.value = ALL, ("sim2",)
        v.instance.value = run.instances[0].id
        bar = v.on_selection([{"panel": "sim", "series": series, "behaviour": "repetition"}])
        row = _bar_row(ch, "sim", series, "repetition")
        # the bar's n and height are what the viewer counts: only the panel's instances
        assert bar.n == row["n"] == 3 and len(bar.rows) == round(row["mean"] * row["n"])
        assert {r[0] for r in bar.rows} <= set(keep) and bar.target == target
        assert f"{len(bar.rows)} turn(s) in {len(bar.instances)} of 3 instance(s)" in v.behind.value
        # the bar selects its behaviour, its setup and an instance that contributes to it
        assert v.behaviour.value == "repetition" and v.setups.value == ("sim",)
        assert v.instance.value == bar.instances[0] and v.instance.value in keep
    # human reference: k repetitions on instance k (k = 3, 4, 5; at most 4)
    assert len(v.bar("sim", charts.HUMAN, "repetition").rows) == 3 + 4 + 4
    assert [r[0] for r in v.bar("sim", charts.HUMAN, "repetition").rows] == [keep[0]] * 3 + [keep[1]] * 4 + [
        keep[2]
    ] * 4


def test_selection_on_a_chart_of_every_reference_counts_every_reference():
    run, _ = _partial_run()
    ch = charts.behaviour_bars(stats.mean_occurrences(run_frames(run), resamples=50), TAX, selectable=True)
    assert charts_scope(ch) == "all"
    v = ConversationViewer(run, judge="J")
    v.link(alt.JupyterChart(ch))
    bar = v.on_selection([{"panel": "sim", "series": charts.HUMAN, "behaviour": "repetition"}], scope="all")
    assert bar.n == _bar_row(ch, "sim", charts.HUMAN, "repetition")["n"] == 6
    assert len(bar.rows) == 0 + 1 + 2 + 3 + 4 + 4
    assert v.turns_behind("reference", "repetition", panel="sim") == v.bar("sim", charts.HUMAN, "repetition").rows


def test_viewer_opens_where_the_setups_were_simulated_and_titles_stand_apart():
    run, keep = _partial_run()
    v = ConversationViewer(run, judge="J")
    assert v.setups.value == ("sim", "sim2") and v.instance.value == keep[0]
    assert v.setups.rows == len(v.setups.options)
    v.instance.value = run.instances[0].id
    html = v.html.value
    # a setup with no continuation of the instance folds into one line, no empty column (issue #28)
    assert 'data-target="sim"' not in html and '<div class="cc-fold"><i>not simulated here: sim</i></div>' in html
    assert '>sim2</div><div class="cc-note"><i>invalid: x</i></div>' in html


def test_the_list_behind_a_bar_goes_when_the_instance_or_a_filter_changes():
    run, _ = _partial_run()
    v = ConversationViewer(run, judge="J")
    bar = v.show_bar("sim", "simulated", "repetition")
    assert bar.rows and "turn(s) in" in v.behind.value and v.instance.value == bar.instances[0]
    v.instance.value = next(i for i in v.instance.options if i != bar.instances[0])
    assert v.behind.value == ""  # it named another instance's turns
    v.show_bar("sim", "simulated", "repetition")
    assert v.behind.value
    v.dataset.value = ALL
    v.behaviour.value = ALL
    assert v.behind.value == ""


def _targets(run):
    return targets_for(run.instances, run.continuations)


def _fill(a, score=6):
    """Mark every judged turn none and rate both scores (what an annotator must do before Save)."""
    for box in a.none.values():
        box.value = True
    a.consistency.value = a.collaborativeness.value = score


def test_annotator_writes_the_annotation_format(tmp_path):
    run = make_run(2)
    a = Annotator(_targets(run), tmp_path / "ann.csv", taxonomy=TAX)
    assert a.target.name == "reference" and all(s.rows == len(TAX.behaviours) for s in a.turns.values())
    assert not a.write() and "annotator name" in a.status.value and not (tmp_path / "ann.csv").exists()
    a.annotator.value = "ann7"
    a.turns[1].value = ("repetition", "off_topic")
    for i in a.none:
        a.none[i].value = i != 1
    a.consistency.value, a.collaborativeness.value = 8, 3
    a.save.click()
    [fine, over] = sorted(import_annotations(tmp_path / "ann.csv", run), key=lambda j: j.kind)
    assert fine.judge_id == "human:ann7" and fine.labels[1].behaviours == ["repetition", "off_topic"]
    assert [lb.behaviours for i, lb in enumerate(fine.labels) if i != 1] == [[]] * (len(a.turns) - 1)
    assert fine.status == "ok" and (over.consistency, over.collaborativeness) == (8, 3)


def test_annotator_menus_list_the_instances_then_that_instances_targets(tmp_path):
    """Two menus, not one entry per instance x target: the instances, then the chosen instance's
    targets; choosing another instance lists its targets and builds its first one."""
    run = make_run(2)
    targets = _targets(run)
    a = Annotator(targets, tmp_path / "ann.csv", taxonomy=TAX)
    ids = list(dict.fromkeys(t.instance.id for t in targets))
    assert list(a.instance.options) == ids and len(ids) == len(run.instances) > 1
    mine = [k for k, t in enumerate(targets) if t.instance.id == ids[0]]
    assert [v for _, v in a.choose.options] == mine and a.choose.options[0][0] == "human reference"
    assert {label for label, _ in a.choose.options} == {"human reference", *run.continuations}
    a.instance.value = ids[1]  # what picking it in the menu does
    first = next(k for k, t in enumerate(targets) if t.instance.id == ids[1])
    assert a.choose.value == first and a.target is targets[first]
    assert all(targets[v].instance.id == ids[1] for _, v in a.choose.options)
    assert len(a.turns) == len(targets[first].judged)
    a.choose.value = a.choose.options[-1][1]
    assert a.target.instance.id == ids[1] and a.target.name != "reference"


def test_annotator_picks_any_target_and_saving_again_replaces_its_rows(tmp_path):
    run = make_run(2)
    targets = _targets(run)
    out = tmp_path / "ann.csv"
    a = Annotator(targets, out, taxonomy=TAX)
    k = next(i for i, t in enumerate(targets) if t.name == "sim" and t.instance.id == run.instances[1].id)
    a.pick(k)
    assert a.target is targets[k] and len(a.turns) == len(targets[k].judged)
    assert "utterance" in a.body.children[0].children[0].value
    a.annotator.value = "ann1"
    _fill(a)
    a.none[0].value = False
    a.turns[0].value = ("repetition",)
    assert a.write()
    other = Annotator(targets, out, taxonomy=TAX)  # another annotator, same file and target
    other.pick(k)
    other.annotator.value = "ann2"
    _fill(other)
    assert other.write()
    a.turns[0].value = ("off_topic",)  # changed mind: save again
    assert a.write() and "replacing the" in a.status.value
    lines = out.read_text().splitlines()
    assert len(lines) == 1 + 2 * (len(a.turns) + 1)  # header + each annotator's rows once
    js = import_annotations(out, run)  # no conflict: the second save replaced the first
    mine = next(j for j in js if j.judge_id == "human:ann1" and j.kind == "fine_grained")
    assert mine.target_name == "sim" and mine.labels[0].behaviours == ["off_topic"]
    assert {j.judge_id for j in js} == {"human:ann1", "human:ann2"}


def test_annotator_refuses_bad_names_and_foreign_files(tmp_path):
    run = make_run(1)
    out = tmp_path / "ann.csv"
    a = Annotator(_targets(run), out, taxonomy=TAX)
    a.annotator.value = "../x"
    _fill(a)
    assert not a.write() and "cannot name a file" in a.status.value and not out.exists()
    out.write_text("who,what\nx,y\n")
    a.annotator.value = "ann1"
    assert not a.write() and "choose another file" in a.status.value
    assert out.read_text() == "who,what\nx,y\n"


def test_setup_makes_charts_render_offline_and_figures_go_to_the_run(tmp_path, monkeypatch):
    import IPython.display

    from cocoeval.notebooks.context import EMBED_OPTIONS, RunContext, setup

    run = make_run(3)
    ctx = RunContext(None, tmp_path / "run", run, run_frames(run), "J")
    try:
        setup()
        assert alt.renderers.active == "cocoeval"
        # display(chart), or a chart as a cell's last value: the Vega-Lite 5 spec, no widget
        ch = charts.likert_chart(stats.likert_means(run_frames(run), resamples=20))
        data, md = ch._repr_mimebundle_()
        assert (data, md) == charts.mimebundle(ch, EMBED_OPTIONS)
        assert set(data) == {charts.VEGALITE_V5_MIME, "text/plain"}
        # show(): each answer chart displayed as that bundle (raw), and saved
        shown: list[tuple] = []
        monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append((a, k)))
        assert ctx._renderer is None
        answer = ctx.analysis("rq1", resamples=20, min_n=2)
        assert ctx._renderer is not None  # started with the analysis: vl-convert loads while it computes
        saved = ctx.show(answer, "01_x")
        bundles = [(a[0], k["metadata"]) for a, k in shown if k.get("raw")]
        assert bundles == [charts.mimebundle(c, EMBED_OPTIONS) for c in answer.charts.values()]
        assert bundles and len(saved) == 2 * len(bundles)
        # rendered in a background process: written once wait_for_figures returns, as charts.save writes them
        assert ctx.wait_for_figures() == saved and all(p.is_file() for p in saved)
        assert ctx.wait_for_figures() == []  # nothing left to wait for
        for name, ch in answer.charts.items():
            made = charts.save(ch, tmp_path / "direct" / name)
            assert [p.read_bytes() for p in made] == [p.read_bytes() for p in saved if p.stem == name]
            spec = (tmp_path / "run" / "figures" / "01_x" / f"{name}.vl.json").read_bytes()
            assert spec == (tmp_path / "direct" / f"{name}.vl.json").read_bytes()
        # the linked chart is the one widget, its JavaScript bundled (no CDN)
        jc = ctx.linked_chart(ctx.viewer())
        assert isinstance(jc, alt.JupyterChart) and jc.embed_options == EMBED_OPTIONS
        esm = str(alt.JupyterChart._esm)
        assert "esm.sh" not in esm and "cdn.jsdelivr" not in esm and len(esm) > 100_000  # vega bundled in
    finally:
        setup(offline=False)
    assert alt.renderers.active == "default"
    assert ctx.figures_path("", "01_x") == tmp_path / "run" / "figures" / "01_x"
    assert ctx.figures_path(str(tmp_path / "f"), "01_x") == tmp_path / "f" / "01_x"
    assert ctx.annotator().target.name == "reference"


def test_annotator_save_without_marks_or_ratings_stores_nothing_and_says_what_is_missing(tmp_path):
    run = make_run(2)
    out = tmp_path / "ann.csv"
    a = Annotator(_targets(run), out, taxonomy=TAX)
    a.annotator.value = "ann1"
    turns = sorted(a.turns)
    assert len(turns) >= 2 and a.consistency.value is None and a.collaborativeness.value is None
    assert not any(s.value for s in a.turns.values()) and not any(b.value for b in a.none.values())
    assert not a.write() and not out.exists()  # nothing chosen: nothing stored, and said
    every = ", ".join(str(i + 1) for i in turns)
    assert f"Nothing saved: turn {every} not marked (choose its behaviours or tick none)" in a.status.value
    assert "consistency not rated; collaborativeness not rated." in a.status.value
    # all but the last turn marked, one score: the message names exactly what is left
    a.turns[turns[0]].value = ("repetition",)
    for i in turns[1:-1]:
        a.none[i].value = True
    a.consistency.value = 4
    assert a.missing() == [
        f"turn {turns[-1] + 1} not marked (choose its behaviours or tick none)",
        "collaborativeness not rated",
    ]
    assert not a.write() and not out.exists() and "consistency not rated" not in a.status.value
    with pytest.raises(InputError, match="not everything is rated"):
        a.rows()
    # ticking none clears the turn's behaviours and locks them; both set (by code) is refused
    a.none[turns[0]].value = True
    assert a.turns[turns[0]].value == () and a.turns[turns[0]].disabled
    a.turns[turns[0]].value = ("off_topic",)
    a.none[turns[-1]].value = True
    a.collaborativeness.value = 9
    assert a.missing() == [f"turn {turns[0] + 1} has behaviours and none ticked (keep one)"]
    a.none[turns[0]].value = False
    assert not a.turns[turns[0]].disabled and a.missing() == [] and a.write()
    # a refused save leaves an earlier save as it was
    before = out.read_bytes()
    a.none[turns[-1]].value = False
    assert not a.write() and out.read_bytes() == before


def test_annotator_with_everything_set_stores_exactly_the_chosen_values(tmp_path):
    run = make_run(2)
    out = tmp_path / "ann.csv"
    a = Annotator(_targets(run), out, taxonomy=TAX)
    a.annotator.value = "ann1"
    ids = [b.id for b in TAX.behaviours]
    chosen = {}
    for k, i in enumerate(sorted(a.turns)):
        if k % 2:
            a.none[i].value = True
            chosen[i] = ()
        else:
            a.turns[i].value = chosen[i] = (ids[k % len(ids)], ids[(k + 3) % len(ids)])
    a.consistency.value, a.collaborativeness.value = 2, 9
    assert a.write()
    rows = list(csv.DictReader(out.open()))
    assert [(r["turn"], r["behaviours"]) for r in rows if r["turn"]] == [
        (str(i + 1), ";".join(c) or "none") for i, c in chosen.items()
    ]
    assert [(r["consistency"], r["collaborativeness"]) for r in rows if not r["turn"]] == [("2", "9")]
    [fine, over] = sorted(import_annotations(out, run), key=lambda j: j.kind)
    assert fine.status == "ok" and {lb.turn: tuple(lb.behaviours) for lb in fine.labels} == {
        i: tuple(b for b in ids if b in c) for i, c in chosen.items()
    }
    assert (over.consistency, over.collaborativeness) == (2, 9)


def test_saved_labels_load_back_into_the_annotator(tmp_path):
    run = make_run(2)
    targets = _targets(run)
    out = tmp_path / "ann.csv"
    a = Annotator(targets, out, taxonomy=TAX)
    a.annotator.value = "ann1"
    first, *rest = sorted(a.turns)
    a.turns[first].value = ("repetition", "off_topic")
    for i in rest:
        a.none[i].value = True
    a.consistency.value, a.collaborativeness.value = 3, 8
    assert a.write()

    b = Annotator(targets, out, taxonomy=TAX)  # a new session on the same file
    assert b.consistency.value is None and not b.turns[first].value
    b.annotator.value = "ann1"
    assert "Loaded the labels ann1 saved" in b.status.value
    assert b.turns[first].value == ("repetition", "off_topic") and not b.none[first].value
    assert all(b.none[i].value and b.turns[i].value == () for i in rest)
    assert (b.consistency.value, b.collaborativeness.value) == (3, 8) and b.missing() == []
    other = next(k for k, t in enumerate(targets) if t is not b.target)
    b.pick(other)  # another target: nothing saved for it, all unset
    assert b.consistency.value is None and b.missing() and not any(x.value for x in b.none.values())
    b.pick(0)
    assert b.turns[first].value == ("repetition", "off_topic") and b.collaborativeness.value == 8
    b.annotator.value = "ann2"  # another annotator with nothing saved: ann1's labels are not theirs
    assert b.consistency.value is None and not b.turns[first].value and not any(x.value for x in b.none.values())
    assert not b.write() and "not rated" in b.status.value


def test_hand_edited_rows_load_back_with_what_cannot_be_read_said(tmp_path):
    run = make_run(1)
    targets = _targets(run)
    t = targets[0]
    out = tmp_path / "ann.csv"
    first, second, *_ = t.judged
    out.write_text(
        "annotator,item_id,instance_id,target,turn,behaviours,not_in_taxonomy,consistency,"
        f"collaborativeness,note\nann1,,{t.instance.id},{t.name},{first + 1},Repetitions; Sarcasm,,,,\n"
        f"ann1,,{t.instance.id},{t.name},{second + 1},,,,,\n"
        f"ann1,,{t.instance.id},{t.name},,,,12,4,\n"
    )
    a = Annotator(targets, out, taxonomy=TAX)
    a.annotator.value = "ann1"
    assert a.turns[first].value == ("repetition",) and a.collaborativeness.value == 4
    assert (
        f"Not understood, left out: turn {first + 1} &#x27;Sarcasm&#x27;, consistency &#x27;12&#x27;." in a.status.value
    )
    # an empty cell loads as unmarked (not none), an out-of-range score as not rated
    assert not a.turns[second].value and not a.none[second].value and a.consistency.value is None
    assert a.missing()[0].startswith(f"turn {second + 1}")


def test_the_linked_charts_bundle_is_made_once_and_read_back_the_same(tmp_path, monkeypatch):
    """``enable_offline`` keeps the bundle Altair's ``enable_offline`` makes in the cache folder; a
    later kernel (here: the class reset) reads the same text back without bundling again; a kept
    file whose bytes were changed is made again; a folder that cannot be written only means it is
    made each time."""
    from cocoeval.notebooks import context

    saved = (alt.JupyterChart._esm, alt.JupyterChart._is_offline)
    monkeypatch.setenv("COCOEVAL_CACHE_DIR", str(tmp_path / "cache"))
    try:
        alt.JupyterChart.enable_offline(offline=False)
        path = context.enable_offline()
        made = alt.JupyterChart._esm
        assert path is not None and path.parent == tmp_path / "cache" and path.read_text(encoding="utf-8") == made
        assert alt.JupyterChart._is_offline and len(made) > 100_000 and "cdn.jsdelivr" not in made
        assert context.enable_offline() is None  # already offline in this kernel: nothing to do
        alt.JupyterChart.enable_offline(offline=False)  # a new kernel
        assert alt.JupyterChart._esm != made

        def bundled_again(*a, **k):
            raise AssertionError("bundled again")

        with monkeypatch.context() as m:
            m.setattr(alt.JupyterChart, "enable_offline", classmethod(bundled_again))
            assert context.enable_offline() == path
        assert alt.JupyterChart._esm == made and alt.JupyterChart._is_offline
        alt.JupyterChart.enable_offline(offline=False)
        path.write_text(made[:-10], encoding="utf-8")  # cut short, or changed: its hash no longer matches
        again = context.enable_offline()
        assert again == path and alt.JupyterChart._esm == made and path.read_text(encoding="utf-8") == made
        alt.JupyterChart.enable_offline(offline=False)
        (tmp_path / "file").write_text("x")
        monkeypatch.setenv("COCOEVAL_CACHE_DIR", str(tmp_path / "file"))  # not a folder: nothing kept
        assert context.enable_offline() is None and alt.JupyterChart._esm == made
        assert list((tmp_path / "cache").iterdir()) == [path]  # no temporary file left behind
    finally:
        alt.JupyterChart._esm, alt.JupyterChart._is_offline = saved


def test_the_viewer_reads_no_judgment_record_and_shows_them_as_the_statistics_count_them(tmp_path, monkeypatch):
    """Its judgments come from the frames (``widgets.verdicts``): with the run's frames kept, no
    judgment file is read, and it shows the same as a viewer of the records; a stale judgment (of
    a continuation simulated again) shows its note and none of its labels, and is in no bar."""
    import os

    from cocoeval.analysis import store
    from cocoeval.analysis.frames import open_run_dir
    from cocoeval.core.jsonio import recorded_reads
    from cocoeval.run import Run

    from ..sim_helpers import write_run_dir

    run = make_run(3)
    first = run.continuations["sim"][0]
    run.continuations["sim"][0] = first.model_copy(update={"setup_id": "sim-v2"})  # simulated again since
    write_run_dir(tmp_path / "run", run, {"status": "complete", "setups": {"sim": "sim-v2", "sim2": "sim2"}})
    d = tmp_path / "run"
    monkeypatch.setattr(store, "_CACHE", {})
    open_run_dir(d)
    monkeypatch.setattr(store, "_CACHE", {})
    with recorded_reads() as seen:
        lazy = ConversationViewer(open_run_dir(d), judge="J")
    assert not [p for p in seen if "judgments" in os.path.relpath(p, d)]
    eager = ConversationViewer(Run.open(d), judge="J")
    assert lazy.instance.options == eager.instance.options and lazy.instance.value == eager.instance.value
    for iid in lazy.instance.options:
        lazy.instance.value = eager.instance.value = iid
        assert lazy.html.value == eager.html.value
    for series in ("simulated", charts.HUMAN):
        assert lazy.bar("sim", series, "repetition") == eager.bar("sim", series, "repetition")
    # the texts came from the lines of the instances shown: no record was read whole
    assert {"instances", "continuations", "judgments"} <= lazy.run.unread
    lazy.instance.value = first.instance_id
    col = lazy.html.value.split('data-target="sim"')[1]
    assert "judgment stale: judges a continuation that is no longer the setup" in col
    assert 'data-behaviour="repetition"' not in col  # its label is not shown as a finding
    assert first.instance_id not in {r[0] for r in lazy.bar("sim", "simulated", "repetition").rows}


def test_the_run_annotator_lists_targets_from_the_frames_and_reads_only_the_one_chosen(tmp_path, monkeypatch):
    """``RunContext.annotator`` lists every instance's reference, then every setup's current ok
    continuation, from the frames (a stale continuation, simulated with other settings, counts
    nowhere and is not offered), and reads a target's lines only when it is chosen: the same
    turns and judged turns as ``targets_for`` over the records read whole, no record file read whole."""
    from cocoeval.analysis import store
    from cocoeval.analysis.frames import open_run_dir
    from cocoeval.notebooks.context import RunContext
    from cocoeval.run import Run

    from ..sim_helpers import write_run_dir

    run = make_run(3)
    first = run.continuations["sim"][0]
    run.continuations["sim"][0] = first.model_copy(update={"setup_id": "sim-v2"})  # the setup changed since
    write_run_dir(tmp_path / "run", run, {"status": "complete", "setups": {"sim": "sim-v2", "sim2": "sim2"}})
    d = tmp_path / "run"
    monkeypatch.setattr(store, "_CACHE", {})
    open_run_dir(d)  # keeps the frames
    monkeypatch.setattr(store, "_CACHE", {})
    lazy = open_run_dir(d)
    frames = run_frames(lazy)
    a = RunContext(None, d, lazy, frames, "J").annotator(tmp_path / "ann.csv")
    eager = Run.open(d)
    stale = {
        (name, c.instance_id)
        for name, cs in eager.continuations.items()
        for c in cs
        if c.status == "ok" and eager.stale_reason(name, c)
    }
    assert stale and ("sim", first.instance_id) not in stale  # the other sim continuations are stale
    expected = [t for t in targets_for(eager.instances, eager.continuations) if (t.name, t.instance.id) not in stale]
    assert [(t.instance_id, t.name) for t in a.targets] == [(t.instance.id, t.name) for t in expected]
    assert {"instances", "continuations"} <= lazy.unread  # listed without reading a record
    for k in (0, len(a.targets) - 1, len(expected) // 2):
        a.pick(k)
        got, want = a.target, expected[k]
        assert (got.instance.id, got.name, got.target_id, got.turns, got.judged) == (
            want.instance.id,
            want.name,
            want.target_id,
            want.turns,
            want.judged,
        )
    assert {"instances", "continuations"} <= lazy.unread  # each read from its own lines
