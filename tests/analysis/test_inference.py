"""Claims the data can carry: the sign-flip test and the corrections against hand computations
and scipy, the false-verdict rate on simulated null data, and no interval or verdict from too few
instances (tables, answer text, report)."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from cocoeval.analysis import rq, studies
from cocoeval.analysis.agreement import agreement
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.inference import (
    NO_DIFF,
    OVER,
    UNDER,
    adjust_pvalues,
    sign_flip_pvalues,
    verdict,
)
from cocoeval.analysis.report import markdown_table, write_report
from cocoeval.analysis.stats import paired_differences, paired_vs_human
from cocoeval.cli import main
from cocoeval.core.errors import ConfigError
from cocoeval.core.text import md_escape
from cocoeval.run import Run
from cocoeval.run.recorded import RecordedSetup

from ..sim_helpers import instance, judged_continuations, with_reference_turns, write_run_dir
from .test_stats import TAX, fine

BEH = TAX.ids


def test_sign_flip_exact_matches_a_hand_enumeration_and_random_flips_stay_valid():
    rng = np.random.default_rng(0)
    d = rng.integers(-3, 4, size=(8, 4)).astype(float)
    d[:, 3] = 0  # no difference at all: p = 1
    p = sign_flip_pvalues(d, flips=10_000)  # 2**8 <= 10,000: exact
    for k in range(4):
        obs = abs(d[:, k].sum())
        hits = sum(abs(np.dot(s, d[:, k])) >= obs for s in itertools.product([-1, 1], repeat=8))
        assert p[k] == pytest.approx(hits / 2**8)
    assert p[3] == 1.0
    # random flips: within Monte Carlo error of the exact value (n = 16: 65,536 sign vectors), never 0
    # (the +1), seeded
    d16 = rng.integers(-2, 3, size=(16, 3)).astype(float)
    d16[:, 0] += 2  # a real shift
    exact = sign_flip_pvalues(d16, flips=2**16)
    mc = sign_flip_pvalues(d16, flips=4000, seed=1)
    assert np.all(np.abs(mc - exact) <= 4 * np.sqrt(exact * (1 - exact) / 4000) + 1 / 4001)
    assert np.all(mc >= 1 / 4001) and np.array_equal(mc, sign_flip_pvalues(d16, flips=4000, seed=1))
    assert exact[0] < 0.01 and not np.array_equal(mc, sign_flip_pvalues(d16, flips=4000, seed=2))


def test_adjustments_against_scipy_and_a_hand_holm():
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 0.2, size=25)
    p[[2, 7]] = np.nan  # not tested: stays untested, not in the family
    ok = np.isfinite(p)
    bh = adjust_pvalues(p, "bh")
    assert np.isnan(bh[[2, 7]]).all()
    assert np.allclose(bh[ok], sps.false_discovery_control(p[ok], method="bh"))
    holm = adjust_pvalues(p, "holm")
    q = p[ok]
    order = np.argsort(q)
    hand, running = np.empty_like(q), 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, q[j] * (len(q) - i)))
        hand[j] = running
    assert np.allclose(holm[ok], hand)
    assert np.array_equal(adjust_pvalues(p, "none")[ok], q)
    assert np.all(holm[ok] >= bh[ok]) and np.all(bh[ok] >= q)
    with pytest.raises(ConfigError, match="unknown correction"):
        adjust_pvalues(p, "bonferonni")
    assert verdict(0.4, 0.01) == OVER and verdict(-0.4, 0.01) == UNDER and verdict(0.4, 0.2) == NO_DIFF
    assert verdict(0.4, float("nan")) is None


def _family(rng: np.random.Generator, n: int, setups: int, shift: float, flips: int) -> np.ndarray:
    """Raw p of one synthetic run: humans and `setups` simulators on the same n instances; each
    behaviour's counts are Poisson at its own rate (some rare: many zeros and ties), and every
    simulator draws from the humans' own distribution plus ``shift`` on its first behaviour."""
    rates = np.linspace(0.05, 2.0, len(BEH))
    human = rng.poisson(rates, size=(n, len(BEH))).astype(float)
    ps = []
    for _ in range(setups):
        sim = rng.poisson(rates + np.eye(len(BEH))[0] * shift, size=(n, len(BEH))).astype(float)
        ps.append(
            paired_differences(sim, human, resamples=20, seed=int(rng.integers(1 << 30)), min_n=10, flips=flips)["p"]
        )
    return np.concatenate(ps)


