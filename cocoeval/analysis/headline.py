"""The report's first lines (``index.md``'s "At a glance", the top of ``index.html``): what was
compared, the leaderboard's top rows with their intervals and rank intervals, whether the judge
shown is validated, the invalid share and where the conversations are. Built from results the
report computed already (the leaderboard table, the judge's validation gate, the invalid
accounting), never from prose written while computing; ``headline_markdown`` renders it, and the
HTML page renders the same ``Headline`` (``html_report.headline_html``)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from cocoeval.core.text import md_escape

__all__ = ["TOP", "Headline", "LeaderRow", "Share", "headline", "headline_markdown"]

TOP = 5
"""Leaderboard rows the headline shows (the whole table is in the report below it)."""

NAMED = 8
"""Setups the headline names (the provenance lists them all)."""

TITLE = "At a glance"
"""The headline's section title (index.md, index.html)."""


@dataclass(frozen=True)
class LeaderRow:
    """One setup of the leaderboard as the headline shows it."""

    setup: str
    rank: int
    rank_low: int | None
    rank_high: int | None
    distance: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass(frozen=True)
class Share:
    """How many of ``total`` ended invalid."""

    invalid: int
    total: int
    missing: int = 0
    """Expected by the run's params but absent (never counted in ``total``)."""

    @property
    def rate(self) -> float | None:
        return self.invalid / self.total if self.total else None


@dataclass(frozen=True)
class Headline:
    """What the report's first screen says."""

    setups: tuple[str, ...]
    """Every setup of the run (the manifest's, then any other with continuations)."""
    judges: tuple[str, ...]
    """The LLM judges with judgments in the run."""
    judge: str | None
    """The judge the judge-based figures and the leaderboard rows show."""
    datasets: tuple[tuple[str, int], ...]
    """(dataset, instances), sorted by dataset."""
    instances: int
    conversations: int
    """Source conversations the instances were cut from (windows of one meeting are one)."""
    leaders: tuple[LeaderRow, ...]
    """The ``TOP`` best ranked setups of ``judge``, best first."""
    ranked: int
    """How many setups ``judge`` ranks (the leaderboard table has them all)."""
    floor: tuple[float | None, float | None, float | None] | None
    """The floor's distance and interval (two halves of the human references), if computed."""
    not_ranked: str | None
    """Why no setup is ranked (the leaderboard's "not run" line: then no row is shown, as the
    leaderboard's section shows none), else None."""
    validated: int | None
    """Behaviours ``judge`` is validated for (the validation gate), None without a judge."""
    behaviours: int
    validation_why: str | None
    """The gate's most common reason a behaviour is not validated (e.g. "no annotations")."""
    continuations: Share
    judgments: Share
    pipeline_check: bool


def _int(v: object) -> int | None:
    return int(v) if isinstance(v, int | float) and v == v else None


