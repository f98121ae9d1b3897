"""Viewers tested headlessly: set selections and values, assert on the rendered content."""

from __future__ import annotations

import altair as alt

from cocoeval import charts, stats
from cocoeval.annotate import import_annotations
from cocoeval.frames import run_frames
from cocoeval.judge import targets_for
from cocoeval.schema import Turn
from cocoeval.widgets import ALL, Annotator, ConversationViewer

from .test_stats import TAX, make_run


def _run_with_script():
    run = make_run(3)
    inst = run["instances"][0]
    evil = inst.model_copy(update={"history": [Turn(speaker="Mallory", text="<script>alert('x')</script>"),
                                               *inst.history[1:]]})
    run["instances"][0] = evil
    return run


def test_viewer_renders_escaped_text_side_by_side_with_tags():
    run = _run_with_script()
    v = ConversationViewer(run, judge="J")
    v.instance.value = run["instances"][0].id
    html = v.html.value
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "human reference" in html and "<b>sim</b>" in html and "<details>" in html
    v.instance.value = run["instances"][2].id
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
    assert run["instances"][0].id not in v.instance.options
    v.behaviour.value = ALL
    v.dataset.value = "d"
    assert len(v.instance.options) == 3


def test_chart_selection_lists_the_turns_behind_a_bar():
    run = make_run(3)
    means = stats.mean_occurrences(run_frames(run), resamples=50)
    ch = charts.behaviour_bars(means, TAX, selectable=True)
    pick = [p for p in ch.to_dict()["params"] if p["name"] == "pick"]
    assert pick and pick[0]["select"]["fields"] == ["panel", "series", "behaviour"]
    jc = alt.JupyterChart(ch)
    v = ConversationViewer(run, judge="J")
    v.link(jc)
    v.on_selection([{"panel": "sim", "series": "simulated", "behaviour": "repetition"}])
    rows = v.turns_behind("sim", "repetition")
    assert len(rows) == 1 + 2 + 3  # min(k+1, 4) repetitions for k = 0, 1, 2
    assert f"{len(rows)} turn(s) of sim labelled Repetition" in v.behind.value
    v.on_selection([{"panel": "sim", "series": charts.HUMAN, "behaviour": "repetition"}])
    assert "turn(s) of reference" in v.behind.value and v.behaviour.value == "repetition"


def test_annotator_writes_the_annotation_format(tmp_path):
    run = make_run(2)
    target = targets_for(run["instances"], run["continuations"])[0]
    a = Annotator(target, tmp_path / "ann.csv", taxonomy=TAX)
    a.write()
    assert "annotator name" in a.status.value and not (tmp_path / "ann.csv").exists()
    a.annotator.value = "ann7"
    a.turns[1].value = ("repetition", "off_topic")
    a.consistency.value = 8
    a.save.click()
    [fine, over] = sorted(import_annotations(tmp_path / "ann.csv", run), key=lambda j: j.kind)
    assert fine.judge_id == "human:ann7" and fine.labels[1].behaviours == ["repetition", "off_topic"]
    assert fine.status == "ok" and (over.consistency, over.collaborativeness) == (8, 5)
