"""Altair chart builders. Each takes aggregated frames (from ``stats``) and returns a chart;
saving is separate (``save``: PNG and SVG through vl-convert, no browser)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from .frames import REFERENCE
from .taxonomy import Taxonomy

HUMAN = "human reference"
CATEGORY_COLOURS = {"inconsistent": "#c0392b", "uncollaborative": "#2471a3"}


def _records(df: pl.DataFrame) -> alt.Data:
    return alt.Data(values=df.to_dicts())


def _names(tax: Taxonomy) -> dict[str, str]:
    return {b.id: b.name for b in tax.behaviours}


DEFINED = "isValid(datum.{lo}) && isValid(datum.{hi})"
UNDEFINED_MARK = {"shape": "cross", "color": "#333", "size": 40}


def _whiskers(base: alt.Chart, axis: str, lo: str = "ci_low", hi: str = "ci_high", **enc) -> alt.Chart:
    """Error bars where the interval is defined (see ``_undefined`` for the rest)."""
    ends = {axis: alt.Y(f"{lo}:Q", title="") if axis == "y" else alt.X(f"{lo}:Q", title=""), f"{axis}2": f"{hi}:Q"}
    return base.transform_filter(DEFINED.format(lo=lo, hi=hi)).mark_errorbar(ticks=True).encode(**ends, **enc)


def _undefined(base: alt.Chart, axis: str, value: str, lo: str = "ci_low", hi: str = "ci_high",
               tooltip: list | None = None) -> alt.Chart:
    """Where the interval is undefined (too few instances, every resample equal): no whisker but
    a cross at the estimate whose tooltip says why."""
    enc = {axis: f"{value}:Q", "tooltip": [*(tooltip or []), alt.Tooltip("ci_note:N", title="no interval")]}
    return base.transform_filter(f"!({DEFINED.format(lo=lo, hi=hi)})").mark_point(**UNDEFINED_MARK).encode(**enc)


def behaviour_bars(means: pl.DataFrame, tax: Taxonomy, *, judge: str | None = None,
                   setups: list[str] | None = None, columns: int = 3, selectable: bool = False) -> alt.FacetChart:
    """The paper's Figure 3: mean occurrences per continuation of each behaviour, one panel per
    setup with the human reference alongside (lighter bars), 95% CIs as error bars (a cross instead,
    with the reason in its tooltip, where the interval is undefined); colour tells
    inconsistent from uncollaborative behaviours. Pass ``stats.figure3_means`` rows (with a
    ``panel`` column) to compare each setup with the humans on the same instances; plain
    ``mean_occurrences`` rows use every reference in each panel. ``selectable`` adds a point selection
    ``pick`` (panel, series, behaviour) for ``alt.JupyterChart`` and the conversation viewer; the
    chart's ``usermeta`` says which instances its human series counts (``reference_scope``: "panel"
    for the panel setup's instances, "all" for every reference) so the viewer lists the same turns."""
    m = means if judge is None else means.filter(pl.col("judge") == judge)
    scope = "panel" if "panel" in m.columns else "all"
    if scope == "panel":  # from stats.figure3_means: references already on each setup's instances
        sims = m["panel"].unique(maintain_order=True).to_list()
        sims = [x for x in (setups or sims) if x in sims]
        parts = [m.filter(pl.col("panel").is_in(sims))]
    else:
        sims = [t for t in m["target"].unique(maintain_order=True).to_list() if t != REFERENCE]
        sims = [x for x in (setups or sims) if x in sims]
        ref = m.filter(pl.col("target") == REFERENCE)
        parts = [m.filter(pl.col("target") == x).with_columns(panel=pl.lit(x), series=pl.lit("simulated"))
                 for x in sims]
        parts += [ref.with_columns(panel=pl.lit(x), series=pl.lit(HUMAN)) for x in sims]
        if not sims:
            parts = [ref.with_columns(panel=pl.lit(HUMAN), series=pl.lit(HUMAN))]
    names = _names(tax)
    data = pl.concat(parts).with_columns(name=pl.col("behaviour").replace_strict(names, default=pl.col("behaviour")))
    order = [names[b] for b in tax.ids]
    base = alt.Chart(_records(data)).encode(
        x=alt.X("name:N", sort=order, title=None, axis=alt.Axis(labelAngle=-40)),
        xOffset=alt.XOffset("series:N", sort=["simulated", HUMAN]))
    bars = base.mark_bar().encode(
        y=alt.Y("mean:Q", title="mean occurrences per conversation"),
        color=alt.Color("category:N", scale=alt.Scale(domain=list(CATEGORY_COLOURS),
                                                      range=list(CATEGORY_COLOURS.values())), title="category"),
        opacity=alt.Opacity("series:N", scale=alt.Scale(domain=["simulated", HUMAN], range=[1.0, 0.4]),
                            title=None),
        tooltip=["panel:N", "series:N", "name:N", alt.Tooltip("mean:Q", format=".2f"),
                 alt.Tooltip("ci_low:Q", format=".2f"), alt.Tooltip("ci_high:Q", format=".2f"), "n:Q"])
    if selectable:
        bars = bars.add_params(alt.selection_point(name="pick", fields=["panel", "series", "behaviour"]))
    err = _whiskers(base, "y", color=alt.value("#333"))
    mark = _undefined(base, "y", "mean", tooltip=["panel:N", "series:N", "name:N", "n:Q"])
    return alt.layer(bars, err, mark).properties(width=260, height=170).facet(
        facet=alt.Facet("panel:N", title=None, sort=sims or [HUMAN]), columns=columns).properties(
        usermeta={"cocoeval": {"reference_scope": scope}})