def test_no_real_difference_gives_verdicts_at_most_at_the_nominal_rate_after_correction():
    """300 null runs of 10 behaviours x 3 setups on 15 instances each. With no real difference
    every verdict is false; BH keeps the share of runs with any verdict (= the false discovery
    rate, all nulls being true) at or below 5%. The bound allows the binomial spread of 300
    draws: a procedure whose true rate is 5% exceeds it with probability 0.1%."""
    rng = np.random.default_rng(2024)
    draws, flips, alpha = 300, 999, 0.05  # 1 / 1000 < alpha / 30: the smallest p can pass BH
    raw = np.array([_family(rng, 15, 3, 0.0, flips) for _ in range(draws)])  # (draws, 30)
    bh_any = np.array([(adjust_pvalues(p, "bh") <= alpha).any() for p in raw])
    holm_any = np.array([(adjust_pvalues(p, "holm") <= alpha).any() for p in raw])
    bound = sps.binom.ppf(0.999, draws, alpha) / draws
    assert bh_any.mean() <= bound and holm_any.mean() <= bound
    # the test itself holds its level per comparison (exchangeable pairs: sign-flip is exact) ...
    tested = raw[np.isfinite(raw)]
    assert (tested <= alpha).mean() <= sps.binom.ppf(0.999, len(tested), alpha) / len(tested)
    # ... and without the correction most runs print a false verdict somewhere: what BH prevents
    assert (raw <= alpha).any(axis=1).mean() > 3 * bound
    # the same machinery finds a real difference: no trivially silent procedure passes above
    power = np.array(
        [(adjust_pvalues(_family(rng, 15, 3, 1.5, flips), "bh")[[0, 10, 20]] <= alpha).all() for _ in range(40)]
    )
    assert power.mean() > 0.5


def _counts_run(per_setup: dict[str, int], n: int, shift: dict[str, int] | None = None, seed: int = 0):
    """A run with the human reference on n instances and each setup on its first k instances;
    counts capped at 4 turns; ``shift`` adds occurrences of repetition to a setup."""
    rng = np.random.default_rng(seed)
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=4) for i in range(n)]

    def judged(iid, target, counts):
        return fine(iid, target, "J", [[b for b, c in zip(BEH, counts, strict=True) if c > t] for t in range(4)])

    js = []
    for inst in insts:
        js.append(judged(inst.id, "reference", rng.integers(0, 3, len(BEH))))
    for name, k in per_setup.items():
        for inst in insts[:k]:
            c = rng.integers(0, 3, len(BEH))
            c[0] = min(4, c[0] + (shift or {}).get(name, 0))
            js.append(judged(inst.id, name, c))
    return Run.model_validate(
        {
            "instances": insts,
            "continuations": judged_continuations(js),
            "judgments": {"J": js},
            "manifest": {"params": {"setups": [{"name": s} for s in per_setup]}},
        }
    )


