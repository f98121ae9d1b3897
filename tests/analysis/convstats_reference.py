"""The judge-free statistics as cocoeval 0.2.0 computed them before they were vectorised (issue
#27): one conversation at a time in Python. Kept as the reference the vectorised
``cocoeval.analysis.convstats.conversation_frame`` must equal (tests/analysis/test_convstats_reference.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from cocoeval.analysis.convstats import (
    BACKCHANNEL,
    CONTENT_MIN_CHARS,
    NGRAM,
    SHORT_TOKENS,
    STATISTICS,
    WORD,
)
from cocoeval.core.schema import Turn
from cocoeval.core.targets import targets_for

if TYPE_CHECKING:
    from cocoeval.run import Run


def tokens(text: str) -> list[str]:
    """Lowercase word tokens (see the module docstring)."""
    return WORD.findall(text.lower())


def ngrams(toks: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]


def is_question(text: str) -> bool:
    return "?" in text


def is_backchannel(toks: Sequence[str]) -> bool:
    return len(toks) <= SHORT_TOKENS or all(t in BACKCHANNEL for t in toks)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def _balance(turns: Sequence[Turn], toks: Sequence[list[str]], participants: int | None) -> float | None:
    per: dict[str, int] = {}
    for t, tk in zip(turns, toks, strict=True):
        per[t.speaker] = per.get(t.speaker, 0) + len(tk)
    total = sum(per.values())
    p = max(len(per), participants or 0)
    if p < 2 or total == 0:
        return None
    h = -sum(c / total * math.log(c / total) for c in per.values() if c)
    return max(0.0, h) / math.log(p)


def _repetition(
    turns: Sequence[Turn], toks: Sequence[list[str]], history: Sequence[Turn], scored: Sequence[int]
) -> tuple[float | None, float | None]:
    said_any: set[tuple[str, ...]] = set()
    said_by: dict[str, set[tuple[str, ...]]] = {}
    for t in history:
        g = ngrams(tokens(t.text), NGRAM)
        said_any.update(g)
        said_by.setdefault(t.speaker, set()).update(g)
    own, anyone = [], []
    keep = set(scored)
    for i, (t, tk) in enumerate(zip(turns, toks, strict=True)):
        g = ngrams(tk, NGRAM)
        if i in keep and g:
            mine = said_by.get(t.speaker, set())
            own.append(sum(x in mine for x in g) / len(g))
            anyone.append(sum(x in said_any for x in g) / len(g))
        said_any.update(g)
        said_by.setdefault(t.speaker, set()).update(g)
    return _mean(own), _mean(anyone)


def _distinct(toks: Sequence[list[str]], n: int) -> float | None:
    grams = [g for tk in toks for g in ngrams(tk, n)]
    return _share(len(set(grams)), len(grams))


def conversation_stats(
    turns: Sequence[Turn],
    *,
    history: Sequence[Turn] = (),
    goals: Sequence[str] = (),
    participants: int | None = None,
    scored: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Every statistic of ``STATISTICS`` for one conversation (a target's turns), ``None`` where
    undefined. ``history``: the turns before (x); ``goals``: the instance's goals (M);
    ``participants``: the instance's number of participants (for ``balance``); ``scored``: indices
    of the turns per-turn statistics use (default: all)."""
    toks = [tokens(t.text) for t in turns]
    idx = list(range(len(turns))) if scored is None else sorted(i for i in set(scored) if 0 <= i < len(turns))
    sc = [toks[i] for i in idx]
    runs = sum(1 for i in range(len(turns)) if i == 0 or turns[i].speaker != turns[i - 1].speaker)
    switches = runs - 1 if turns else 0
    questions = [i for i in idx if is_question(turns[i].text)]
    followed = [i for i in questions if i + 1 < len(turns)]
    answered = [i for i in followed if turns[i + 1].speaker != turns[i].speaker and not is_question(turns[i + 1].text)]
    rep_self, rep_any = _repetition(turns, toks, history, idx)
    goal_words = {w for g in goals for w in tokens(g)}
    overlap = []
    if goal_words:
        for tk in sc:
            content = [w for w in tk if len(w) >= CONTENT_MIN_CHARS]
            if content:
                overlap.append(sum(w in goal_words for w in content) / len(content))
    return {
        "turns": len(turns),
        "tokens_per_turn": _mean([len(tk) for tk in sc]),
        "speakers": len({t.speaker for t in turns}),
        "balance": _balance(turns, toks, participants),
        "switch_rate": switches / (len(turns) - 1) if len(turns) >= 2 else None,
        "mean_run": len(turns) / runs if runs else None,
        "rep_self": rep_self,
        "rep_any": rep_any,
        "distinct_1": _distinct(sc, 1),
        "distinct_2": _distinct(sc, 2),
        "question_share": _share(len(questions), len(idx)),
        "answered_share": _share(len(answered), len(followed)),
        "backchannel_share": _share(sum(is_backchannel(tk) for tk in sc), len(sc)),
        "goal_overlap": _mean(overlap),
    }


