"""A judge's kind list: each kind once, never empty (issue #24)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cocoeval.judge.config import JudgeConfig


def test_a_kind_listed_twice_is_refused():
    with pytest.raises(ValidationError, match="overall more than once"):
        JudgeConfig(name="j", model="openai/o4-mini", kind=["overall", "overall"])


def test_an_empty_kind_list_is_refused():
    with pytest.raises(ValidationError, match="kind is empty"):
        JudgeConfig(name="j", model="openai/o4-mini", kind=[])


def test_each_kind_once_is_accepted():
    assert JudgeConfig(name="j", model="openai/o4-mini", kind=["fine_grained", "overall"]).kind == [
        "fine_grained",
        "overall",
    ]
    assert JudgeConfig(name="j", model="openai/o4-mini").kind == ["overall", "fine_grained"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_attempts", True),
        ("max_attempts", 10**20),
        ("max_tokens_per_turn", True),
        ("max_tokens_overall", 10**20),
        ("max_tokens_cap", 10**20),
        ("max_behaviours_per_turn", False),
        ("max_per_dataset", 10**20),
        ("max_per_dataset", True),
    ],
)
def test_judge_ints_refuse_bools_and_absurd_values(field, value):
    with pytest.raises(ValidationError, match=field):
        JudgeConfig(name="j", model="openai/o4-mini", **{field: value})