def test_paired_table_carries_raw_and_adjusted_p_and_leaves_n_too_small_untested():
    f = run_frames(_counts_run({"big": 25, "tiny": 1, "shifted": 25}, 25, shift={"shifted": 2}))
    per_b, dist = paired_vs_human(f, "J", resamples=200, correction="holm")
    tiny = per_b.filter(pl.col("target") == "tiny")
    assert tiny["n"].to_list() == [1] * len(BEH)
    for col in ("diff_ci_low", "diff_ci_high", "ratio_ci_low", "ratio_ci_high", "p", "p_adj", "verdict"):
        assert tiny[col].is_null().all(), col
    assert set(tiny["ci_note"]) == {"n too small (n=1 < 10)"}
    d_tiny = dist.filter(pl.col("target") == "tiny").row(0, named=True)
    assert d_tiny["ci_low"] is None and d_tiny["ci_note"] == "n too small (n=1 < 10)"
    tested = per_b.filter(pl.col("p").is_not_null())
    assert tested.height == 2 * len(BEH) and set(per_b["family"]) == {2 * len(BEH)}
    assert set(per_b["correction"]) == {"holm"}
    assert np.allclose(tested["p_adj"].to_numpy(), adjust_pvalues(tested["p"].to_numpy(), "holm"))
    rep = per_b.filter((pl.col("target") == "shifted") & (pl.col("behaviour") == "repetition")).row(0, named=True)
    assert rep["verdict"] == OVER and rep["p"] <= rep["p_adj"] < 0.05
    with pytest.raises(ConfigError, match="min_n"):
        paired_vs_human(f, "J", min_n=1)
    with pytest.raises(ConfigError, match="resamples"):
        paired_vs_human(f, "J", resamples=0)


def test_answer_text_prints_no_interval_and_no_verdict_from_one_instance():
    run = _counts_run({"smol-vanilla-1": 1, "shifted": 25}, 25, shift={"shifted": 2})
    f = run_frames(run)
    a = rq.compare_to_humans(f, "J", ["smol-vanilla-1", "shifted"], "RQ2", resamples=200)
    text = "\n".join(a.text)
    line = next(t for t in a.text if "smol-vanilla-1" in t)
    assert "n too small (n=1 < 10)" in line and "95% CI" not in line
    assert "over-produces" not in line and "under-produces" not in line
    assert "closest **shifted**" in text  # the one-instance setup is never called closest
    method = next(t for t in a.text if t.startswith("Method:"))
    assert "paired sign-flip" in method and "Benjamini–Hochberg" in method and "n = 1–25" in method
    shifted = next(t for t in a.text if t.startswith("- **shifted**"))
    assert "n = 25" in shifted and "over-produces: Repetition (p_adj" in shifted
    only_tiny = rq.compare_to_humans(f, "J", ["smol-vanilla-1"], "RQ2", resamples=200)
    assert any("No setup here has at least 10 instances" in t for t in only_tiny.text)
    assert not any("95% CI" in t or "closest **" in t or "produces" in t for t in only_tiny.text)


def test_turns_per_call_compares_only_setups_with_enough_instances():
    run = _counts_run({"k1": 12, "k5": 1}, 12)
    run.manifest.params.setups = [
        RecordedSetup(name="k1", kind="multiparty", turns_per_call=1),
        RecordedSetup(name="k5", kind="multiparty", turns_per_call=5),
    ]
    a = rq.by_turns_per_call(run_frames(run), run, "J", resamples=50)
    pairs = a.tables["k_pairs"]  # k = 1 vs 5 on the one instance both have: neither tested nor given an interval
    assert pairs["n"].unique().to_list() == [1] and pairs["p"].is_null().all() and pairs["direction"].is_null().all()
    assert pairs["diff_ci_low"].is_null().all() and pairs["family"].unique().to_list() == [0]
    assert any("k = 1 → 5" in t and "not tested (n too small: 1 < 10)" in t for t in a.text)
    d = a.tables["distance_by_k"]
    assert dict(zip(d["target"], d["n"], strict=True)) == {"k1": 12, "k5": 1} and d["ci_low"][1] is None