FRAME_SCHEMA: dict[str, Any] = {
    "target": pl.Utf8,
    "instance_id": pl.Utf8,
    "dataset": pl.Utf8,
    **{k: pl.Float64 for k in STATISTICS},
}


def conversation_frame(run: Run) -> pl.DataFrame:
    """One row per conversation of ``Run.open(run_dir)``: target ('reference' or the
    setup name), instance_id, dataset and every statistic (null where undefined); stale
    continuations (``Run.stale_reason``) are left out."""
    rows = []
    for t in targets_for(run.instances, run.current_continuations):
        inst = t.instance
        p = len({x.speaker for x in [*inst.history, *inst.reference]})
        s = conversation_stats(
            t.turns, history=inst.history, goals=inst.metadata.goals, participants=p, scored=t.judged
        )
        rows.append(
            {
                "target": t.name,
                "instance_id": inst.id,
                "dataset": inst.dataset,
                **{k: None if v is None else float(v) for k, v in s.items()},
            }
        )
    return pl.DataFrame(rows, schema=FRAME_SCHEMA, orient="row") if rows else pl.DataFrame(schema=FRAME_SCHEMA)


def sign_flip_pvalues(d: Any, flips: int = 9999, seed: int = 0) -> Any:
    """``inference.sign_flip_pvalues`` as it was before its sign vectors were kept (issue #27)."""
    import numpy as np

    d = np.asarray(d, dtype=float)
    if d.ndim == 1:
        d = d[:, None]
    n, k = d.shape
    if n == 0:
        return np.full(k, np.nan)
    obs = np.abs(d.sum(axis=0))
    tol = 1e-9 * np.maximum(1.0, obs)
    if n < 30 and 2**n <= flips:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        return (np.abs(signs @ d) >= obs - tol).sum(axis=0) / 2**n
    rng = np.random.default_rng(seed)
    hits = np.zeros(k)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, flips, chunk):
        signs = rng.integers(0, 2, size=(min(chunk, flips - start), n)).astype(np.float64) * 2.0 - 1.0
        hits += (np.abs(signs @ d) >= obs - tol).sum(axis=0)
    return (1.0 + hits) / (flips + 1.0)


def save_figure(spec: str, base: Any, scale: float = 2.0) -> None:
    """A figure as ``charts.save`` wrote it before issue #27 (Vega-Lite to PNG, then to SVG, and
    the spec), one after the other, in this process (with its fonts)."""
    import vl_convert as vlc

    base.parent.mkdir(parents=True, exist_ok=True)
    (base.parent / f"{base.name}.png").write_bytes(vlc.vegalite_to_png(spec, scale=scale))
    (base.parent / f"{base.name}.svg").write_text(vlc.vegalite_to_svg(spec), encoding="utf-8")
    (base.parent / f"{base.name}.vl.json").write_text(spec, encoding="utf-8")


class OneByOneRenderer:
    """In place of ``render.Renderer``: the figures rendered as ``save_figure`` does, one after the
    other, in one process started as cocoeval's rendering processes are (``render.process_env``,
    ``render.use_bundled_fonts``: the same fonts), when the renderer closes."""

    def __init__(self, workers: int | None = None) -> None:
        self._jobs: list[tuple[str, str, float]] = []

    def submit(self, spec: str, base: Any, scale: float = 2.0) -> None:
        self._jobs.append((spec, str(base), scale))

    def close(self) -> None:
        import json
        import subprocess
        import sys

        from cocoeval.analysis import render

        jobs, self._jobs = self._jobs, []
        subprocess.run(
            [sys.executable, "-m", __name__], input=json.dumps(jobs), text=True, check=True, env=render.process_env()
        )

    def __enter__(self) -> OneByOneRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    from cocoeval.analysis import render

    render.use_bundled_fonts()
    for spec, base, scale in json.load(sys.stdin):
        save_figure(spec, Path(base), scale)