def _float(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and v == v else None


def headline(
    *,
    setups: list[str],
    judges: list[str],
    judge: str | None,
    instances: pl.DataFrame,
    board: pl.DataFrame | None,
    not_ranked: str | None,
    gate: pl.DataFrame | None,
    rates: pl.DataFrame,
    behaviours: int,
    pipeline_check: bool,
) -> Headline:
    """The headline from the report's results: ``instances`` (``Frames.instances``), ``board``
    (the leaderboard table, or None), ``gate`` (``judge_check.gate`` of ``judge``, or None) and
    ``rates`` (``invalid_rates``)."""
    ds = instances.group_by("dataset").len().sort("dataset") if not instances.is_empty() else None
    conv = (
        instances.select(pl.col("conversation").fill_null(pl.col("instance_id"))).n_unique()
        if "conversation" in instances.columns and not instances.is_empty()
        else instances.height
    )
    leaders: list[LeaderRow] = []
    ranked = 0
    floor = None
    if board is not None and not board.is_empty() and judge is not None and not_ranked is None:
        mine = board.filter(pl.col("judge") == judge)
        fl = mine.filter(pl.col("origin") == "floor")
        if not fl.is_empty():
            r = fl.row(0, named=True)
            floor = (_float(r["distance"]), _float(r["ci_low"]), _float(r["ci_high"]))
        ok = mine.filter(pl.col("rank").is_not_null() & (pl.col("origin").fill_null("") != "floor")).sort(
            "rank", "distance"
        )
        ranked = ok.height
        for r in ok.head(TOP).iter_rows(named=True):
            leaders.append(
                LeaderRow(
                    setup=str(r["setup"]),
                    rank=int(r["rank"]),
                    rank_low=_int(r.get("rank_low")),
                    rank_high=_int(r.get("rank_high")),
                    distance=_float(r["distance"]),
                    ci_low=_float(r["ci_low"]),
                    ci_high=_float(r["ci_high"]),
                    n=int(r["n"]),
                )
            )
    validated = why = None
    if gate is not None and not gate.is_empty():
        validated = int(gate["validated"].sum())
        nots = gate.filter(~pl.col("validated"))["status"].drop_nulls()
        why = str(nots.mode().sort()[0]) if not nots.is_empty() else None

    def share(stage: str) -> Share:
        r = rates.filter(pl.col("stage") == stage)
        if stage == "judge":  # the LLM judges' judgments, not the annotators'
            r = r.filter(pl.col("judge").is_in(judges))
        if r.is_empty():
            return Share(0, 0)
        missing = int(r["missing"].fill_null(0).sum()) if "missing" in r.columns else 0
        return Share(int(r["invalid"].sum()), int((r["n"] - r["skipped"]).sum()), missing)

    return Headline(
        setups=tuple(setups),
        judges=tuple(judges),
        judge=judge,
        datasets=tuple((str(d), int(n)) for d, n in ds.iter_rows()) if ds is not None else (),
        instances=instances.height,
        conversations=int(conv),
        leaders=tuple(leaders),
        ranked=ranked,
        floor=floor,
        not_ranked=not_ranked,
        validated=validated,
        behaviours=behaviours,
        validation_why=why,
        continuations=share("simulate"),
        judgments=share("judge"),
        pipeline_check=pipeline_check,
    )


def number(v: float | None, digits: int = 3) -> str:
    """A number of the headline ("–": undefined)."""
    return "–" if v is None else f"{v:.{digits}f}"


def interval(lo: float | None, hi: float | None) -> str:
    return "–" if lo is None or hi is None else f"{lo:.3f}–{hi:.3f}"


def ranks(r: LeaderRow) -> str:
    """The rank interval: "1" when settled, "1–3" when the data support several ranks."""
    if r.rank_low is None or r.rank_high is None:
        return "–"
    return str(r.rank_low) if r.rank_low == r.rank_high else f"{r.rank_low}–{r.rank_high}"


def compared(h: Headline) -> str:
    """What was compared, in one sentence (plain text: the renderers escape it)."""
    ds = ", ".join(f"{d} ({n:,})" for d, n in h.datasets) or "none"
    judges = ", ".join(h.judges) or "none"
    names = ", ".join(h.setups[:NAMED]) + (f" and {len(h.setups) - NAMED} more" if len(h.setups) > NAMED else "")
    return (
        f"{len(h.setups)} setup(s) ({names or 'none'}) against the human references of "
        f"{h.instances:,} instance(s) cut from {h.conversations:,} source conversation(s); datasets: {ds}; "
        f"LLM judge(s): {judges}."
    )


def validation_words(h: Headline) -> str:
    """Whether the judge shown is validated (the gate of ``judge_check``)."""
    if h.judge is None or h.validated is None:
        return "no LLM judge: the judge-based statistics are not computed."
    if h.validated == h.behaviours:
        return (
            f"{h.judge} is validated for all {h.behaviours} behaviours against the human annotations (judge_validation; "
            "beyond the paper: the validation gate)."
        )
    why = f" ({h.validation_why})" if h.validation_why else ""
    return (
        f"{h.judge} is NOT validated for {h.behaviours - h.validated} of {h.behaviours} behaviours{why}: its rates "
        "of those are marked in every figure and table (judge_validation; beyond the paper: the validation gate)."
    )


def invalid_words(h: Headline) -> str:
    """The invalid share of the continuations and the judgments."""

    def one(s: Share, what: str) -> str:
        rate = s.rate
        out = f"{s.invalid:,} of {s.total:,} {what}" + ("" if rate is None else f" ({100 * rate:.1f}%)")
        return out + (f" ({s.missing:,} more expected but missing)" if s.missing else "")

    return f"{one(h.continuations, 'continuations')} and {one(h.judgments, 'judgments')} invalid (invalid_rates)."


def headline_markdown(h: Headline, viewer: str) -> list[str]:
    """The headline as index.md lines; ``viewer``: where the conversations are."""
    lines = [f"## {TITLE}\n", f"**Compared**: {md_escape(compared(h))}\n"]
    if h.leaders:
        lines.append(
            f"**Closest to the humans** (judge {md_escape(h.judge or '')}; the {len(h.leaders)} best of "
            f"{h.ranked} ranked; distance to the humans, 95% CI; rank interval: the ranks the data support; beyond the paper: the leaderboard):\n"
        )
        lines.append("| rank | setup | distance | 95% CI | rank interval | n |\n|---|---|---|---|---|---|")
        lines += [
            f"| {r.rank} | {md_escape(r.setup)} | {number(r.distance)} | {interval(r.ci_low, r.ci_high)} | "
            f"{ranks(r)} | {r.n} |"
            for r in h.leaders
        ]
        if h.floor is not None:
            lines.append(
                f"| – | floor (two halves of the humans) | {number(h.floor[0])} | {interval(h.floor[1], h.floor[2])} "
                "| – | – |"
            )
        lines.append("")
    else:
        lines.append(f"**Leaderboard**: {h.not_ranked or 'no setup is ranked.'}\n")
    lines += [
        f"**Judge**: {md_escape(validation_words(h))}\n",
        f"**Invalid**: {invalid_words(h)}\n",
        f"**Conversations**: {viewer}\n",
    ]
    return lines