def test_agreement_is_the_papers_procedure_and_untested_below_min_n():
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=4) for i in range(5)]
    js = [
        fine(i.id, "reference", r, [["repetition"]] * ((k + j) % 4) + [[]] * (4 - (k + j) % 4), human=r != "A")
        for k, i in enumerate(insts)
        for j, r in enumerate("ABC")
    ]
    f = run_frames(
        Run.model_validate({"instances": insts, "continuations": judged_continuations(js), "judgments": {"x": js}})
    )
    ag = agreement(f, resamples=100)
    assert ag["significant"].is_null().all() and ag["p5"].is_null().all()
    assert set(ag["ci_note"]) == {"n too small (n=5 < 10)"}
    a = studies.agreement_answer(f, resamples=100)
    assert any("the paper's procedure" in t for t in a.text)
    assert not any(" significant" in t and "not tested" not in t for t in a.text[1:])


def test_data_text_is_escaped_in_markdown():
    name = "a*b_[x](javascript:1)<b>$x$|y"
    run = _counts_run({name: 12}, 12)
    a = rq.compare_to_humans(run_frames(run), "J", [name], "RQ2", resamples=50)
    text = "\n".join(a.text)
    assert name not in text and md_escape(name) in text
    assert md_escape(name) == r"a\*b\_\[x\](javascript:1)\<b\>\$x\$\|y"
    assert "a\\|b" in markdown_table(pl.DataFrame({"setup": ["a|b"], "n": [3], "x": [None]}))


def _write(d, run):
    write_run_dir(d, with_reference_turns(run), {"status": "complete"})


def test_report_on_a_run_without_setups_and_its_parameter_errors(tmp_path, capsys):
    run = _counts_run({}, 12)  # RQ1: judges, human references, no setup
    _write(tmp_path / "run", run)
    rep = write_report(tmp_path / "run", tmp_path / "rep", resamples=50)
    assert "figure3_behaviours" in rep.figures and (tmp_path / "rep" / "figure3_behaviours.png").exists()
    assert pl.read_csv(tmp_path / "rep" / "paired_vs_human.csv").height == 0
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "r2"), "--judge", "nope"]) == 2
    err = capsys.readouterr().err
    assert "judge 'nope' has no judgments in this run" in err and "use one of: J" in err
    for bad in (["--resamples", "0"], ["--resamples", "-5"], ["--min-n", "1"], ["--correction", "bonf"]):
        with pytest.raises(SystemExit) as e:
            main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "r3"), *bad])
        assert e.value.code == 2
    assert "argument --resamples: expected an integer from 1 to 100,000, got 0" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="resamples"):
        write_report(tmp_path / "run", tmp_path / "r4", resamples=-1)


def test_report_tables_carry_the_correction_and_notes(tmp_path):
    _write(tmp_path / "run", _counts_run({"tiny": 1, "s": 12}, 12))
    assert (
        main(
            [
                "report",
                str(tmp_path / "run"),
                "--out",
                str(tmp_path / "rep"),
                "--resamples",
                "50",
                "--correction",
                "none",
                "--min-n",
                "5",
            ]
        )
        == 0
    )
    per_b = pl.read_csv(tmp_path / "rep" / "paired_vs_human.csv")
    assert {"p", "p_adj", "verdict", "ci_note", "correction", "family"} <= set(per_b.columns)
    assert set(per_b["correction"]) == {"none"} and set(per_b["family"]) == {len(BEH)}
    tiny = per_b.filter(pl.col("target") == "tiny")
    assert tiny["p"].is_null().all() and set(tiny["ci_note"]) == {"n too small (n=1 < 5)"}
    index = (tmp_path / "rep" / "index.md").read_text()
    assert "fewer than 5 instances" in index and "no correction for multiple comparisons" in index
    md = (tmp_path / "rep" / "paired_vs_human.md").read_text()
    assert r"n too small (n=1 \< 5)" in md and "| – |" in md  # escaped Markdown, undefined cells


