"""Judge probes, read (beyond the paper): what ``cocoeval probe`` found (``run.probes``'s records in
``<run>/probes/<judge>.jsonl``), compared with the run's own judgments, and the self-preference
gap, computed from the run's judgments alone. Intervals are percentile bootstraps over targets
(copies, for planted behaviours; instances, for self-preference), seeded, undefined below
``MIN_N`` units or when every resample is equal (``inference``).

- ``names``: per kind and measure (each behaviour, "any" behaviour; consistency,
  collaborativeness), how many turn labels (share of the turns compared) or Likert points (mean
  absolute change) change when the names are replaced by letters; ``flag`` where the change
  passes ``NAMES_TOLERANCE`` (its interval's lower end, or the value when there is no interval).
- ``planted``: per planted behaviour, the detection rate (the planted turn labelled with the
  expected behaviour), how often the planted turn got only other labels, and the false alarms it
  adds elsewhere: behaviour labels per other turn of the copy minus the run's judgment of the
  reference on the same turns.
- ``stability``: per behaviour and "any", Cohen's κ over turns between the run's judgment and the
  probe's second sample (``cohen_kappa``); Likert: the share of equal scores and the mean absolute
  difference.
- ``self_preference``: per measure, the mean difference from the human reference of the setups
  whose simulator is of the judge's model family (``model_family``) minus that of the other
  families, paired per instance; where the grid has both.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl

from cocoeval.core.schema import Judgment
from cocoeval.core.targets import REFERENCE
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.run.probes import ProbeRecord, read_probes

from .frames import run_frames
from .inference import MIN_N, check_params, ci_notes, interval
from .probes_prose import (
    NamesFinding,
    PlantedFinding,
    ProbeCI,
    ProbeFindings,
    SelfPreferenceFinding,
    StabilityFinding,
    render_probes,
)
from .stats import PERCENTILES, boot_index, resample_means

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cocoeval.run.recorded import RecordedJudge, RecordedSetup

    from .store import RunLike

NAMES_TOLERANCE = {"labels": 0.05, "likert": 0.5}
"""The most change the names probe accepts before flagging: 5% of turn labels, 0.5 Likert points."""
ANY = "any"
LIKERT = ("consistency", "collaborativeness")
VALID = ("ok", "repaired")

f64, i64, s_ = pl.Float64, pl.Int64, pl.Utf8
NAMES_SCHEMA = {
    "kind": s_,
    "measure": s_,
    "unit": s_,
    "n_targets": i64,
    "n": i64,
    "changed": i64,
    "value": f64,
    "ci_low": f64,
    "ci_high": f64,
    "ci_note": s_,
    "flag": pl.Boolean,
}
PLANTED_SCHEMA = {
    "behaviour": s_,
    "expects": s_,
    "n": i64,
    "detected": i64,
    "rate": f64,
    "ci_low": f64,
    "ci_high": f64,
    "ci_note": s_,
    "other_label": i64,
    "fa_n": i64,
    "false_alarms": f64,
    "fa_ci_low": f64,
    "fa_ci_high": f64,
    "fa_ci_note": s_,
}
STABILITY_SCHEMA = {
    "kind": s_,
    "measure": s_,
    "n_targets": i64,
    "n": i64,
    "positives": i64,
    "agree": f64,
    "kappa": f64,
    "ci_low": f64,
    "ci_high": f64,
    "ci_note": s_,
    "mean_abs_diff": f64,
}
SELF_SCHEMA = {
    "measure": s_,
    "judge_family": s_,
    "same_setups": s_,
    "other_setups": s_,
    "n": i64,
    "same": f64,
    "other": f64,
    "gap": f64,
    "ci_low": f64,
    "ci_high": f64,
    "ci_note": s_,
}

FAMILIES = [
    ("anthropic", r"claude"),
    ("openai", r"^(ft:)?(gpt|o\d|chatgpt|text-davinci)"),
    ("llama", r"llama"),
    ("qwen", r"qwen|qwq"),
    ("mistral", r"mistral|mixtral|ministral"),
    ("google", r"gemma|gemini"),
    ("deepseek", r"deepseek"),
    ("microsoft", r"^phi"),
    ("smollm", r"smol"),
]
"""Model families, by a pattern of the model name (the spec's MODEL, lower-cased), first match."""


def model_family(spec: str | None) -> str | None:
    """The model family of a model spec (``openai/gpt-4.1`` -> openai, ``azure/o4-mini`` -> openai,
    ``local/smollm2`` -> smollm, ``openai-compatible/Llama-3-8B@http://...`` -> llama); None when
    unknown. Fine-tuned models count as their base model's family."""
    if not spec or "/" not in spec:
        return None
    model = spec.split("/", 1)[1].split("@", 1)[0].split("?", 1)[0].lower().rsplit("/", 1)[-1]
    for fam, rx in FAMILIES:
        if re.search(rx, model):
            return fam
    return None


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's κ of two binary label vectors (NaN when chance agreement is 1: both constant and equal)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return _kappa(np.array([[np.sum(a * b), np.sum(a * (1 - b)), np.sum((1 - a) * b), np.sum((1 - a) * (1 - b))]]))[0]


def _kappa(c: np.ndarray) -> np.ndarray:
    """κ from rows of (n11, n10, n01, n00) counts."""
    n = c.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        po = (c[:, 0] + c[:, 3]) / n
        pa, pb = (c[:, 0] + c[:, 1]) / n, (c[:, 0] + c[:, 2]) / n
        pe = pa * pb + (1 - pa) * (1 - pb)
        k = (po - pe) / (1 - pe)
    return np.where(np.isclose(pe, 1.0) | (n == 0), np.nan, k)


def _boot(
    x: np.ndarray, stat: Any, resamples: int, seed: int, min_n: int = MIN_N
) -> tuple[float | None, float | None, str | None]:
    """Percentile interval of ``stat`` (of the resampled column sums (B, k) -> (B,); None: the mean of
    the first column) over resampled rows of ``x`` (n, k)."""
    n = len(x)
    if n == 0:
        return None, None, "no data"
    sums = resample_means(x, boot_index(n, resamples, seed)) * n
    boot = sums[:, 0] / n if stat is None else stat(sums)
    note = ci_notes(n, boot[:, None], min_n)[0]
    finite = boot[np.isfinite(boot)]
    if note is None and len(finite) < len(boot):
        note = f"undefined in {len(boot) - len(finite)} of {len(boot)} resamples"
    if note:
        return None, None, note
    lo, hi = np.percentile(finite, PERCENTILES)
    return (*interval(lo, hi, None), None)


def _labels(j: Judgment) -> dict[int, set[str]]:
    return {lb.turn: set(lb.behaviours) for lb in j.labels}


def _current(run: RunLike, judge: str) -> dict[tuple[str, str, str], Judgment]:
    """The judge's valid current judgments by (instance, target name, kind)."""
    cur = {
        (name, c.instance_id): c.setup_id
        for name, cs in run.current_continuations.items()
        for c in cs
        if c.status == "ok"
    }
    out: dict[tuple[str, str, str], Judgment] = {}
    for j in run.judgments.get(judge, []):
        t = j.target_name or j.target
        if (
            j.status in VALID
            and run.stale_reason(judge, j) is None
            and (j.target == REFERENCE or cur.get((t, j.instance_id)) == j.target)
        ):
            out[(j.instance_id, t, j.kind)] = j
    return out


def _probe_records(run: RunLike, judge: str) -> list[ProbeRecord]:
    """The judge's probe records made with its current judge ids (others are stale: not read)."""
    if run.path is None:
        return []
    ids = run.manifest.judges.get(judge) or {}
    return [r for r in read_probes(run.path, judge) if ids.get(r.kind) in (None, r.judgment.judge_id)]


def probe_tables(
    run: RunLike, judge: str, *, resamples: int = 1000, seed: int = 0, taxonomy: Taxonomy | None = None
) -> dict[str, pl.DataFrame]:
    """{names, planted, stability, self_preference}: the judge's probe tables (module docstring);
    an empty frame where the probe was not run (or nothing of it is valid)."""
    check_params(resamples=resamples)
    tax = taxonomy or load_taxonomy()
    recs = [r for r in _probe_records(run, judge) if r.judgment.status in VALID]
    orig = _current(run, judge) if recs else {}  # no probe record: nothing to pair (nor judgments to read)
    by = defaultdict(list)
    for r in recs:
        by[r.probe].append(r)
    return {
        "names": _names(by["names"], orig, tax, resamples, seed),
        "planted": _planted(by["planted"], orig, resamples, seed),
        "stability": _stability(by["stability"], orig, tax, resamples, seed),
        "self_preference": self_preference(run, judge, resamples=resamples, seed=seed),
    }


def _df(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _pairs(
    recs: list[ProbeRecord], orig: dict[tuple[str, str, str], Judgment], kind: str
) -> list[tuple[Judgment, Judgment]]:
    return [
        (o, r.judgment)
        for r in recs
        if r.kind == kind and (o := orig.get((r.instance_id, r.target, r.kind))) is not None
    ]


def _turn_counts(pairs: list[tuple[Judgment, Judgment]], measure: str) -> np.ndarray:
    """Per pair (n11, n10, n01, n00) over the turns both judged: the measure's label in the first
    judgment and the second ("any": any label)."""
    rows = []
    for a, b in pairs:
        la, lb_ = _labels(a), _labels(b)
        c = [0, 0, 0, 0]
        for t in sorted(set(a.judged_turns) & set(b.judged_turns)):
            x = bool(la.get(t)) if measure == ANY else measure in la.get(t, set())
            y = bool(lb_.get(t)) if measure == ANY else measure in lb_.get(t, set())
            c[(0 if y else 1) if x else (2 if y else 3)] += 1
        rows.append(c)
    return np.array(rows, dtype=float).reshape(-1, 4)


def _changed_sets(pairs: list[tuple[Judgment, Judgment]]) -> np.ndarray:
    """Per pair (turns whose label set changed, turns compared)."""
    rows = []
    for a, b in pairs:
        la, lb_ = _labels(a), _labels(b)
        turns = sorted(set(a.judged_turns) & set(b.judged_turns))
        rows.append([sum(la.get(t, set()) != lb_.get(t, set()) for t in turns), len(turns)])
    return np.array(rows, dtype=float).reshape(-1, 2)


def _names(
    recs: list[ProbeRecord], orig: dict[tuple[str, str, str], Judgment], tax: Taxonomy, resamples: int, seed: int
) -> pl.DataFrame:
    rows = []
    fine = _pairs(recs, orig, "fine_grained")
    if fine:
        for measure in [*tax.ids, ANY]:
            x = (
                _changed_sets(fine)
                if measure == ANY
                else (lambda c: np.c_[c[:, 1] + c[:, 2], c.sum(axis=1)])(_turn_counts(fine, measure))
            )
            n, changed = int(x[:, 1].sum()), int(x[:, 0].sum())
            value = changed / n if n else None
            lo, hi, note = _boot(x, lambda s: s[:, 0] / s[:, 1], resamples, seed)
            rows.append(
                {
                    "kind": "fine_grained",
                    "measure": measure,
                    "unit": "share of turn labels changed",
                    "n_targets": len(x),
                    "n": n,
                    "changed": changed,
                    "value": value,
                    "ci_low": lo,
                    "ci_high": hi,
                    "ci_note": note,
                    "flag": value is not None and (lo if lo is not None else value) > NAMES_TOLERANCE["labels"],
                }
            )
    over = _pairs(recs, orig, "overall")
    if over:
        for d in LIKERT:
            diff = np.array([abs((getattr(b, d) or 0) - (getattr(a, d) or 0)) for a, b in over], dtype=float)
            lo, hi, note = _boot(diff[:, None], None, resamples, seed)
            value = float(diff.mean())
            rows.append(
                {
                    "kind": "overall",
                    "measure": d,
                    "unit": "mean absolute change in Likert points",
                    "n_targets": len(diff),
                    "n": len(diff),
                    "changed": int((diff > 0).sum()),
                    "value": value,
                    "ci_low": lo,
                    "ci_high": hi,
                    "ci_note": note,
                    "flag": (lo if lo is not None else value) > NAMES_TOLERANCE["likert"],
                }
            )
    return _df(rows, NAMES_SCHEMA)


def _planted(
    recs: list[ProbeRecord], orig: dict[tuple[str, str, str], Judgment], resamples: int, seed: int
) -> pl.DataFrame:
    rows = []
    groups: dict[str, list[ProbeRecord]] = defaultdict(list)
    for r in recs:
        if r.kind == "fine_grained" and r.behaviour and r.turn is not None:
            groups[r.behaviour].append(r)
    for b, rs in groups.items():
        hit, other, fa = [], 0, []
        for r in rs:
            turn = r.turn if r.turn is not None else -1
            got = _labels(r.judgment).get(turn, set())
            hit.append(float(r.expects in got))
            other += bool(got) and r.expects not in got
            o = orig.get((r.instance_id, r.target, "fine_grained"))
            if o is not None:
                lo_ = _labels(o)
                rest = [t for t in set(r.judgment.judged_turns) & set(o.judged_turns) if t != turn]
                if rest:
                    added = sum(len(_labels(r.judgment).get(t, set())) - len(lo_.get(t, set())) for t in rest)
                    fa.append(added / len(rest))
        h = np.array(hit)[:, None]
        lo, hi, note = _boot(h, None, resamples, seed)
        fa_arr = np.array(fa, dtype=float)[:, None]
        flo, fhi, fnote = (
            _boot(fa_arr, None, resamples, seed)
            if fa
            else (None, None, "no valid judgment of the references in the run")
        )
        rows.append(
            {
                "behaviour": b,
                "expects": rs[0].expects,
                "n": len(rs),
                "detected": int(h.sum()),
                "rate": float(h.mean()),
                "ci_low": lo,
                "ci_high": hi,
                "ci_note": note,
                "other_label": other,
                "fa_n": len(fa),
                "false_alarms": float(fa_arr.mean()) if fa else None,
                "fa_ci_low": flo,
                "fa_ci_high": fhi,
                "fa_ci_note": fnote,
            }
        )
    return _df(sorted(rows, key=lambda r: r["behaviour"]), PLANTED_SCHEMA)


def _stability(
    recs: list[ProbeRecord], orig: dict[tuple[str, str, str], Judgment], tax: Taxonomy, resamples: int, seed: int
) -> pl.DataFrame:
    rows = []
    fine = _pairs(recs, orig, "fine_grained")
    if fine:
        for measure in [*tax.ids, ANY]:
            c = _turn_counts(fine, measure)
            tot = c.sum(axis=0)
            k = float(_kappa(tot[None, :])[0])
            lo, hi, note = _boot(c, _kappa, resamples, seed)
            n = int(tot.sum())
            rows.append(
                {
                    "kind": "fine_grained",
                    "measure": measure,
                    "n_targets": len(c),
                    "n": n,
                    "positives": int(tot[:3].sum()),
                    "agree": (tot[0] + tot[3]) / n if n else None,
                    "kappa": None if np.isnan(k) else k,
                    "ci_low": lo,
                    "ci_high": hi,
                    "ci_note": note if not np.isnan(k) else "undefined: both samples give one label only",
                    "mean_abs_diff": None,
                }
            )
    over = _pairs(recs, orig, "overall")
    if over:
        for d in LIKERT:
            diff = np.array([abs((getattr(b, d) or 0) - (getattr(a, d) or 0)) for a, b in over], dtype=float)
            lo, hi, note = _boot(diff[:, None], None, resamples, seed)
            rows.append(
                {
                    "kind": "overall",
                    "measure": d,
                    "n_targets": len(diff),
                    "n": len(diff),
                    "positives": None,
                    "agree": float((diff == 0).mean()),
                    "kappa": None,
                    "ci_low": lo,
                    "ci_high": hi,
                    "ci_note": note,
                    "mean_abs_diff": float(diff.mean()),
                }
            )
    return _df(rows, STABILITY_SCHEMA)


def _models(run: RunLike, key: Literal["setups", "judges"]) -> dict[str, str | None]:
    params = run.manifest.params
    items: Sequence[RecordedSetup | RecordedJudge] | None = params.setups if key == "setups" else params.judges
    return {d.name: d.model for d in items or []}


def self_preference(
    run: RunLike, judge: str, *, resamples: int = 1000, seed: int = 0, taxonomy: Taxonomy | None = None
) -> pl.DataFrame:
    """The self-preference table (module docstring), from the run's current judgments as the
    statistics count them (the frames: valid, not stale, not skipped): no call.
    Empty when the judge's family or the setups' are unknown, or the grid lacks setups of the
    judge's family or of another one."""
    tax = taxonomy or load_taxonomy()
    fam = model_family(_models(run, "judges").get(judge))
    setups = {s: model_family(m) for s, m in _models(run, "setups").items()}
    same = sorted(s for s, f in setups.items() if fam is not None and f == fam)
    other = sorted(s for s, f in setups.items() if fam is not None and f is not None and f != fam)
    if not same or not other:
        return _df([], SELF_SCHEMA)
    # the judge's valid current judgments as the statistics count them (the frames: no record read)
    f = run_frames(run, tax)
    its = (pl.col("judge") == judge) & ~pl.col("human")
    vals: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)  # measure -> (instance, target) -> value
    for iid, target, *scores in f.likert.filter(its).select("instance_id", "target", *LIKERT).iter_rows():
        for d, score in zip(LIKERT, scores, strict=True):
            vals[d][(iid, target)] = float(score)
    counts = f.counts.filter(its & pl.col("behaviour").is_in(tax.ids))
    for iid, target, b, c in counts.select("instance_id", "target", "behaviour", "count").iter_rows():
        vals[b][(iid, target)] = float(c)
    for iid, target, c in (
        counts.group_by("instance_id", "target", maintain_order=True).agg(pl.col("count").sum()).iter_rows()
    ):
        vals[ANY][(iid, target)] = float(c)
    rows = []
    for measure in [*tax.ids, ANY, *LIKERT]:
        v = vals.get(measure, {})
        pairs = []
        for iid in sorted({i for i, _ in v}):
            ref = v.get((iid, REFERENCE))
            if ref is None:
                continue
            mine = [v[(iid, s)] - ref for s in same if (iid, s) in v]
            theirs = [v[(iid, s)] - ref for s in other if (iid, s) in v]
            if mine and theirs:
                pairs.append([float(np.mean(mine)), float(np.mean(theirs))])
        if not pairs:
            continue
        x = np.array(pairs)
        lo, hi, note = _boot((x[:, 0] - x[:, 1])[:, None], None, resamples, seed)
        rows.append(
            {
                "measure": measure,
                "judge_family": fam,
                "same_setups": ", ".join(same),
                "other_setups": ", ".join(other),
                "n": len(x),
                "same": float(x[:, 0].mean()),
                "other": float(x[:, 1].mean()),
                "gap": float((x[:, 0] - x[:, 1]).mean()),
                "ci_low": lo,
                "ci_high": hi,
                "ci_note": note,
            }
        )
    return _df(rows, SELF_SCHEMA)


def _probe_ci(lo: Any, hi: Any, note: Any) -> ProbeCI:
    return ProbeCI(lo, hi, note)


def probe_findings(tables: dict[str, pl.DataFrame]) -> ProbeFindings:
    """The probe tables as the findings their text says (``render_probes``): the rows a line is
    written of, typed; which probes ran."""
    names, planted, stab, selfp = (
        tables.get(k, pl.DataFrame()) for k in ("names", "planted", "stability", "self_preference")
    )
    return ProbeFindings(
        names_run=not names.is_empty(),
        planted_run=not planted.is_empty(),
        stability_run=not stab.is_empty(),
        names=tuple(
            NamesFinding(
                r["kind"],
                r["measure"],
                r["n_targets"],
                r["changed"],
                r["n"],
                r["value"],
                _probe_ci(r["ci_low"], r["ci_high"], r["ci_note"]),
                bool(r["flag"]),
            )
            for r in names.iter_rows(named=True)
            if not ((r["kind"] == "fine_grained" and r["measure"] != ANY and not r["flag"]) or r["value"] is None)
        ),
        planted=tuple(
            PlantedFinding(
                r["behaviour"],
                r["expects"],
                r["detected"],
                r["n"],
                r["rate"],
                _probe_ci(r["ci_low"], r["ci_high"], r["ci_note"]),
                r["other_label"],
                r["false_alarms"],
                _probe_ci(r["fa_ci_low"], r["fa_ci_high"], r["fa_ci_note"]),
            )
            for r in planted.iter_rows(named=True)
        ),
        stability=tuple(
            StabilityFinding(
                r["kind"],
                r["measure"],
                r["n_targets"],
                r["n"],
                r["kappa"],
                r["agree"],
                _probe_ci(r["ci_low"], r["ci_high"], r["ci_note"]),
                r["mean_abs_diff"],
            )
            for r in stab.iter_rows(named=True)
            if not ((r["kind"] == "fine_grained" and r["measure"] != ANY) or r["agree"] is None)
        ),
        self_preference=tuple(
            SelfPreferenceFinding(
                r["judge_family"],
                r["same_setups"],
                r["other_setups"],
                r["measure"],
                r["gap"],
                r["n"],
                _probe_ci(r["ci_low"], r["ci_high"], r["ci_note"]),
            )
            for r in selfp.iter_rows(named=True)
            if r["measure"] in (ANY, *LIKERT)
        ),
        self_preference_run=not selfp.is_empty(),
    )


def probe_text(tables: dict[str, pl.DataFrame]) -> list[str]:
    """The probe tables in words, one line each (beyond the paper): ``render_probes`` of their
    findings; "not run: cocoeval probe PARAMS" when no probe was run."""
    return render_probes(probe_findings(tables))
