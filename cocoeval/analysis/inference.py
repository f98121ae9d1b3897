"""Inference behind ``stats`` (private; import from ``cocoeval.analysis.stats``): when an interval is
defined, the paired sign-flip test, corrections for multiple comparisons, and the verdicts.

- An interval rests on ``n`` instances; below ``min_n`` (default 10) or when every bootstrap
  resample gives the same value it is undefined (``None``) with a note saying why, never a
  zero-width interval.
- Over/under-production is tested per behaviour and setup with a two-sided paired sign-flip
  (permutation) test of the mean per-instance difference (simulated - human): under the null the
  two targets of an instance are exchangeable, so each difference's sign may flip. Exact (all
  2**n sign vectors) when 2**n <= ``flips``, else ``flips`` seeded random sign vectors with
  p = (1 + #{|S*| >= |S|}) / (flips + 1), which stays valid (never below the nominal level).
- The family (behaviours x setups of one judge) is corrected with Benjamini-Hochberg (false
  discovery rate; default), Holm (family-wise error) or not at all.
- A verdict (over/under-production) when the adjusted p is at most alpha (``p_adj <= alpha``; at
  exactly alpha too: the Monte Carlo p above is valid in that sense, P(p <= alpha) <= alpha).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from cocoeval.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

ALPHA = 0.05
MIN_N = 10
FLIPS = 9999
CORRECTIONS = ("bh", "holm", "none")
CORRECTION_NAMES = {
    "bh": "Benjamini–Hochberg (false discovery rate)",
    "holm": "Holm (family-wise error)",
    "none": "no correction for multiple comparisons",
}
OVER, UNDER, NO_DIFF = "over-produces", "under-produces", "no significant difference"


def check_params(
    *, resamples: int | None = None, min_n: int | None = None, correction: str | None = None, flips: int | None = None
) -> None:
    """Refuse analysis parameters that cannot give an honest number."""
    if resamples is not None and (not isinstance(resamples, int) or resamples < 1):
        raise ConfigError(
            f"resamples must be a whole number of at least 1, not {resamples!r}",
            hint="use the default 1000 (the paper's) or more",
        )
    if flips is not None and (not isinstance(flips, int) or flips < 1):
        raise ConfigError(f"flips must be a whole number of at least 1, not {flips!r}", hint=f"default {FLIPS}")
    if min_n is not None and (not isinstance(min_n, int) or min_n < 2):
        raise ConfigError(
            f"min_n must be a whole number of at least 2, not {min_n!r}",
            hint=f"an interval over one instance has no spread; default {MIN_N}",
        )
    if correction is not None and correction not in CORRECTIONS:
        raise ConfigError(f"unknown correction {correction!r}", hint=f"use one of {', '.join(CORRECTIONS)}")


DEGENERATE = 1e-12
"""Resamples whose spread is under this share of their size are all equal (``ci_notes``)."""


def too_small(n: int, min_n: int) -> str | None:
    return f"n too small (n={n} < {min_n})" if n < min_n else None


def ci_notes(n: int, boot: np.ndarray, min_n: int) -> list[str | None]:
    """Per column of ``boot`` (B, k): why its interval is undefined, or None when it is defined.
    Every resample equal means equal up to rounding (a spread under ``DEGENERATE`` of their
    size): the means of a constant, summed in another order per resample, differ in the last bit
    or not by the luck of the constant's bits, and a constant has no interval either way."""
    import numpy as np

    boot = np.asarray(boot, dtype=float).reshape(len(boot), -1)
    small = too_small(n, min_n)
    if small:
        return [small] * boot.shape[1]
    finite = np.isfinite(boot)
    lo = np.where(finite, boot, np.inf).min(axis=0)
    hi = np.where(finite, boot, -np.inf).max(axis=0)
    return [
        "undefined in every resample"
        if not finite[:, j].any()
        else "degenerate resample (every resample equal)"
        if hi[j] - lo[j] <= DEGENERATE * max(1.0, abs(lo[j]), abs(hi[j]))
        else None
        for j in range(boot.shape[1])
    ]


def rng_for(seed: int, *what: str) -> np.random.Generator:
    """A generator seeded by the run's ``seed`` and what the draw is of (table, target, behaviour…):
    an interval's draws never depend on which other targets or items a table holds or their order."""
    import zlib

    import numpy as np

    return np.random.default_rng([seed, *(zlib.crc32(w.encode("utf-8")) for w in what)])


def interval(lo: float, hi: float, note: str | None) -> tuple[float | None, float | None]:
    """The interval's ends, or (None, None) when it is undefined."""
    return (None, None) if note else (float(lo), float(hi))