def test_a_constant_has_no_interval_whatever_its_bits():
    """The resampled means of a constant differ in the last bit for most constants (each resample
    sums in its own order) and not for some: either way every resample is equal, and said so."""
    from cocoeval.analysis import stats
    from cocoeval.analysis.inference import ci_notes

    for c in (1 / 30, 0.1, 1 / 3, 0.7, 2 / 7, 0.43355704697986575, 0.0, 1e6 / 3):
        boot = stats.resample_means(np.full((25, 1), c), stats.boot_index(25, 1000, 0))
        assert ci_notes(25, boot, 10) == ["degenerate resample (every resample equal)"], c
    spread = stats.resample_means(np.r_[np.full(24, 0.1), 0.1 + 1e-9][:, None], stats.boot_index(25, 1000, 0))
    assert ci_notes(25, spread, 10) == [None]  # a real difference, however small, is a spread


def test_sign_flip_float_signs_kept_or_not_give_the_same_p(monkeypatch):
    """The float64 sign vectors kept for the last lengths (``_float_chunks``) give the p values
    that converting the int8 draws on each call gave: kept, taken from the cache, dropped for
    another length, and for a length too big to keep (converted one chunk at a time). Thirds, not
    whole numbers: whole numbers take the float32 product (the next test)."""
    from cocoeval.analysis import inference

    rng = np.random.default_rng(3)
    ds = {n: (rng.poisson(0.4, size=(n, 4)) - rng.poisson(0.4, size=(n, 4))) / 3.0 for n in (40, 57)}

    def by_hand(d):
        obs = np.abs(d.sum(axis=0))
        hits = sum(
            (np.abs(c.astype(np.float64) @ d) >= obs - 1e-9 * np.maximum(1.0, obs)).sum(axis=0)
            for c in inference._sign_chunks(len(d), 2000, 0)
        )
        return (1.0 + hits) / 2001.0

    monkeypatch.setattr(inference, "_FLOAT_SIGNS", {})
    want = {n: by_hand(d.astype(float)) for n, d in ds.items()}
    assert not np.isnan(want[40]).any() and len({tuple(w) for w in want.values()}) == 2
    for n in (40, 40, 57, 40):  # made, kept, another length, back
        assert np.array_equal(sign_flip_pvalues(ds[n], 2000, 0), want[n])
    assert set(inference._FLOAT_SIGNS) == {(40, 2000, 0), (57, 2000, 0)}
    monkeypatch.setattr(inference, "_FLOAT_SIGNS_MAX_BYTES", 57 * 2000 * 8)  # room for one length only
    monkeypatch.setattr(inference, "_FLOAT_SIGNS", {})
    for n in (40, 57, 40):
        assert np.array_equal(sign_flip_pvalues(ds[n], 2000, 0), want[n])
        assert list(inference._FLOAT_SIGNS) == [(n, 2000, 0)]
    monkeypatch.setattr(inference, "_FLOAT_SIGNS_MAX_BYTES", 1000)  # too big to keep
    monkeypatch.setattr(inference, "_FLOAT_SIGNS", {})
    assert np.array_equal(sign_flip_pvalues(ds[57], 2000, 0), want[57]) and not inference._FLOAT_SIGNS


