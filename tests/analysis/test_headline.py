"""The report's headline (``analysis.headline``): its invalid shares are the LLM judges' own
judgments, never the annotators', and what is expected but missing is said, never hidden."""

from __future__ import annotations

import polars as pl

from cocoeval.analysis.headline import headline, invalid_words


def _rates() -> pl.DataFrame:
    rows = [
        # stage, judge, target, n, invalid, skipped, missing
        ("simulate", None, "a", 10, 1, 0, 0),
        ("judge", "J", "a", 10, 2, 0, 5),
        ("judge", "J", "reference", 10, 0, 1, None),
        ("judge", "human:ann", "a", 4, 4, 0, None),  # an annotator's invalid sheet rows: not the judge's
    ]
    return pl.DataFrame(rows, schema=["stage", "judge", "target", "n", "invalid", "skipped", "missing"], orient="row")


def test_the_invalid_share_is_the_llm_judges_and_names_what_is_missing():
    inst = pl.DataFrame({"instance_id": ["d/c0/0"], "dataset": ["d"], "conversation": ["d/c0"]})
    h = headline(
        setups=["a"],
        judges=["J"],
        judge="J",
        instances=inst,
        board=None,
        not_ranked="no leaderboard here",
        gate=None,
        rates=_rates(),
        behaviours=10,
        pipeline_check=False,
    )
    assert (h.judgments.invalid, h.judgments.total, h.judgments.missing) == (2, 19, 5)
    assert (h.continuations.invalid, h.continuations.total) == (1, 10)
    words = invalid_words(h)
    assert "2 of 19 judgments (10.5%) (5 more expected but missing)" in words
    assert "1 of 10 continuations (10.0%) and" in words