def sign_flip_pvalues(d: np.ndarray, flips: int = FLIPS, seed: int = 0) -> np.ndarray:
    """Two-sided paired sign-flip test that the mean of each column of ``d`` (n, k) is 0."""
    import numpy as np

    d = np.asarray(d, dtype=float)
    if d.ndim == 1:
        d = d[:, None]
    n, k = d.shape
    if n == 0:
        return np.full(k, np.nan)
    obs = np.abs(d.sum(axis=0))
    tol = 1e-9 * np.maximum(1.0, obs)  # sums of the same terms in another order
    if n < 30 and 2**n <= flips:  # every sign vector: the exact permutation distribution
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        return (np.abs(signs @ d) >= obs - tol).sum(axis=0) / 2**n
    hits = np.zeros(k)
    if _exact_in_float32(d):  # whole numbers: every flipped sum exact in float32, the same hits
        d32 = d.astype(np.float32)
        for signs in _sign_chunks(n, flips, seed):
            hits += (np.abs(signs.astype(np.float32) @ d32) >= obs - tol).sum(axis=0)
        return (1.0 + hits) / (flips + 1.0)
    for signs in _float_chunks(n, flips, seed):
        hits += (np.abs(signs @ d) >= obs - tol).sum(axis=0)
    return (1.0 + hits) / (flips + 1.0)


def _exact_in_float32(d: np.ndarray) -> bool:
    """Whether every ±1-weighted sum of a column of ``d`` is a whole number below 2**24, so that
    float32 computes it exactly in any order (as float64 does): differences of counts. Then the
    product in float32 gives the very sums of float64 in half the memory and time."""
    import numpy as np

    return bool(np.all(d == np.rint(d))) and float(np.abs(d).sum(axis=0).max(initial=0.0)) < 2.0**24


def sign_flip_blocks(blocks: Sequence[np.ndarray], flips: int = FLIPS, seed: int = 0) -> list[np.ndarray]:
    """``sign_flip_pvalues`` of each (n, k) block (or 1-D column; lengths may differ), the blocks
    of one length tested together: one pass over that length's sign vectors for all of their
    columns instead of one per block (converting a length's vectors to float64 is most of a test's
    time, and a family's lengths alternate). The same sign vectors, hence the same p-values
    (tested): a column's sum may be added in another order, which the test's tolerance absorbs."""
    import numpy as np

    cols = [np.asarray(b, dtype=float).reshape(len(b), -1) for b in blocks]
    out: list[np.ndarray] = [np.empty(0)] * len(cols)
    by_n: dict[int, list[int]] = {}
    for j, c in enumerate(cols):
        by_n.setdefault(len(c), []).append(j)
    for js in by_n.values():
        p = sign_flip_pvalues(np.hstack([cols[j] for j in js]), flips, seed)
        ends = np.cumsum([cols[j].shape[1] for j in js])
        for j, part in zip(js, np.split(p, ends[:-1]), strict=True):
            out[j] = part
    return out


_FLOAT_SIGNS: dict[tuple[int, int, int], list[Any]] = {}
_FLOAT_SIGNS_MAX_BYTES = 32_000_000


def _float_chunks(n: int, flips: int, seed: int) -> Iterable[Any]:
    """``_sign_chunks`` as float64, the type of the product (converting them took most of a
    test's time): kept for the last few lengths only (a report tests the setups of one judge, most
    of one length, one after the other), the oldest dropped past ``_FLOAT_SIGNS_MAX_BYTES``; a
    length that does not fit is converted one chunk at a time, as before."""
    import numpy as np

    key = (n, flips, seed)
    hit = _FLOAT_SIGNS.pop(key, None)
    if hit is None:
        chunks = _sign_chunks(n, flips, seed)
        if n * flips * 8 > _FLOAT_SIGNS_MAX_BYTES:
            return (c.astype(np.float64) for c in chunks)  # one chunk at a time
        hit = [c.astype(np.float64) for c in chunks]
        for c in hit:
            c.setflags(write=False)
        return _keep(_FLOAT_SIGNS, key, hit, _FLOAT_SIGNS_MAX_BYTES)
    _FLOAT_SIGNS[key] = hit  # the most recent last
    return hit


def _keep(
    cache: dict[tuple[int, int, int], list[Any]], key: tuple[int, int, int], chunks: list[Any], limit: int
) -> list[Any]:
    """Keep ``chunks`` under ``key`` as the most recent entry of ``cache``, the oldest entries
    dropped until all of it fits in ``limit`` bytes; returns ``chunks``."""
    size = sum(c.nbytes for c in chunks)
    while cache and sum(x.nbytes for v in cache.values() for x in v) + size > limit:
        del cache[next(iter(cache))]
    cache[key] = chunks
    return chunks


_SIGNS: dict[tuple[int, int, int], list[Any]] = {}
_SIGNS_MAX_BYTES = 200_000_000


