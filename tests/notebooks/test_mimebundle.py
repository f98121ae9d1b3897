"""The notebooks show charts as Vega-Lite 5 specs (``charts.mimebundle``), which JupyterLab's own
renderer draws (its vega-lite is 5.6; it has no v6 renderer): every chart the registered analyses
make, written by Altair 6 as a v6 spec, must compile under Vega-Lite 5 and draw what v6 draws."""

from __future__ import annotations

import re

import altair as alt
import pytest
import vl_convert as vlc

from cocoeval.analysis import analyses, charts, stats
from cocoeval.analysis.analyses import Params
from cocoeval.analysis.frames import run_frames

from ..analysis.test_leaderboard import _mixed_run
from ..analysis.test_stats import make_run

OLDEST_V5 = "5.8"  # the oldest Vega-Lite vl-convert has; JupyterLab 4.6 ships 5.6
MARK = re.compile(r'aria-roledescription="([a-z]+)"')


def _marks(svg: str) -> dict[str, int]:
    """How many of each kind of mark an SVG holds (bars, points, rules, ...)."""
    counts: dict[str, int] = {}
    for m in MARK.findall(svg):
        counts[m] = counts.get(m, 0) + 1
    return counts


def _kind(key: str) -> str:
    """A chart's kind from its answer key: ``figure3_<setup>`` and ``rq5_<group>`` are one kind each."""
    head = key.split("_")[0]
    return head if head in ("figure3", "rq3", "rq5") else key


@pytest.fixture(scope="module")
def every_chart() -> dict[str, alt.TopLevelMixin]:
    """One chart of each kind that each registered analysis makes, on two small runs (vanilla and
    taxonomy setups, several k, imported and plugin setups, a single-setup run), and a Likert chart."""
    out: dict[str, alt.TopLevelMixin] = {}
    for label, run in (("stats", make_run()), ("mixed", _mixed_run())):
        for name in analyses.ANALYSES.names():
            a = analyses.compute(name, run, Params(judge="J", resamples=20, min_n=2))
            for key, ch in (a.charts if a is not None else {}).items():
                out.setdefault(f"{label}:{_kind(key)}", ch)
    out["stats:likert"] = charts.likert_chart(
        stats.likert_means(run_frames(make_run()), resamples=20, min_n=2), judge="J"
    )  # as rq2 shows it, on a run with Likert scores
    return out


def test_every_chart_compiles_and_draws_the_same_under_vega_lite_5(every_chart):
    kinds = {key.split(":")[1] for key in every_chart}
    assert {
        "figure3",
        "likert",
        "rq3",
        "rq5",
        "participants",
        "table12",
        "judge_free",
        "judge_free_vs_human",
        "turn_taking",
        "leaderboard",
        "speakers",
    } <= kinds
    for key, ch in every_chart.items():
        data, _ = charts.mimebundle(ch)
        spec = data[charts.VEGALITE_V5_MIME]
        vega = vlc.vegalite_to_vega(spec, vl_version=OLDEST_V5)
        assert vega["marks"], key
        v5, v6 = vlc.vegalite_to_svg(spec, vl_version=OLDEST_V5), vlc.vegalite_to_svg(ch.to_dict())
        assert v5.startswith("<svg") and _marks(v5), key
        assert _marks(v5) == _marks(v6), key  # the same marks, as many, as Vega-Lite 6 draws


def test_mimebundle_is_the_validated_spec_under_the_v5_schema_with_embed_options():
    ch = charts.likert_chart(stats.likert_means(run_frames(make_run(3)), resamples=20))
    data, md = charts.mimebundle(ch, {"renderer": "svg"})
    assert set(data) == {"application/vnd.vegalite.v5+json", "text/plain"}
    spec = data["application/vnd.vegalite.v5+json"]
    assert spec["$schema"] == "https://vega.github.io/schema/vega-lite/v5.json"
    assert {k: v for k, v in spec.items() if k != "$schema"} == {
        k: v for k, v in ch.to_dict().items() if k != "$schema"
    }
    assert md == {"application/vnd.vegalite.v5+json": {"embed_options": {"renderer": "svg"}}}
    assert data["text/plain"] == "Vega-Lite chart (facet of layer of errorbar)" and "\n" not in data["text/plain"]
    titled = charts.titled(ch, "Likert — a title")
    assert charts.mimebundle(titled)[0]["text/plain"].endswith(": Likert — a title")
    assert charts.mimebundle(titled.to_dict())[0] == charts.mimebundle(titled)[0]  # a spec dict is taken as is
    assert charts.mimebundle(ch)[1] == {"application/vnd.vegalite.v5+json": {"embed_options": {}}}
    with pytest.raises(Exception):  # noqa: B017 (Altair's schema error): validated
        charts.mimebundle(alt.Chart(alt.Data(values=[{"a": 1}])).mark_bar().encode(x="a:Q").properties(width="wide"))
