"""A leaderboard of simulators: every setup of a run (simulated, imported, plugin) ranked, per
judge, by how far its behaviour profile is from the humans' on the same instances.

- **Per behaviour** the paired difference in mean occurrences per conversation, setup minus human
  reference, over the instances where both have a valid fine-grained judgment by the judge (the
  ``n`` of the row), with a 95% percentile bootstrap interval over those instances (pairs
  resampled together: the same draws as ``stats.paired_vs_human``, so the same intervals).
- **The aggregate distance** over the K behaviours is the root mean square of the per-behaviour
  paired differences, RMS = √(Σ_b d_b² / K): in the unit of the bars (occurrences per
  conversation); a mean, so a taxonomy with more behaviours does not inflate it; and the square
  weighs one behaviour far off more than several a little off (a simulator that doubles one
  behaviour is less human than one off by a hair everywhere). The report's profile distance D =
  Σ|d_b| (L1) is beside it (``D``). Its interval: the RMS of each bootstrap resample's
  differences, percentile 95%.
- **The floor**: what a perfect simulator would still get. Each resample draws the judge's n valid
  human references with replacement and splits the draw into two halves of ⌊n/2⌋; the RMS between
  the halves' mean profiles is the distance between two sets of human conversations. The floor
  row shows its mean over the resamples and its 2.5–97.5 percentile range. Its halves hold n/2
  conversations each, so for a setup compared on n instances it is a generous yardstick: a
  distance inside it is as close to the humans as humans are to each other.
- Beside them: the Likert gap (consistency and collaborativeness, setup minus human on the
  instances both have a valid overall judgment, ``paper_stats.likert_vs_human``) and the
  judge-free turn-taking distances (``convcompare.turn_taking``: the same for every judge).
- Setups judged by different judges are never ranked together: one ranking per judge (LLM judges
  only; annotators' samples are the agreement's). A setup is ranked when its distance rests on at
  least ``min_n`` instances; the others are listed below, unranked, with the reason, as is a
  setup with no valid judgment (n = 0). Continuations and judgments are counted: ok or valid of
  every one present or expected (``frames.invalid_rates``), never dropped silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from cocoeval.core.targets import REFERENCE
from cocoeval.core.text import md_escape

from . import charts, inference, paper_stats, stats
from .answer import Answer, ci_text, interval_method, setup_labels
from .convstats import HISTORY
from .coverage import HOW, not_run
from .frames import Frames, invalid_rates, validity_note

if TYPE_CHECKING:
    from cocoeval.run import Run

FLOOR = "floor: two halves of the humans"
"""The floor row's setup (not a setup name: those are file names, with no space or colon)."""
ORIGIN_FLOOR = "floor"
LIKERT = ("consistency", "collaborativeness")
TURNS = ("transition_distance", "speaker_entropy_diff")

_F, _I, _S = pl.Float64, pl.Int64, pl.Utf8
BOARD_SCHEMA: dict[str, Any] = {
    "judge": _S, "rank": _I, "setup": _S, "group": _S, "origin": _S, "n": _I,
    "distance": _F, "ci_low": _F, "ci_high": _F, "ci_note": _S, "D": _F, "D_ci_low": _F, "D_ci_high": _F,
    **{f"{s}_gap{x}": t for s in LIKERT for x, t in (("", _F), ("_ci_low", _F), ("_ci_high", _F))},
    "likert_n": _I,
    **{f"{m}{x}": t for m in TURNS for x, t in (("", _F), ("_ci_low", _F), ("_ci_high", _F), ("_n", _I))},
    "continuations_ok": _I, "continuations": _I, "judgments_valid": _I, "judgments": _I, "note": _S}
BEHAVIOUR_SCHEMA: dict[str, Any] = {
    "judge": _S, "setup": _S, "behaviour": _S, "mean_sim": _F, "mean_human": _F, "diff": _F,
    "diff_ci_low": _F, "diff_ci_high": _F, "ci_note": _S, "n": _I}


