"""Altair chart builders. Each takes aggregated frames (from ``stats``) and returns a chart;
saving is separate (``save``: PNG and SVG through vl-convert, no browser)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import altair as alt
import polars as pl

from cocoeval.core.targets import REFERENCE
from cocoeval.core.taxonomy import Taxonomy

from .frames import HUMAN

CATEGORY_COLOURS = {"inconsistent": "#c0392b", "uncollaborative": "#2471a3"}


@contextmanager
def checked_once() -> Iterator[None]:
    """Charts built in this block are checked against the Vega-Lite schema once, whole, when
    written (``to_dict``, ``to_json``, ``save``: Altair's default), not also piece by piece as each
    part is made (Altair's debug mode, on by default, checks every encoding, and every inline data
    table record by record, at its creation, and again in each chart it goes into). The specs are
    the same; a chart that breaks the schema still raises, when written. ``Analysis.__call__``
    builds every analysis's charts in this block."""
    from altair.utils.schemapi import debug_mode

    with debug_mode(False):
        yield


def _records(df: pl.DataFrame) -> alt.Data:
    """The frame's rows as inline data. A tuple: Altair copies a chart's lists and dicts, all the
    way down, each time a layer, facet or title is added, and leaves a tuple as it is; it writes
    the tuple as the same JSON array (so the spec is unchanged, and built several times faster)."""
    return alt.Data(values=tuple(df.to_dicts()))


def _names(tax: Taxonomy) -> dict[str, str]:
    return {b.id: b.name for b in tax.behaviours}


def _n(d: pl.DataFrame, unit: str = "instances") -> str:
    """The n behind the marks, for an axis or legend title: "n = 12 instances" or a range."""
    ns = d["n"].drop_nulls() if "n" in d.columns else pl.Series([], dtype=pl.Int64)
    if ns.is_empty():
        return ""
    lo, hi = ns.min(), ns.max()
    return f"n = {lo!s} {unit}" if lo == hi else f"n = {lo!s}–{hi!s} {unit} (tooltips)"


def _titled(statistic: str | list[str], d: pl.DataFrame, unit: str = "instances") -> list[str]:
    """An axis or legend title, one line each: the statistic (its lines) and its n."""
    n = _n(d, unit)
    return [*([statistic] if isinstance(statistic, str) else statistic), *([n] if n else [])]


DEFINED = "isValid(datum.{lo}) && isValid(datum.{hi})"
UNDEFINED_MARK: dict[str, Any] = {"shape": "cross", "color": "#333", "size": 40}


def interval_words(lo: Any, hi: Any, n: Any, note: Any = None, *, digits: int = 2, what: str = "95% CI") -> str:
    """An interval as a reader reads it: "95% CI 0.40–1.20, n = 48"; where it is undefined, why:
    "n too small for an interval (n = 1)" or "no interval: <reason> (n = 12)"."""
    ns = "unknown" if n is None else str(n)
    if lo is not None and hi is not None and lo == lo and hi == hi:
        return f"{what} {lo:.{digits}f}–{hi:.{digits}f}, n = {ns}"
    if note is None or "too small" in str(note):
        return f"n too small for an interval (n = {ns})"
    return f"no interval: {note} (n = {ns})"


def with_words(
    df: pl.DataFrame,
    lo: str = "ci_low",
    hi: str = "ci_high",
    *,
    digits: int = 2,
    what: str = "95% CI",
    column: str = "interval",
) -> pl.DataFrame:
    """``df`` with a text column ``interval`` (``interval_words`` of each row) for the tooltips."""
    if lo not in df.columns or hi not in df.columns:
        return df
    note = "ci_note" if "ci_note" in df.columns else None
    words = [
        interval_words(r[lo], r[hi], r.get("n"), r.get(note) if note else None, digits=digits, what=what)
        for r in df.iter_rows(named=True)
    ]
    return df.with_columns(pl.Series(column, words, dtype=pl.String))


def _whiskers(base: alt.Chart, axis: str, lo: str = "ci_low", hi: str = "ci_high", **enc) -> alt.Chart:
    """Error bars where the interval is defined (see ``_undefined`` for the rest)."""
    ends = (
        {"y": alt.Y(f"{lo}:Q", title=""), "y2": alt.Y2(f"{hi}:Q")}
        if axis == "y"
        else {"x": alt.X(f"{lo}:Q", title=""), "x2": alt.X2(f"{hi}:Q")}
    )
    return base.transform_filter(DEFINED.format(lo=lo, hi=hi)).mark_errorbar(ticks=True).encode(**ends, **enc)


def _field(t: Any) -> str | None:
    """The field a tooltip shows: given as ``field=`` or in its shorthand (``"interval:N"``)."""
    if not isinstance(t, alt.Tooltip):
        return None
    if isinstance(t.field, str):
        return t.field
    return t.shorthand.split(":")[0] if isinstance(t.shorthand, str) else None


UNDEFINED_TIP = "–"
"""What a tooltip shows for a value that is not there (never ``null``)."""


def cell_text(values: pl.Series, fmt: str) -> pl.Series:
    """A heatmap cell's text: the value in ``fmt``, empty where it is undefined (never "null")."""
    return pl.Series([format(v, fmt) if v is not None and v == v else "" for v in values.to_list()], dtype=pl.String)


def null_free(d: pl.DataFrame, tip: list[Any]) -> tuple[pl.DataFrame, list[Any]]:
    """``d`` and ``tip`` such that no tooltip shows ``null``: each tooltip field with a missing
    value (null or NaN) in some row is shown from a text column beside it (``<field>_tip``: the
    value in the tooltip's format, "–" where it is missing); the field itself is left as it is for
    the marks that encode it."""
    out, cols = [], {}
    for t in tip:
        f = _field(t)
        values = d[f].to_list() if f is not None and f in d.columns else []
        if not any(v is None or (isinstance(v, float) and v != v) for v in values):
            out.append(t)
            continue
        fmt = t.format if isinstance(t.format, str) else None

        def shown(v: Any, fmt: str | None = fmt) -> str:
            if v is None or (isinstance(v, float) and v != v):
                return UNDEFINED_TIP
            if isinstance(v, float):
                return format(v, fmt) if fmt else f"{v:g}"
            return str(v)

        cols[f"{f}_tip"] = pl.Series(f"{f}_tip", [shown(v) for v in values], dtype=pl.String)
        out.append(alt.Tooltip(f"{f}_tip:N", title=t.title if isinstance(t.title, str) else f))
    return (d.with_columns(**cols) if cols else d), out


def _undefined(
    base: alt.Chart, axis: str, value: str, lo: str = "ci_low", hi: str = "ci_high", tooltip: list | None = None
) -> alt.Chart:
    """Where the interval is undefined (too few instances, every resample equal): no whisker but
    a cross at the estimate whose tooltip says why."""
    tip = list(tooltip or [])
    if not any(_field(t) == "interval" for t in tip):  # the whiskers' tooltip says it where they have one
        tip.append(alt.Tooltip("interval:N", title="interval"))
    enc = {axis: alt.Y(f"{value}:Q") if axis == "y" else alt.X(f"{value}:Q"), "tooltip": tip}
    return base.transform_filter(f"!({DEFINED.format(lo=lo, hi=hi)})").mark_point(**UNDEFINED_MARK).encode(**enc)


NOTEBOOK_WIDTH = 900
"""Pixels a chart may take across (a JupyterLab notebook's text column, the HTML report's page)."""


def _title(title: str | None) -> dict[str, Any]:
    """A figure's title as a keyword of the chart it is made with (``alt.layer``, ``.facet``): each
    ``.properties`` call on a layered or faceted chart copies all of it again, and so does
    ``resolve_scale`` (``_independent``)."""
    return {"title": title} if title else {}


def _independent(axis: Literal["x", "y"]) -> alt.Resolve:
    """``resolve_scale(<axis>="independent")`` given as the chart's ``resolve``: the same spec."""
    return alt.Resolve(
        scale=alt.ScaleResolveMap(x="independent") if axis == "x" else alt.ScaleResolveMap(y="independent")
    )


def panel_width(columns: int, *, total: int = NOTEBOOK_WIDTH, legend: int = 170, least: int = 180) -> int:
    """The width of one of ``columns`` facet panels so that the chart fits ``total`` pixels with
    its legend (never under ``least``)."""
    return max(least, (total - legend) // max(1, columns) - 20)


def behaviour_bars(
    means: pl.DataFrame,
    tax: Taxonomy,
    *,
    judge: str | None = None,
    setups: list[str] | None = None,
    columns: int = 3,
    selectable: bool = False,
    title: str | None = None,
) -> alt.FacetChart:
    """The paper's Figure 3: mean occurrences per continuation of each behaviour, one panel per
    setup with the human reference alongside (lighter bars), 95% CIs as error bars (a cross instead,
    with the reason in its tooltip, where the interval is undefined); colour tells
    inconsistent from uncollaborative behaviours. Pass ``stats.figure3_means`` rows (with a
    ``panel`` column) to compare each setup with the humans on the same instances; plain
    ``mean_occurrences`` rows use every reference in each panel. ``selectable`` adds a point selection
    ``pick`` (panel, series, behaviour) for ``alt.JupyterChart`` and the conversation viewer.
    ``title``: the figure's title (``figure3_groups`` gives one figure per model/condition)."""
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
        parts = [
            m.filter(pl.col("target") == x).with_columns(panel=pl.lit(x), series=pl.lit("simulated")) for x in sims
        ]
        parts += [ref.with_columns(panel=pl.lit(x), series=pl.lit(HUMAN)) for x in sims]
        if not sims:
            parts = [ref.with_columns(panel=pl.lit(HUMAN), series=pl.lit(HUMAN))]
    names = _names(tax)
    data = with_words(
        pl.concat(parts).with_columns(name=pl.col("behaviour").replace_strict(names, default=pl.col("behaviour")))
    )
    order = [names[b] for b in tax.ids]
    tip = [
        alt.Tooltip("panel:N", title="panel"),
        alt.Tooltip("series:N", title="series"),
        alt.Tooltip("name:N", title="behaviour"),
        alt.Tooltip("mean:Q", format=".2f", title="mean per conversation"),
        alt.Tooltip("interval:N", title="interval"),
    ]
    data, tip = null_free(data, tip)
    base = alt.Chart(_records(data)).encode(
        x=alt.X("name:N", sort=order, title=None, axis=alt.Axis(labelAngle=-40)),
        xOffset=alt.XOffset("series:N", sort=["simulated", HUMAN]),
    )
    bars = base.mark_bar().encode(
        y=alt.Y("mean:Q", title=_titled(["mean occurrences", "per conversation (95% CI)"], data)),
        color=alt.Color(
            "category:N",
            scale=alt.Scale(domain=list(CATEGORY_COLOURS), range=list(CATEGORY_COLOURS.values())),
            title="category",
        ),
        # the series legend draws bars as the marks are drawn: a square of a category's colour,
        # solid for the simulated series, lighter for the human reference
        opacity=alt.Opacity(
            "series:N",
            scale=alt.Scale(domain=["simulated", HUMAN], range=[1.0, 0.4]),
            sort=["simulated", HUMAN],
            title="series",
            legend=alt.Legend(
                symbolType="square", symbolStrokeWidth=0, symbolFillColor=CATEGORY_COLOURS["inconsistent"]
            ),
        ),
        tooltip=tip,
    )
    if selectable:
        bars = bars.add_params(alt.selection_point(name="pick", fields=["panel", "series", "behaviour"]))
    err = _whiskers(base, "y", color=alt.ColorValue("#333"))
    mark = _undefined(base, "y", "mean", tooltip=tip)
    cols = max(1, min(columns, len(sims) or 1))
    return alt.layer(bars, err, mark, width=panel_width(cols), height=170).facet(
        facet=alt.Facet("panel:N", title=None, sort=sims or [HUMAN]),
        columns=columns,
        usermeta={"cocoeval": {"reference_scope": scope}},
        **_title(title),
    )


def figure3_groups(
    fig3: pl.DataFrame,
    tax: Taxonomy,
    groups: dict[str, list[str]],
    *,
    judge: str | None = None,
    human: pl.DataFrame | None = None,
) -> dict[str, alt.FacetChart]:
    """The paper's Figure 3 grouping: one figure per model/condition (its panels: one per k, each
    with the human reference on the same instances), plus "human" (Figure 3(a)) when ``human``
    (``mean_occurrences`` rows of the reference) is given. ``groups``: ``paper_stats.figure_groups``."""
    out = {}
    if human is not None and not human.is_empty():
        out["human"] = behaviour_bars(human, tax, judge=judge, title="Human conversations")
    panels = set(fig3["panel"].to_list()) if "panel" in fig3.columns else set()
    for label, setups in groups.items():
        present = [s for s in setups if s in panels]
        if present:
            out[label] = behaviour_bars(fig3, tax, judge=judge, setups=present, title=label)
    return out


def contrast_chart(pairs: pl.DataFrame, tax: Taxonomy, *, title: str | None = None) -> alt.FacetChart:
    """Paired differences between two setups per behaviour (``paper_stats.paired_between`` rows with a
    ``comparison`` label, one panel each): the difference with its 95% CI (a cross where undefined),
    coloured by the corrected test's direction (grey: no significant difference or not tested)."""
    names = _names(tax)
    d = with_words(
        pairs.with_columns(
            name=pl.col("behaviour").replace_strict(names, default=pl.col("behaviour")),
            direction=pl.col("direction").fill_null("not tested"),
        ),
        "diff_ci_low",
        "diff_ci_high",
    )
    d, tip = null_free(
        d,
        [
            alt.Tooltip("comparison:N"),
            alt.Tooltip("name:N", title="behaviour"),
            alt.Tooltip("diff:Q", format=".2f", title="difference"),
            alt.Tooltip("interval:N", title="interval"),
            alt.Tooltip("p_adj:Q", format=".3g", title="corrected p"),
        ],
    )
    base = alt.Chart(_records(d)).encode(y=alt.Y("name:N", sort=[names[b] for b in tax.ids], title=None))
    pts = base.mark_point(filled=True, size=60).encode(
        x=alt.X("diff:Q", title=_titled(["difference in mean occurrences", "per conversation (b − a), 95% CI"], d)),
        color=alt.Color(
            "direction:N",
            title="corrected test",
            scale=alt.Scale(
                domain=["higher", "lower", "no significant difference", "not tested"],
                range=["#c0392b", "#2471a3", "#999", "#ccc"],
            ),
        ),
        tooltip=tip,
    )
    rule = base.mark_rule(color="#888").encode(x=alt.XDatum(0))
    err = _whiskers(base, "x", "diff_ci_low", "diff_ci_high")
    mark = _undefined(base, "x", "diff", "diff_ci_low", "diff_ci_high", tooltip=tip)
    return alt.layer(rule, err, pts, mark, width=220, height=200).facet(
        facet=alt.Facet("comparison:N", title=None), columns=3, **_title(title)
    )


def participants_heatmap(spearman: pl.DataFrame, tax: Taxonomy) -> alt.FacetChart:
    """Table 12 as a heatmap: Spearman ρ per behaviour (rows) and target (columns), one panel per
    dataset; cells without a ρ (too few instances, constant counts) are blank with the reason."""
    names = {**_names(tax), "all": "all behaviours"}
    d = spearman.with_columns(
        name=pl.col("behaviour").replace_strict(names, default=pl.col("behaviour")),
        rho_text=cell_text(spearman["rho"], ".2f"),
    )
    d, tip = null_free(
        d,
        [
            alt.Tooltip("dataset:N"),
            alt.Tooltip("target:N"),
            alt.Tooltip("name:N"),
            alt.Tooltip("rho:Q", format=".2f"),
            alt.Tooltip("p_adj:Q", format=".3g"),
            alt.Tooltip("note:N"),
            alt.Tooltip("n:Q"),
        ],
    )
    base = alt.Chart(_records(d)).encode(
        y=alt.Y("name:N", sort=[names["all"], *[names[b] for b in tax.ids]], title=None),
        x=alt.X("target:N", title=None, axis=alt.Axis(labelAngle=-40)),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "rho:Q", scale=alt.Scale(scheme="redblue", domain=[-1, 1], reverse=True), title=_titled("Spearman ρ", d)
        ),
        tooltip=tip,
    )
    text = base.mark_text(fontSize=9).encode(text=alt.Text("rho_text:N", title="rho"))
    return alt.layer(rect, text, width=24 * max(1, d["target"].n_unique()), height=220).facet(
        facet=alt.Facet("dataset:N", title=None), columns=2
    )


def likert_chart(likert: pl.DataFrame, *, judge: str | None = None) -> alt.FacetChart:
    """Mean consistency and collaborativeness per target with 95% CIs (Table 4)."""
    d = with_words(likert if judge is None else likert.filter(pl.col("judge") == judge))
    d, tip = null_free(
        d,
        [
            alt.Tooltip("target:N"),
            alt.Tooltip("score:N"),
            alt.Tooltip("mean:Q", format=".2f", title="mean score"),
            alt.Tooltip("interval:N", title="interval"),
        ],
    )
    base = alt.Chart(_records(d)).encode(y=alt.Y("target:N", title=None))
    human = (alt.datum.target == REFERENCE) | (alt.datum.series == HUMAN)  # likert_vs_human rows carry a series
    pts = base.mark_point(filled=True, size=60).encode(
        x=alt.X("mean:Q", scale=alt.Scale(domain=[1, 10]), title=_titled("mean score (1-10), 95% CI", d)),
        color=alt.ColorValue(**alt.condition(human, alt.value("#111"), alt.value("#2471a3"))),
        tooltip=tip,
    )
    err = _whiskers(base, "x")
    mark = _undefined(base, "x", "mean", tooltip=tip)
    return alt.layer(err, pts, mark, width=260).facet(column=alt.Column("score:N", title=None))


def dataset_heatmap(means_by_dataset: pl.DataFrame, tax: Taxonomy, *, judge: str | None = None) -> alt.FacetChart:
    """Mean occurrences per behaviour and dataset, one panel per target (Table 11)."""
    d = means_by_dataset if judge is None else means_by_dataset.filter(pl.col("judge") == judge)
    names = _names(tax)
    d = d.with_columns(
        name=pl.col("behaviour").replace_strict(names, default=pl.col("behaviour")),
        mean_text=cell_text(d["mean"], ".1f"),
    )
    d, tip = null_free(
        d,
        [
            alt.Tooltip("target:N"),
            alt.Tooltip("dataset:N"),
            alt.Tooltip("name:N"),
            alt.Tooltip("mean:Q", format=".2f"),
            alt.Tooltip("n:Q"),
        ],
    )
    base = alt.Chart(_records(d)).encode(
        x=alt.X("name:N", sort=[names[b] for b in tax.ids], title=None, axis=alt.Axis(labelAngle=-40)),
        y=alt.Y("dataset:N", title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("mean:Q", scale=alt.Scale(scheme="orangered"), title=_titled(["mean per", "conversation"], d)),
        tooltip=tip,
    )
    text = base.mark_text(fontSize=9).encode(text=alt.Text("mean_text:N", title="mean"))
    return alt.layer(rect, text, width=300, height=140).facet(facet=alt.Facet("target:N", title=None), columns=2)


def participants_chart(
    per_conversation: pl.DataFrame, *, x_title: str = "participants"
) -> alt.LayerChart | alt.FacetChart:
    """Total behaviour count per conversation against its number of participants (Table 12).
    ``per_conversation``: dataset, n_participants, total (already aggregated per instance);
    ``x_title`` says how participants were counted."""
    pts = (
        alt.Chart(_records(per_conversation))
        .mark_circle(size=40, opacity=0.6)
        .encode(
            x=alt.X("n_participants:Q", title=x_title),
            y=alt.Y("total:Q", title="behaviours per conversation"),
            color=alt.Color("dataset:N"),
            tooltip=[alt.Tooltip("dataset:N"), alt.Tooltip("n_participants:Q"), alt.Tooltip("total:Q")],
        )
    )
    trend = pts.transform_regression("n_participants", "total", groupby=["dataset"]).mark_line()
    return alt.layer(pts, trend, width=360, height=240)


def agreement_chart(agree: pl.DataFrame) -> alt.FacetChart:
    """Average leave-one-out Spearman per comparison (inter-human, each judge against the
    annotators; ``agreement.agreement_table`` rows), one panel per item, with the bootstrap 5th-95th
    range of the paper's one-sided test (a cross instead where the range is undefined; no mark
    where ρ itself is undefined)."""
    agree = with_words(agree, "p5", "p95", what="bootstrap 5th–95th percentile")
    agree, tip = null_free(
        agree,
        [
            alt.Tooltip("comparison:N"),
            alt.Tooltip("item:N"),
            alt.Tooltip("rho:Q", format=".2f", title="Spearman ρ"),
            alt.Tooltip("interval:N", title="interval"),
            *([alt.Tooltip("note:N")] if "note" in agree.columns else []),
        ],
    )
    base = alt.Chart(_records(agree)).encode(y=alt.Y("comparison:N", title=None))
    bars = base.mark_bar().encode(
        x=alt.X(
            "rho:Q",
            scale=alt.Scale(domain=[-1, 1]),
            title=_titled(
                ["average leave-one-out Spearman ρ", "bootstrap 5th–95th percentile"], agree, "conversations"
            ),
        ),
        color=alt.Color(
            "significant:N", scale=alt.Scale(domain=[True, False], range=["#1e8449", "#aaa"]), title="5th pct > 0"
        ),
        tooltip=tip,
    )
    err = _whiskers(base, "x", "p5", "p95")
    mark = _undefined(base, "x", "rho", "p5", "p95", tooltip=tip)
    return alt.layer(bars, err, mark, width=220).facet(column=alt.Column("item:N", title=None))


PIPELINE_CHECK = "pipeline check — tiny model, not results"
VERDICT_COLOURS = {
    "higher than humans": "#c0392b",
    "lower than humans": "#2471a3",
    "no significant difference": "#888",
    "not tested": "#bbb",
}


def titled(chart: alt.TopLevelMixin, title: str) -> alt.TopLevelMixin:
    """The chart with a title (e.g. ``PIPELINE_CHECK`` on a judge-based figure of a tiny-model run)."""
    return chart.properties(title=title)


def _statistic_labels(df: pl.DataFrame, labels: dict[str, str] | None) -> pl.DataFrame:
    return df.with_columns(label=pl.col("statistic").replace_strict(labels or {}, default=pl.col("statistic")))


def _label_order(d: pl.DataFrame, labels: dict[str, str] | None) -> list[str]:
    present = set(d["statistic"].to_list())
    order = [s for s in (labels or {}) if s in present] + [
        s for s in d["statistic"].to_list() if s not in (labels or {})
    ]
    return [(labels or {}).get(s, s) for s in dict.fromkeys(order)]


def convstats_chart(means: pl.DataFrame, *, labels: dict[str, str] | None = None, columns: int = 4) -> alt.FacetChart:
    """Judge-free statistics (``convcompare.means``): one panel per statistic (its own scale), the
    mean per target with its 95% CI (a cross where undefined), the human reference in black."""
    d = with_words(_statistic_labels(means.filter(pl.col("mean").is_not_null()), labels), digits=3)
    order = d["target"].unique(maintain_order=True).to_list()
    base = alt.Chart(_records(d)).encode(y=alt.Y("target:N", title=None, sort=order))
    tip = [
        alt.Tooltip("target:N"),
        alt.Tooltip("label:N", title="statistic"),
        alt.Tooltip("mean:Q", format=".3f", title="mean"),
        alt.Tooltip("interval:N", title="interval"),
        *([alt.Tooltip("undefined:Q", title="conversations where undefined")] if "undefined" in d.columns else []),
    ]
    pts = base.mark_point(filled=True, size=50).encode(
        x=alt.X("mean:Q", title=None, scale=alt.Scale(zero=False)),
        color=alt.ColorValue(**alt.condition(alt.datum.target == REFERENCE, alt.value("#111"), alt.value("#2471a3"))),
        tooltip=tip,
    )
    err = _whiskers(base, "x")
    mark = _undefined(base, "x", "mean", tooltip=tip)
    return alt.layer(err, pts, mark, width=170, height=18 * max(1, len(order))).facet(
        facet=alt.Facet("label:N", title=None, sort=_label_order(d, labels)), columns=columns, resolve=_independent("x")
    )


def convstats_diff_chart(
    paired: pl.DataFrame, *, labels: dict[str, str] | None = None, columns: int = 4
) -> alt.FacetChart:
    """Setup minus human reference per judge-free statistic (``convcompare.paired_vs_human``),
    paired over instances, with 95% CIs; colour: the corrected verdict; a rule at 0."""
    d = with_words(
        _statistic_labels(paired, labels).with_columns(verdict=pl.col("verdict").fill_null("not tested")),
        "diff_ci_low",
        "diff_ci_high",
        digits=3,
    )
    d, tip = null_free(
        d,
        [
            alt.Tooltip("target:N"),
            alt.Tooltip("label:N", title="statistic"),
            alt.Tooltip("diff:Q", format=".3f", title="setup − human"),
            alt.Tooltip("interval:N", title="interval"),
            alt.Tooltip("p_adj:Q", format=".3g", title="corrected p"),
            alt.Tooltip("verdict:N"),
        ],
    )
    base = alt.Chart(_records(d)).encode(y=alt.Y("target:N", title=None))
    pts = base.mark_point(filled=True, size=50).encode(
        x=alt.X("diff:Q", title=None),
        tooltip=tip,
        color=alt.Color(
            "verdict:N",
            scale=alt.Scale(domain=list(VERDICT_COLOURS), range=list(VERDICT_COLOURS.values())),
            title="vs humans",
        ),
    )
    err = _whiskers(base, "x", "diff_ci_low", "diff_ci_high")
    mark = _undefined(base, "x", "diff", "diff_ci_low", "diff_ci_high", tooltip=tip)
    zero = base.mark_rule(color="#999", strokeDash=[3, 3]).encode(x=alt.XDatum(0))
    n_targets = max(1, d["target"].n_unique())
    return alt.layer(zero, err, pts, mark, width=170, height=18 * n_targets).facet(
        facet=alt.Facet("label:N", title=None, sort=_label_order(d, labels)), columns=columns, resolve=_independent("x")
    )


def leaderboard_chart(board: pl.DataFrame) -> alt.FacetChart:
    """The leaderboard (``leaderboard.leaderboard``): one panel per judge (never ranked together),
    each setup's distance to the humans with its 95% CI (a cross where undefined), best first, and
    the floor (two halves of the human references) as a grey band (its 95% range) with a rule at
    its mean: a setup inside the band is as close to the humans as humans are to each other. A
    setup whose rank interval (``rank_low``–``rank_high``, beyond the paper) spans several ranks is
    labelled with it: its rank is unsettled."""
    unsettled = pl.col("rank_low") != pl.col("rank_high") if "rank_low" in board.columns else pl.lit(False)
    d = board.with_columns(
        label=pl.when(pl.col("rank").is_not_null() & unsettled.fill_null(False))
        .then(pl.format("{}. {} (rank {}–{})", "rank", "setup", "rank_low", "rank_high"))
        .when(pl.col("rank").is_not_null())
        .then(pl.format("{}. {}", "rank", "setup"))
        .otherwise(pl.format("({})", "setup")),
        order=pl.col("rank").fill_null(10**6) + pl.col("distance").fill_null(0) / 10**6,
    )
    d, tip = null_free(
        with_words(d, digits=3),
        [
            alt.Tooltip("setup:N"),
            alt.Tooltip("group:N"),
            alt.Tooltip("distance:Q", format=".3f"),
            alt.Tooltip("interval:N", title="interval"),
            alt.Tooltip("rank:Q"),
            alt.Tooltip("rank_low:Q", title="rank interval from"),
            alt.Tooltip("rank_high:Q", title="rank interval to"),
            alt.Tooltip("note:N"),
        ],
    )
    base = alt.Chart(_records(d))
    is_floor = "datum.origin === 'floor'"
    sims = base.transform_filter(f"!({is_floor})").encode(
        y=alt.Y("label:N", title=None, sort=alt.EncodingSortField("order", order="ascending"))
    )
    band = (
        base.transform_filter(f"{is_floor} && {DEFINED.format(lo='ci_low', hi='ci_high')}")
        .mark_rect(color="#999", opacity=0.25)
        .encode(x=alt.X("ci_low:Q"), x2=alt.X2("ci_high:Q"), tooltip=tip)
    )
    rule = (
        base.transform_filter(f"{is_floor} && isValid(datum.distance)")
        .mark_rule(color="#555", strokeDash=[4, 3])
        .encode(x=alt.X("distance:Q"), tooltip=tip)
    )
    pts = (
        sims.transform_filter("isValid(datum.distance)")
        .mark_point(filled=True, size=60)
        .encode(
            x=alt.X(
                "distance:Q",
                title=_titled(
                    [
                        "distance to the humans (RMS of the per-behaviour",
                        "paired differences, occurrences per conversation), 95% CI",
                    ],
                    d.filter(pl.col("origin").ne_missing("floor") & pl.col("distance").is_not_null()),
                ),
            ),
            color=alt.Color("origin:N", title="origin"),
            tooltip=tip,
        )
    )
    err = _whiskers(sims.transform_filter("isValid(datum.distance)"), "x")
    mark = _undefined(sims.transform_filter("isValid(datum.distance)"), "x", "distance", tooltip=tip)
    per_judge = d.filter(pl.col("origin").ne_missing("floor")).group_by("judge").len()["len"].to_list()
    n_rows = max([1, *per_judge])
    return alt.layer(band, rule, err, pts, mark, width=360, height=20 * n_rows).facet(
        row=alt.Row("judge:N", title="judge"), resolve=_independent("y")
    )


PAIRED_COLOURS = {
    "row closer": "#1e8449",
    "row farther": "#c0392b",
    "no significant difference": "#bbbbbb",
    "not tested": "#ffffff",
}


def paired_chart(pairs: pl.DataFrame) -> alt.FacetChart:
    """The setup × setup view of the paired comparisons (``paired.compare_setups``, beyond the
    paper): one panel per judge; the cell of row r and column c is r's distance to the humans
    minus c's on the instances the two and the humans share, coloured by the Holm-corrected
    verdict (row closer, row farther, no significant difference, not tested), its text the
    difference and, in brackets, how many behaviours differ significantly (corrected over the
    behaviours of the pair); tooltips with the interval, p and n."""
    dist = pairs.filter(pl.col("behaviour") == "distance")
    beh = (
        pairs.filter(pl.col("behaviour") != "distance")
        .group_by("judge", "a", "b")
        .agg(behaviours_differing=(pl.col("verdict").is_in(["a higher", "b higher"])).sum())
    )
    d = dist.join(beh, on=["judge", "a", "b"], how="left")
    flipped = d.select(
        "judge",
        pl.col("b").alias("a"),
        pl.col("a").alias("b"),
        *[c for c in d.columns if c not in ("judge", "a", "b")],
    ).with_columns(
        -pl.col("diff"),
        (-pl.col("ci_high")).alias("ci_low"),
        (-pl.col("ci_low")).alias("ci_high"),
        verdict=pl.col("verdict").replace({"a farther": "b farther", "b farther": "a farther"}),
    )
    both = pl.concat([d, flipped.select(d.columns)])
    both = with_words(both, digits=3).with_columns(
        cell=pl.when(pl.col("verdict") == "a farther")
        .then(pl.lit("row farther"))
        .when(pl.col("verdict") == "b farther")
        .then(pl.lit("row closer"))
        .when(pl.col("verdict").is_not_null())
        .then(pl.lit("no significant difference"))
        .otherwise(pl.lit("not tested")),
        text=pl.when(pl.col("diff").is_not_null())
        .then(
            pl.format(
                "{} ({})",
                pl.when(pl.col("diff").round(2) == 0).then(0.0).otherwise(pl.col("diff").round(2)).cast(pl.Utf8),
                pl.col("behaviours_differing").fill_null(0).cast(pl.Utf8),
            )
        )
        .otherwise(pl.lit("–")),
        row=pl.col("a"),
        column=pl.col("b"),
    )
    order = list(dict.fromkeys([*dist["a"].to_list(), *dist["b"].to_list()]))
    both, tip = null_free(
        both,
        [
            alt.Tooltip("row:N", title="setup"),
            alt.Tooltip("column:N", title="compared with"),
            alt.Tooltip("diff:Q", format=".3f", title="distance(row) − distance(column)"),
            alt.Tooltip("interval:N", title="interval"),
            alt.Tooltip("p_adj:Q", format=".3g", title="p (Holm over the pairs)"),
            alt.Tooltip("behaviours_differing:Q", title="behaviours differing (corrected)"),
            alt.Tooltip("note:N"),
        ],
    )
    base = alt.Chart(_records(both)).encode(
        x=alt.X("column:N", title="compared with (column)", sort=order),
        y=alt.Y("row:N", title="setup (row)", sort=order),
    )
    cells = base.mark_rect(stroke="#888", strokeWidth=0.5).encode(
        color=alt.Color(
            "cell:N",
            title="distance to the humans",
            scale=alt.Scale(domain=list(PAIRED_COLOURS), range=list(PAIRED_COLOURS.values())),
        ),
        tooltip=tip,
    )
    text = base.mark_text(fontSize=10).encode(text=alt.Text("text:N"), tooltip=tip)
    side = max(1, len(order))
    return alt.layer(cells, text, width=min(60 * side, 600), height=min(28 * side, 600)).facet(
        row=alt.Row("judge:N", title="judge")
    )


def detectability_chart(table: pl.DataFrame) -> alt.TopLevelMixin:
    """The judge-free classifier test (``detectability.detectability``, beyond the paper): each
    setup's AUC of telling its continuations from the humans' with its 95% interval (a cross where
    undefined), a dashed rule at 0.5 (indistinguishable by this classifier) and the floor (humans
    against humans) as a grey band (its interval) with a rule at its AUC. Rows without an AUC (too
    few instances or conversations) are left out: the table says why."""
    d = with_words(table.filter(pl.col("auc").is_not_null()), digits=3)
    is_floor = "datum.comparison !== 'setup vs the human reference of the same instances'"
    order = d.filter(pl.col("comparison") == "setup vs the human reference of the same instances")["target"].to_list()
    d, tip = null_free(
        d,
        [
            alt.Tooltip("target:N"),
            alt.Tooltip("comparison:N"),
            alt.Tooltip("auc:Q", format=".3f", title="AUC"),
            alt.Tooltip("interval:N", title="interval"),
            alt.Tooltip("p:Q", format=".3g", title="p (AUC > 0.5)"),
            alt.Tooltip("conversations:Q", title="source conversations"),
        ],
    )
    base = alt.Chart(_records(d))
    x = alt.X(
        "auc:Q",
        scale=alt.Scale(domain=[0, 1]),
        title=_titled(
            ["AUC of a classifier telling the setup from the humans", "(0.5: indistinguishable), 95% interval"],
            d.filter(~pl.col("target").str.starts_with("floor")),
        ),
    )
    band = (
        base.transform_filter(f"{is_floor} && {DEFINED.format(lo='ci_low', hi='ci_high')}")
        .mark_rect(color="#999", opacity=0.25)
        .encode(x=alt.X("ci_low:Q", scale=alt.Scale(domain=[0, 1])), x2=alt.X2("ci_high:Q"), tooltip=tip)
    )
    floor_rule = base.transform_filter(is_floor).mark_rule(color="#555", strokeDash=[4, 3]).encode(x=x, tooltip=tip)
    half = alt.Chart(alt.Data(values=({"half": 0.5},))).mark_rule(color="#c0392b").encode(x=alt.X("half:Q"))
    sims = base.transform_filter(f"!({is_floor})").encode(y=alt.Y("target:N", title=None, sort=order))
    pts = sims.mark_point(filled=True, size=60, color="#2471a3").encode(x=x, tooltip=tip)
    err = _whiskers(sims, "x")
    mark = _undefined(sims, "x", "auc", tooltip=tip)
    return alt.layer(band, floor_rule, half, err, pts, mark, width=420, height=22 * max(1, len(order)))


VEGALITE_V5_MIME = "application/vnd.vegalite.v5+json"
"""The mime type JupyterLab renders itself (its own vega-embed, no widget, no JavaScript in the notebook)."""
VEGALITE_V5_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
_COMPOSITIONS = ("facet", "layer", "hconcat", "vconcat", "concat", "repeat")


def mimebundle(
    chart: alt.TopLevelMixin | dict[str, Any], embed_options: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chart as a Jupyter display bundle ``(data, metadata)`` of mime type ``VEGALITE_V5_MIME``,
    which JupyterLab (its built-in, trust-independent Vega-Lite 5 renderer), Notebook 7 and VS Code
    draw with their own vega-embed: the output holds the spec only, no JavaScript, and needs no network.
    The spec is ``chart.to_dict()`` (validated; a dict is taken as such a spec) under the Vega-Lite 5
    schema: Altair writes v6 specs, which use nothing v5 lacks (tests/notebooks/test_mimebundle.py
    compiles every chart under Vega-Lite 5.8). ``embed_options``: vega-embed's, read by the
    frontend from ``metadata[VEGALITE_V5_MIME]["embed_options"]``. ``text/plain`` names the chart."""
    spec = dict(chart) if isinstance(chart, dict) else chart.to_dict()
    spec.pop("$schema", None)
    spec = {"$schema": VEGALITE_V5_SCHEMA, **spec}
    return (
        {VEGALITE_V5_MIME: spec, "text/plain": describe(spec)},
        {VEGALITE_V5_MIME: {"embed_options": dict(embed_options or {})}},
    )


def _title_text(spec: dict[str, Any]) -> str:
    t = spec.get("title")
    if isinstance(t, dict):
        t = t.get("text")
    if isinstance(t, list):
        t = " ".join(str(x) for x in t)
    return str(t) if t else ""


def describe(spec: dict[str, Any]) -> str:
    """One line naming a Vega-Lite spec: its title (or its first inner title) and its kind, e.g.
    ``Vega-Lite chart (facet of layer): Human conversations``."""
    kinds, title, s = [], "", spec
    for _ in range(4):  # a facet of a layer of marks is as deep as ours go
        title = title or _title_text(s)
        key = next((k for k in _COMPOSITIONS if k in s and not (k == "facet" and "spec" not in s)), None)
        if key is None:
            mark = s.get("mark")
            kinds.append(str(mark.get("type") if isinstance(mark, dict) else mark or "chart"))
            break
        kinds.append(key)
        inner = s.get("spec") if key in ("facet", "repeat") else s.get(key)
        s = inner[0] if isinstance(inner, list) and inner else inner if isinstance(inner, dict) else {}
    return f"Vega-Lite chart ({' of '.join(kinds)})" + (f": {title}" if title else "")


def save(chart: alt.TopLevelMixin | dict[str, Any], path_base: str | Path, *, scale: float = 2.0) -> list[Path]:
    """Write ``<path_base>.png`` and ``.svg`` with vl-convert (no browser), and the Vega-Lite spec
    as ``<path_base>.vl.json`` (what the HTML report embeds; the Vega editor opens it too); as the
    report writes them: in a rendering process (``render.Renderer``), with its fonts, waited for.
    Raises ``render.RenderError`` when vl-convert refuses the chart. ``chart``: a chart, or its
    ``to_dict()`` spec (already made, e.g. for display: written as ``to_json`` writes it; a test
    compares the bytes)."""
    from .render import Renderer

    base = Path(path_base)  # a dot in a name is no suffix
    with Renderer(1) as renderer:
        renderer.submit(spec_json(chart), base, scale)
    return figure_paths(base)


def spec_json(chart: alt.TopLevelMixin | dict[str, Any]) -> str:
    """The Vega-Lite spec text ``save`` writes and renders: ``chart.to_json()``, or a ``to_dict()``
    spec dumped as ``to_json`` dumps it (the same bytes; a test compares them)."""
    import json

    return (
        json.dumps(chart, indent=2, sort_keys=True, ensure_ascii=False) if isinstance(chart, dict) else chart.to_json()
    )


_PLAIN = frozenset({str, int, float, bool, type(None)})


def unchecked_json(chart: alt.TopLevelMixin) -> str:
    """``chart.to_json(validate=False)``, the same text (tested on every figure of the report),
    faster: the inline records of the chart's top-level data (``_records``) are put into the spec
    once Altair has written the rest, instead of Altair converting them value by value (a protocol
    check each: 40 ms of a 5,000-value figure). Records holding anything but plain JSON values
    (str, int, float, bool, None), or data given otherwise, go through Altair as they are."""
    data = getattr(chart, "data", alt.Undefined)
    given = {k for k in ("values", "format", "name") if getattr(data, k, alt.Undefined) is not alt.Undefined}
    rows = data.values if isinstance(data, alt.Data) and given == {"values"} else None
    if not isinstance(rows, tuple) or any(
        type(r) is not dict or any(type(v) not in _PLAIN for v in r.values()) for r in rows
    ):
        return chart.to_json(validate=False)
    chart.data = alt.Data(values=())
    try:
        spec = chart.to_dict(validate=False)
    finally:
        chart.data = data
    if spec.get("data") != {"values": []}:  # Altair moved or changed it: leave it to Altair
        return chart.to_json(validate=False)
    spec["data"] = {"values": list(rows)}
    return spec_json(spec)


def figure_paths(base: str | Path) -> list[Path]:
    """The image files ``save`` writes for ``base``: PNG and SVG (the spec beside them is not listed)."""
    base = Path(base)
    return [base.parent / f"{base.name}.png", base.parent / f"{base.name}.svg"]
