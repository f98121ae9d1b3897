"""A setup's integer fields: real integers (not true/false) within documented bounds (issue #24)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cocoeval.simulate.setup import Setup
from cocoeval.simulate.sft import SFTConfig


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("turns_per_call", True),
        ("turns_per_call", 100000000000000000000),
        ("turns_per_call", 1001),
        ("max_tokens_per_turn", True),
        ("max_tokens_per_turn", 10**20),
        ("n_copy", True),
        ("n_copy", 10**20),
        ("max_attempts", True),
        ("max_attempts", 10**20),
        ("max_per_dataset", True),
        ("max_per_dataset", 10**20),
        ("sample", True),
        ("sample", 10**20),
        ("turns_per_call", "5"),
        ("turns_per_call", 5.0),
    ],
)
def test_setup_ints_refuse_bools_and_absurd_values(field, value):
    with pytest.raises(ValidationError, match=field):
        Setup(name="s", model="openai/gpt-4.1", **{field: value})


def test_setup_ints_within_bounds_are_accepted():
    s = Setup(
        name="s",
        model="openai/gpt-4.1",
        turns_per_call=1000,
        max_tokens_per_turn=10_000,
        n_copy=5,
        max_attempts=100,
        max_per_dataset=1,
        sample=3,
    )
    assert (s.turns_per_call, s.max_attempts, s.sample) == (1000, 100, 3)


@pytest.mark.parametrize(
    ("field", "value"), [("total", True), ("n_epochs", 10**20), ("seed", True), ("n_datasets", 10**20)]
)
def test_sft_ints_refuse_bools_and_absurd_values(field, value):
    with pytest.raises(ValidationError, match=field):
        SFTConfig(**{field: value})