def rms(d: np.ndarray) -> np.ndarray:
    """Root mean square over the last axis (the behaviours)."""
    return np.sqrt(np.mean(np.square(d), axis=-1))


def half_means(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Means of the rows of ``x`` (n, k) drawn by each row of ``idx`` (B, m), m ≤ n, as (B, k):
    ``stats.resample_means`` for draws of another size than n."""
    b, m = idx.shape
    n = len(x)
    w = np.bincount((idx + np.arange(b)[:, None] * n).ravel(), minlength=b * n).reshape(b, n)
    return (w.astype(np.float64) @ x) / m


def floor(h: np.ndarray, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """The RMS distance between two random halves of the human references ``h`` (n, K), one per
    resample (B,): each resample draws n references with replacement and splits the draw into
    its first and second ⌊n/2⌋. Empty below two references."""
    n = len(h)
    m = n // 2
    if m < 1:
        return np.empty(0)
    idx = stats.boot_index(n, resamples, seed)
    return rms(half_means(h, idx[:, :m]) - half_means(h, idx[:, m:2 * m]))


def _interval(point: float, boot: np.ndarray, n: int, min_n: int) -> tuple[float | None, float | None, str | None]:
    note = inference.ci_notes(n, boot[:, None], min_n)[0]
    lo, hi = np.percentile(boot, stats.PERCENTILES)
    a, b = inference.interval(lo, hi, note)
    return a, b, note


def paired_profiles(pairs: dict[str, tuple[np.ndarray, np.ndarray]], resamples: int = 1000, seed: int = 0, *,
                    min_n: int = inference.MIN_N) -> dict[str, dict[str, Any]]:
    """For each setup's (setup counts, human counts) on the same instances, both (n, K): the
    per-behaviour paired differences with their intervals, the RMS distance and D (L1) with theirs.
    Setups of the same n share the seeded draws and are resampled in one matrix product."""
    by_n: dict[int, list[str]] = {}
    for name, (s, _) in pairs.items():
        by_n.setdefault(len(s), []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for n, names in by_n.items():
        k = pairs[names[0]][0].shape[1]
        d = np.hstack([pairs[x][0] - pairs[x][1] for x in names])  # (n, setups * K): pairs stay pairs
        boot = stats.resample_means(d, stats.boot_index(n, resamples, seed)).reshape(resamples, len(names), k)
        point = d.mean(axis=0).reshape(len(names), k)
        for j, name in enumerate(names):
            bj = boot[:, j, :]
            lo, hi = np.percentile(bj, stats.PERCENTILES, axis=0)
            notes = inference.ci_notes(n, bj, min_n)
            r_point, d_point = float(rms(point[j])), float(np.abs(point[j]).sum())
            out[name] = {"diff": point[j], "lo": lo, "hi": hi, "notes": notes, "n": n,
                         "distance": (r_point, *_interval(r_point, rms(bj), n, min_n)),
                         "D": (d_point, *_interval(d_point, np.abs(bj).sum(axis=1), n, min_n))}
    return out


def _counts(rates: pl.DataFrame, judge: str, target: str) -> dict[str, int | None]:
    """Continuations ok of all, judgments valid of all (present or expected) of one setup."""
    def row(stage: str, **where: Any) -> dict[str, Any] | None:
        r = rates.filter((pl.col("stage") == stage) & (pl.col("target") == target)
                         & pl.all_horizontal([pl.col(k) == v for k, v in where.items()] or [pl.lit(True)]))
        return r.row(0, named=True) if r.height else None

    c, j = row("simulate"), row("judge", judge=judge, kind="fine_grained")
    out: dict[str, int | None] = {"continuations_ok": None, "continuations": None, "judgments_valid": None,
                                  "judgments": None}
    if c is not None:
        out.update(continuations_ok=c["n"] - c["invalid"], continuations=c["n"] + (c["missing"] or 0))
    if j is not None:
        out.update(judgments_valid=j["n"] - j["invalid"] - j["skipped"],
                   judgments=j["n"] - j["skipped"] + (j["missing"] or 0))
    return out


def judges_of(f: Frames) -> list[str]:
    """The LLM judges with fine-grained judgments in the run or expected by its params."""
    fg = pl.col("kind") == "fine_grained"
    names = (f.counts.filter(~pl.col("human"))["judge"].to_list()
             + f.judgments.filter(~pl.col("human") & fg & (pl.col("status") != "stale"))["judge"].to_list()
             + f.expected.filter((pl.col("stage") == "judge") & fg)["judge"].to_list())
    return sorted({x for x in names if x is not None})


def setups_of(f: Frames, cond: pl.DataFrame | None) -> list[str]:
    """Every setup: the manifest's, then any other with continuations or judgments."""
    named = cond["setup"].to_list() if cond is not None else []
    seen = set(f.continuations["setup"].to_list()) | set(f.judgments["target"].to_list()) - {REFERENCE}
    return [*named, *sorted(seen - set(named))]


def leaderboard(f: Frames, cond: pl.DataFrame | None = None, turn_taking: pl.DataFrame | None = None, *,
                resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N,
                judges: list[str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The leaderboard (one row per judge and setup, the floor row first in each judge's block, then
    the ranked setups, then the unranked ones) and its per-behaviour differences. ``cond``:
    ``paper_stats.conditions`` (the group labels; None: no labels); ``turn_taking``:
    ``convcompare.turn_taking`` (None: no judge-free columns)."""
    inference.check_params(resamples=resamples, min_n=min_n)
    beh = f.taxonomy.ids
    groups = {} if cond is None else dict(zip(cond["setup"], cond["model_group"], strict=True))
    origins = {} if cond is None else dict(zip(cond["setup"], cond["origin"], strict=True))
    setups = setups_of(f, cond)
    rates = invalid_rates(f)
    turns: dict[str, dict[str, Any]] = {}
    if turn_taking is not None:
        for r in turn_taking.iter_rows(named=True):
            m = r["statistic"]
            turns.setdefault(r["target"], {}).update({m: r["mean"], f"{m}_ci_low": r["ci_low"],
                                                      f"{m}_ci_high": r["ci_high"], f"{m}_n": r["n"]})
    board: list[dict[str, Any]] = []
    per_b: list[dict[str, Any]] = []
    for judge in judges if judges is not None else judges_of(f):
        c = f.counts.filter(pl.col("judge") == judge)
        ref_ids, ref = stats.count_matrix(c.filter(pl.col("target") == REFERENCE), beh) \
            if c.filter(pl.col("target") == REFERENCE).height else ([], np.empty((0, len(beh))))
        pos = {i: k for k, i in enumerate(ref_ids)}
        mats = {t: stats.count_matrix(g, beh) for (t,), g in c.filter(pl.col("target") != REFERENCE).group_by("target")}
        pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for s in setups:
            if s in mats:
                ids, x = mats[s]
                keep = [k for k, i in enumerate(ids) if i in pos]
                if keep:
                    pairs[s] = (x[keep], ref[[pos[ids[k]] for k in keep]])
        prof = paired_profiles(pairs, resamples, seed, min_n=min_n)
        lk = paper_stats.likert_vs_human(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)
        gaps: dict[str, dict[str, Any]] = {}
        for r in lk.filter(pl.col("series") == paper_stats.DIFFERENCE).iter_rows(named=True):
            gaps.setdefault(r["target"], {}).update({f"{r['score']}_gap": r["mean"], f"{r['score']}_gap_ci_low": r["ci_low"],
                                                     f"{r['score']}_gap_ci_high": r["ci_high"], "likert_n": r["n"]})
        fl = floor(ref, resamples, seed)
        ref_counts = _counts(rates, judge, REFERENCE)
        if len(fl):
            lo, hi, note = _interval(float(fl.mean()), fl, len(ref), min_n)
        else:
            lo = hi = None
            note = f"fewer than two valid human references ({validity_note(f, judge, REFERENCE)})"
        board.append({"judge": judge, "setup": FLOOR, "group": "human references", "origin": ORIGIN_FLOOR,
                      "n": len(ref), "distance": float(fl.mean()) if len(fl) else None, "ci_low": lo, "ci_high": hi,
                      "ci_note": note, "judgments_valid": ref_counts["judgments_valid"],
                      "judgments": ref_counts["judgments"], **turns.get(HISTORY, {}),
                      "note": f"two halves of {len(ref) // 2} of the {len(ref)} valid human references per resample"})
        rows = []
        for s in setups:
            row = {"judge": judge, "setup": s, "group": groups.get(s), "origin": origins.get(s),
                   **_counts(rates, judge, s), **gaps.get(s, {}), **turns.get(s, {})}
            if s not in prof:
                why = (f"no instance where both {s} and the human reference have a valid judgment by {judge} "
                       f"({validity_note(f, judge, s)}; {validity_note(f, judge, REFERENCE)})")
                rows.append({**row, "n": 0, "ci_note": why, "note": f"not ranked: {why}"})
                per_b += [{"judge": judge, "setup": s, "behaviour": b, "ci_note": why, "n": 0} for b in beh]
                continue
            p = prof[s]
            (dist, lo, hi, note), (d1, d1_lo, d1_hi, _) = p["distance"], p["D"]
            rows.append({**row, "n": p["n"], "distance": dist, "ci_low": lo, "ci_high": hi, "ci_note": note,
                         "D": d1, "D_ci_low": d1_lo, "D_ci_high": d1_hi,
                         "note": f"not ranked: {inference.too_small(p['n'], min_n)}" if p["n"] < min_n else None})
            s_mat, h_mat = pairs[s]
            for k, b in enumerate(beh):
                a, z = inference.interval(p["lo"][k], p["hi"][k], p["notes"][k])
                per_b.append({"judge": judge, "setup": s, "behaviour": b, "mean_sim": float(s_mat[:, k].mean()),
                              "mean_human": float(h_mat[:, k].mean()), "diff": float(p["diff"][k]),
                              "diff_ci_low": a, "diff_ci_high": z, "ci_note": p["notes"][k], "n": p["n"]})
        ranked = sorted((r for r in rows if r["n"] >= min_n and r.get("distance") is not None),
                        key=lambda r: (r["distance"], r["setup"]))
        last, rank = None, 0
        for i, r in enumerate(ranked):  # ties share a rank ("min")
            if r["distance"] != last:
                rank, last = i + 1, r["distance"]
            r["rank"] = rank
        board += ranked + [r for r in rows if r.get("rank") is None]
    return (pl.DataFrame(board, schema=BOARD_SCHEMA) if board else pl.DataFrame(schema=BOARD_SCHEMA),
            pl.DataFrame(per_b, schema=BEHAVIOUR_SCHEMA) if per_b else pl.DataFrame(schema=BEHAVIOUR_SCHEMA))


def _of(r: dict[str, Any], what: str, ok: str, total: str) -> str | None:
    return None if r[total] is None else f"{r[ok]} of {r[total]} {what}"


def answer(run: Run, f: Frames, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N) -> Answer:
    """The leaderboard answer: tables ``leaderboard`` and ``behaviours``, one chart, the text."""
    from .convcompare import turn_taking
    from .convstats import turn_taking_frame  # judge-free: the turns themselves

    a = Answer("Which simulator behaves most like the humans, on the same instances?")
    cond = paper_stats.conditions(run)
    setups = setups_of(f, cond)
    if not setups:
        a.text.append(not_run("this run has no setup to rank", HOW["setup"].format(
            s="s", example="gpt41-vanilla-30, or a setup of imported continuations")))
        return a
    judges = judges_of(f)
    tt = turn_taking(turn_taking_frame(run), resamples=resamples, seed=seed, min_n=min_n)
    board, per_b = leaderboard(f, cond, tt, resamples=resamples, seed=seed, min_n=min_n, judges=judges)
    if not judges or board.filter(pl.col("origin") != ORIGIN_FLOOR)["distance"].is_null().all():
        why = ("this run has no LLM judge with fine-grained judgments" if not judges else
               "no setup has a valid fine-grained judgment paired with a judged human reference (see invalid_rates)")
        a.text.append(not_run(f"the leaderboard of simulators: {why}", HOW["judge"]))
        if not tt.is_empty():  # the judge-free part stands without a judge
            a.tables["turn_taking"] = tt
        if not board.is_empty():
            a.tables["leaderboard"] = board
        return a
    a.tables["leaderboard"] = board
    a.tables["behaviours"] = per_b
    a.text.append(
        f"Method: per judge, each setup against the human reference on the instances both have a valid fine-grained "
        f"judgment for (n); per behaviour the paired difference in mean occurrences per conversation (setup − human); "
        f"the distance: the root mean square of the {len(f.taxonomy.ids)} differences (occurrences per conversation; "
        f"D = their absolute sum beside it); {interval_method(resamples, seed, min_n)}; ranked by the distance's point "
        f"estimate among setups with n ≥ {min_n} (not a test between setups: compare their intervals). The floor: the "
        "distance between two random halves of the human references (bootstrapped), what a perfect simulator would "
        "still get. Beside: the Likert gap (setup − human, paired) and the judge-free turn-taking distances.")
    names = setup_labels(f)
    for judge in board["judge"].unique(maintain_order=True).to_list():
        part = board.filter(pl.col("judge") == judge)
        fl = part.filter(pl.col("origin") == ORIGIN_FLOOR).row(0, named=True)
        a.text.append(f"**Judged by {md_escape(judge)}** — floor (two halves of the {fl['n']} valid human references): "
                      + (f"{fl['distance']:.2f}" + (f" (95% range {fl['ci_low']:.2f}–{fl['ci_high']:.2f})"
                                                     if fl["ci_low"] is not None else f" (no range: {fl['ci_note']})")
                         if fl["distance"] is not None else f"none ({fl['ci_note']})") + ".")
        lines = []
        for r in part.filter(pl.col("origin") != ORIGIN_FLOOR).iter_rows(named=True):
            counts = "; ".join(x for x in (_of(r, "continuations ok", "continuations_ok", "continuations"),
                                           _of(r, "judgments valid", "judgments_valid", "judgments")) if x)
            head = f"{r['rank']}. " if r["rank"] is not None else "- (unranked) "
            if r["distance"] is None:
                lines.append(f"{head}**{md_escape(r['setup'])}**: n = 0 ({counts or 'nothing judged'}); {r['note']}.")
                continue
            b = per_b.filter((pl.col("judge") == judge) & (pl.col("setup") == r["setup"])).sort(
                pl.col("diff").abs(), descending=True)
            worst = b.row(0, named=True) if b.height else None
            gap = (f"; consistency gap {r['consistency_gap']:+.2f}, collaborativeness gap "
                   f"{r['collaborativeness_gap']:+.2f} (n = {r['likert_n']})"
                   if r["consistency_gap"] is not None and r["collaborativeness_gap"] is not None else "")
            lines.append(f"{head}**{md_escape(r['setup'])}** ({md_escape(r['group'] or '?')}): distance "
                         f"{ci_text(r, 'distance')}"
                         + (f"; farthest: {names.get(worst['behaviour'], worst['behaviour'])} {worst['diff']:+.2f}"
                            if worst else "") + gap + f" [{counts}]" + (f"; {r['note']}" if r["note"] else "") + ".")
        a.text.append("\n".join(lines))
    a.charts["leaderboard"] = charts.leaderboard_chart(board)
    return a
