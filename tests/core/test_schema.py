from __future__ import annotations

import pytest
from pydantic import ValidationError

from cocoeval import Instance, Judgment, Turn
from cocoeval.core.schema import Metadata, Provenance, Summary


def _instance() -> Instance:
    turns = [Turn(speaker="A" if i % 2 else "B", text=f"t{i}", source_index=i) for i in range(4)]
    return Instance(
        id="d/c/0",
        dataset="d",
        split="eval",
        metadata=Metadata(goals=["g"], participants=[]),
        summary=Summary(text=""),
        history=turns[:2],
        reference=turns[2:],
        provenance=Provenance(
            source_file="f", source_format="qmsum", conversation_id="c", start_index=0, seed=0, builder_version="x"
        ),
    )


def test_instance_json_round_trip_omits_unset_fields():
    inst = _instance()
    js = inst.to_json()
    assert '"raw_text"' not in js and "null" not in js
    assert Instance.model_validate_json(js) == inst
    assert inst.speakers == ["B", "A"]


def test_unknown_fields_are_rejected():
    with pytest.raises(ValidationError):
        Turn(speaker="a", text="b", colour="red")


@pytest.mark.parametrize("score", [0, 11])
def test_likert_scores_are_bounded(score):
    with pytest.raises(ValidationError):
        Judgment(
            instance_id="i", target="reference", judge_id="j", kind="overall", taxonomy_hash="h", consistency=score
        )