def likert_chart(likert: pl.DataFrame, *, judge: str | None = None) -> alt.FacetChart:
    """Mean consistency and collaborativeness per target with 95% CIs (Table 4)."""
    d = likert if judge is None else likert.filter(pl.col("judge") == judge)
    base = alt.Chart(_records(d)).encode(y=alt.Y("target:N", title=None))
    pts = base.mark_point(filled=True, size=60).encode(
        x=alt.X("mean:Q", scale=alt.Scale(domain=[1, 10]), title="mean score (1-10)"),
        color=alt.condition(alt.datum.target == REFERENCE, alt.value("#111"), alt.value("#2471a3")),
        tooltip=["target:N", "score:N", alt.Tooltip("mean:Q", format=".2f"), "n:Q"])
    err = _whiskers(base, "x")
    mark = _undefined(base, "x", "mean", tooltip=["target:N", "score:N", "n:Q"])
    return alt.layer(err, pts, mark).properties(width=260).facet(column=alt.Column("score:N", title=None))


def dataset_heatmap(means_by_dataset: pl.DataFrame, tax: Taxonomy, *, judge: str | None = None) -> alt.FacetChart:
    """Mean occurrences per behaviour and dataset, one panel per target (Table 11)."""
    d = means_by_dataset if judge is None else means_by_dataset.filter(pl.col("judge") == judge)
    names = _names(tax)
    d = d.with_columns(name=pl.col("behaviour").replace_strict(names, default=pl.col("behaviour")))
    base = alt.Chart(_records(d)).encode(
        x=alt.X("name:N", sort=[names[b] for b in tax.ids], title=None, axis=alt.Axis(labelAngle=-40)),
        y=alt.Y("dataset:N", title=None))
    rect = base.mark_rect().encode(color=alt.Color("mean:Q", scale=alt.Scale(scheme="orangered"),
                                                   title="mean per conversation"),
                                   tooltip=["target:N", "dataset:N", "name:N", alt.Tooltip("mean:Q", format=".2f"), "n:Q"])
    text = base.mark_text(fontSize=9).encode(text=alt.Text("mean:Q", format=".1f"))
    return alt.layer(rect, text).properties(width=300, height=140).facet(
        facet=alt.Facet("target:N", title=None), columns=2)


def participants_chart(per_conversation: pl.DataFrame) -> alt.Chart:
    """Total behaviour count per conversation against its number of participants (Table 12).
    ``per_conversation``: dataset, n_participants, total (already aggregated per instance)."""
    pts = alt.Chart(_records(per_conversation)).mark_circle(size=40, opacity=0.6).encode(
        x=alt.X("n_participants:Q", title="participants in the window"),
        y=alt.Y("total:Q", title="behaviours per conversation"), color="dataset:N",
        tooltip=["dataset:N", "n_participants:Q", "total:Q"])
    trend = pts.transform_regression("n_participants", "total", groupby=["dataset"]).mark_line()
    return alt.layer(pts, trend).properties(width=360, height=240)


def agreement_chart(agree: pl.DataFrame) -> alt.Chart:
    """Leave-one-out Spearman per rater (and the average) with the bootstrap 5th-95th range (the
    paper's one-sided test; a cross instead where the range is undefined)."""
    base = alt.Chart(_records(agree)).encode(y=alt.Y("rater:N", title=None))
    bars = base.mark_bar().encode(
        x=alt.X("rho:Q", scale=alt.Scale(domain=[-1, 1]), title="Spearman ρ vs the others"),
        color=alt.Color("significant:N", scale=alt.Scale(domain=[True, False], range=["#1e8449", "#aaa"]),
                        title="5th pct > 0"), tooltip=["rater:N", "behaviour:N", "rho:Q", "p5:Q", "n:Q"])
    err = _whiskers(base, "x", "p5", "p95")
    mark = _undefined(base, "x", "rho", "p5", "p95", tooltip=["rater:N", "n:Q"])
    return alt.layer(bars, err, mark).properties(width=320)


def save(chart: alt.TopLevelMixin, path_base: str | Path, *, scale: float = 2.0) -> list[Path]:
    """Write ``<path_base>.png`` and ``.svg`` with vl-convert (no browser)."""
    import vl_convert as vlc

    base = Path(path_base)
    base.parent.mkdir(parents=True, exist_ok=True)
    spec = chart.to_json()
    png, svg = base.with_suffix(".png"), base.with_suffix(".svg")
    png.write_bytes(vlc.vegalite_to_png(spec, scale=scale))
    svg.write_text(vlc.vegalite_to_svg(spec), encoding="utf-8")
    return [png, svg]
