"""Judge answers validated directly: the corpus of tests/data/judge_answers.yaml (each answer's
exact outcome) and the strict behaviour-name rules that annotation imports share."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.parse import map_behaviour, says_none, validate_fine, validate_overall

TAX = load_taxonomy()
CORPUS = yaml.safe_load((Path(__file__).parents[1] / "data" / "judge_answers.yaml").read_text(encoding="utf-8"))
NAMES = ", ".join(b.name for b in TAX.behaviours)


def validate(case: dict):
    finish = case.get("finish", "stop")
    if case["kind"] == "fine":
        return validate_fine(case["answer"], finish, case.get("turns", 3), TAX)
    return validate_overall(case["answer"], finish)


@pytest.mark.parametrize("case", CORPUS, ids=[c["id"] for c in CORPUS])
def test_corpus_answer_has_its_exact_outcome(case):
    exp, v = case["expect"], validate(case)
    if exp["status"] == "invalid":
        assert (v.status, v.error) == ("error", exp["reason"].replace("{names}", NAMES))
        assert v.labels == [] and v.consistency is None and v.collaborativeness is None  # never a zero
        assert v.retryable == (exp["reason"] != "truncated")
        return
    assert (v.status, v.error) == (exp["status"], None)
    assert v.repairs == exp.get("repairs", [])
    if case["kind"] == "fine":
        assert [lb.behaviours for lb in v.labels] == exp["behaviours"]
        assert [lb.turn for lb in v.labels] == list(range(case.get("turns", 3)))
    else:
        assert [v.consistency, v.collaborativeness] == exp["scores"]
        assert v.rationale == exp.get("rationale")


def test_corpus_covers_every_kind_of_outcome():
    ids = [c["id"] for c in CORPUS]
    assert len(ids) == len(set(ids)) and len(ids) >= 40
    for kind in ("fine", "overall"):
        for status in ("ok", "repaired", "invalid"):
            assert any(c["kind"] == kind and c["expect"]["status"] == status for c in CORPUS), (kind, status)


@pytest.mark.parametrize(
    "name,bid,noted",
    [
        ("Off topic", "off_topic", False),
        ("off_topic", "off_topic", False),
        ("Off-topic", "off_topic", True),
        ("OFF TOPIC", "off_topic", True),
        ("off  topic", "off_topic", True),
        ("Interruptions", "interruption", True),
        ("persona inconsistencies", "persona_inconsistency", True),
        ("under-answering", "under_answering", True),
        (" Repetition ", "repetition", False),
    ],
)
def test_names_differing_in_case_spacing_hyphens_underscores_or_plural_are_read(name, bid, noted):
    got, note = map_behaviour(name, TAX)
    assert got == bid and (note is not None) == noted


@pytest.mark.parametrize(
    "name",
    [
        "On topic",
        "Clear intent",
        "No interruption",
        "Understanding",
        "Persistent agreement",
        "Over answering",
        "Persona consistency",
        "Non-repetition",
        "Not off topic",
        "Repitition",
        "Off topic.",
        "Interupt",
        "",
        "  ",
        "Redundant",
        "Contradiction",
        "None",
    ],
)
def test_negations_antonyms_and_near_names_are_never_guessed(name):
    assert map_behaviour(name, TAX) == (None, None)


def test_none_spellings():
    assert all(says_none(x) for x in ("None", "none", "No behaviour", "no-behaviors", "N/A", "NA"))
    assert not any(says_none(x) for x in ("", "Nothing to report", "Repetition", "no"))


def test_a_user_taxonomy_with_plural_names_reads_singulars(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "behaviours": [
                    {"id": "interruptions", "name": "Interruptions", "category": "uncollaborative", "definition": "d"},
                    {"id": "topic_drift", "name": "Topic drift", "category": "uncollaborative", "definition": "d"},
                ],
            }
        )
    )
    tax = load_taxonomy(p)
    assert map_behaviour("interruption", tax) == ("interruptions", "'interruption' read as 'Interruptions'")
    assert map_behaviour("Topic drifts", tax)[0] == "topic_drift"
    assert map_behaviour("Topic", tax) == (None, None)