def test_sign_flip_of_whole_numbers_in_float32_gives_the_float64_p_bit_for_bit(monkeypatch):
    """Whole-number differences (counts) are tested with the float32 product: every flipped sum
    is a whole number below 2**24, exact in either type, so the p values are those of the float64
    product of the same sign vectors, bit for bit, ties at the observed sum included; past 2**24
    (or with a fraction) the float64 product is used."""
    from cocoeval.analysis import inference

    rng = np.random.default_rng(5)

    def by_hand(d, flips):
        obs = np.abs(d.sum(axis=0))
        hits = sum(
            (np.abs(c.astype(np.float64) @ d) >= obs - 1e-9 * np.maximum(1.0, obs)).sum(axis=0)
            for c in inference._sign_chunks(len(d), flips, 0)
        )
        return (1.0 + hits) / (flips + 1.0)

    monkeypatch.setattr(inference, "_FLOAT_SIGNS", {})
    for n, scale in ((25, 1), (60, 9), (300, 1000)):
        d = rng.integers(-scale, scale + 1, size=(n, 12)).astype(float)
        d[:, 0], d[:, 1] = 0.0, d[:, 2]  # every flip ties; two equal columns
        assert inference._exact_in_float32(d)
        assert np.array_equal(sign_flip_pvalues(d, 3000, 0), by_hand(d, 3000))
    assert not inference._FLOAT_SIGNS  # the float64 signs were never made
    big = rng.integers(-(2**20), 2**20, size=(40, 3)).astype(float)
    assert not inference._exact_in_float32(big) and not inference._exact_in_float32(big[:, :1] / 3)
    assert np.array_equal(sign_flip_pvalues(big, 3000, 0), by_hand(big, 3000))


def test_blocks_tested_together_give_each_blocks_own_p_values():
    """``sign_flip_blocks`` (a family's blocks of one length in one pass) gives every block the
    p-values ``sign_flip_pvalues`` gives it alone: counts and real values, lengths mixed (one of
    them exact: 2**n <= flips), a 1-D column, a block of one row."""
    from cocoeval.analysis.inference import sign_flip_blocks

    rng = np.random.default_rng(11)
    blocks = [
        rng.integers(-3, 4, size=(40, 10)).astype(float),
        rng.normal(size=(40, 1)),
        rng.normal(size=(25, 3)),
        rng.integers(-1, 2, size=(8, 2)).astype(float),
        rng.normal(size=25),
        rng.normal(size=(1, 2)),
        rng.normal(size=(40, 2)) * 1e-3 + 0.5,
    ]
    together = sign_flip_blocks(blocks, 999, 3)
    assert [p.shape for p in together] == [(10,), (1,), (3,), (2,), (1,), (2,), (2,)]
    for b, p in zip(blocks, together, strict=True):
        assert np.array_equal(p, sign_flip_pvalues(b, 999, 3), equal_nan=True)


def test_sign_vectors_read_from_the_generators_bits_are_those_integers_draws(monkeypatch):
    """``_signs_from_bits`` (the top bit of each 32-bit half of the generator's words, read in one
    pass) gives the sign vectors ``rng.integers(0, 2)`` drew chunk by chunk, lengths whose chunks
    split a 64-bit word included; where the check made once per process fails (another numpy),
    the signs are drawn with ``integers``."""
    from cocoeval.analysis import inference

    for n, flips, seed in [(1, 10, 1), (3, 9999, 0), (7, 9999, 5), (281, 9999, 0), (999, 9999, 2), (5641, 401, 3)]:
        chunk = max(1, 2_000_000 // n) if n > 100 else 333  # 333 x odd n: an odd number of draws per chunk
        drawn, read = (
            inference._signs_by_integers(n, flips, seed, chunk),
            inference._signs_from_bits(n, flips, seed, chunk),
        )
        assert [c.shape for c in drawn] == [c.shape for c in read] and all(c.dtype == np.int8 for c in read)
        assert all(np.array_equal(a, b) for a, b in zip(drawn, read, strict=True)), (n, flips, seed)
    assert inference._bits_are_integers()
    monkeypatch.setattr(inference, "_BITS_ARE_INTEGERS", [])  # another numpy: integers drawn otherwise
    monkeypatch.setattr(inference, "_signs_by_integers", lambda n, flips, seed, chunk: [np.ones((flips, n), np.int8)])
    assert not inference._bits_are_integers()
    monkeypatch.setattr(inference, "_SIGNS", {})
    assert np.array_equal(inference._sign_chunks(4, 6, 0)[0], np.ones((6, 4), np.int8))  # drawn, not read