def _sign_chunks(n: int, flips: int, seed: int) -> list[Any]:
    """The random sign vectors of ``sign_flip_pvalues`` for ``n`` rows (int8 ±1, in chunks;
    as float64 they took 8 times the memory, the 26 lengths of the paper-shaped report no longer
    fitted and were drawn again and again): the same draws every time for the same ``n``,
    ``flips`` and ``seed``, so they are drawn once and kept (a report tests hundreds of columns of
    a few lengths), the oldest dropped past ``_SIGNS_MAX_BYTES``."""

    key = (n, flips, seed)
    hit = _SIGNS.get(key)
    if hit is not None:
        return hit
    chunk = max(1, 2_000_000 // n)
    out = _signs_from_bits(n, flips, seed, chunk) if _bits_are_integers() else _signs_by_integers(n, flips, seed, chunk)
    return _keep(_SIGNS, key, out, _SIGNS_MAX_BYTES)


def _signs_by_integers(n: int, flips: int, seed: int, chunk: int) -> list[Any]:
    """The sign vectors as drawn: ``rng.integers(0, 2)`` per chunk of ``chunk`` rows, times 2 minus 1."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [
        (rng.integers(0, 2, size=(min(chunk, flips - start), n)) * 2 - 1).astype(np.int8)
        for start in range(0, flips, chunk)
    ]


def _signs_from_bits(n: int, flips: int, seed: int, chunk: int) -> list[Any]:
    """``_signs_by_integers``, the same values, in a third of the time: numpy draws
    ``integers(0, 2)`` as the top bit of each successive 32-bit half of the generator's 64-bit
    words (Lemire's method on ``next_uint32``, which hands out a word's low half, then its high
    half, across calls), so the draws are those bits of ``random_raw``'s words, read in one pass.
    Used only where ``_bits_are_integers`` confirmed it."""
    import numpy as np

    total = n * flips
    words = np.random.default_rng(seed).bit_generator.random_raw((total + 1) // 2)
    signs = (words.view(np.uint32)[:total] >> 31).astype(np.int8)  # little-endian: low half first
    signs *= 2
    signs -= 1
    rows = signs.reshape(flips, n)
    return [rows[start : start + chunk] for start in range(0, flips, chunk)]


_BITS_ARE_INTEGERS: list[bool] = []


def _bits_are_integers() -> bool:
    """Whether ``_signs_from_bits`` draws what ``_signs_by_integers`` draws with this numpy, on
    this machine (little-endian): checked once per process on a small draw whose chunks split a
    64-bit word. Anything else (another numpy's method) draws with ``integers``: never other signs."""
    import sys

    import numpy as np

    if not _BITS_ARE_INTEGERS:
        same = sys.byteorder == "little" and all(
            len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
            for a, b in ((_signs_from_bits(7, 5, s, 3), _signs_by_integers(7, 5, s, 3)) for s in (0, 12345))
        )
        _BITS_ARE_INTEGERS.append(same)
    return _BITS_ARE_INTEGERS[0]


def adjust_pvalues(p: np.ndarray, method: str = "bh") -> np.ndarray:
    """Adjusted p-values over the finite entries of ``p`` (NaN stays NaN: not tested)."""
    import numpy as np

    check_params(correction=method)
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    q = p[ok]
    m = len(q)
    if m == 0 or method == "none":
        out[ok] = q
        return out
    order = np.argsort(q, kind="stable")
    if method == "bh":  # step-up: min over j >= i of p_(j) * m / j
        ranked = np.minimum.accumulate((q[order] * m / np.arange(1, m + 1))[::-1])[::-1]
    else:  # holm, step-down: max over j <= i of p_(j) * (m - j + 1)
        ranked = np.maximum.accumulate(q[order] * (m - np.arange(m)))
    adj = np.empty(m)
    adj[order] = np.minimum(ranked, 1.0)
    out[ok] = adj
    return out


def verdict(diff: float, p_adj: float | None, alpha: float = ALPHA) -> str | None:
    """Over/under-production when the adjusted p is at most ``alpha``; None when not tested."""
    import numpy as np

    if p_adj is None or not np.isfinite(p_adj):
        return None
    if p_adj <= alpha and diff != 0:
        return OVER if diff > 0 else UNDER
    return NO_DIFF


def describe_test(correction: str, family: int, flips: int = FLIPS, alpha: float = ALPHA) -> str:
    """One phrase naming the test, the correction and the family."""
    test = f"two-sided paired sign-flip test of the mean difference ({flips:,} random flips, exact for small n)"
    if family == 0:
        return f"{test}; no comparison had enough instances, so none was tested and nothing corrected"
    return f"{test}, {CORRECTION_NAMES[correction]} over {family} tests, α = {alpha:g} (a verdict when p_adj ≤ α)"
