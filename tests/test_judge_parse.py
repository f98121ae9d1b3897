"""A corpus of bad judge answers: each ends valid, repaired or invalid with the right reason;
none becomes a zero count."""

from __future__ import annotations

import json

import pytest

from cocoeval.judge_parse import validate_fine, validate_overall
from cocoeval.taxonomy import load_taxonomy

TAX = load_taxonomy()


def fine(*entries) -> str:
    return json.dumps({"turns": list(entries)})


def t(n, *names):
    return {"turn": n, "behaviours": [{"behaviour": b, "evidence": "ev"} for b in names]}


GOOD3 = fine(t(1), t(2, "Repetition"), t(3, "Off topic", "Interruption"))

# (answer, finish_reason, expected status, reason/repair substring, expected labels or None)
FINE_CORPUS = [
    (GOOD3, "stop", "ok", None, [[], ["repetition"], ["off_topic", "interruption"]]),
    ("Here is my analysis:\n" + GOOD3 + "\nHope this helps!", "stop", "repaired", "surrounding text",
     [[], ["repetition"], ["off_topic", "interruption"]]),
    ("```json\n" + GOOD3 + "\n```", "stop", "repaired", "surrounding text", [[], ["repetition"], ["off_topic", "interruption"]]),
    (GOOD3[:-2] + ",]}", "stop", "repaired", "near-valid JSON", [[], ["repetition"], ["off_topic", "interruption"]]),
    (GOOD3[:-3], "stop", "repaired", "near-valid JSON", [[], ["repetition"], ["off_topic", "interruption"]]),
    (fine(t(1), t(2, "Off-topic"), t(3, "persistent disagreement")), "stop", "repaired", "'Off-topic' read as 'Off topic'",
     [[], ["off_topic"], ["persistent_disagreement"]]),
    (fine(t(1, "Repitition"), t(2), t(3)), "stop", "repaired", "read as 'Repetition'", [["repetition"], [], []]),
    (fine(t(1, "None"), t(2), t(3, "N/A")), "stop", "repaired", "read as no behaviour", [[], [], []]),
    (json.dumps([t(1), t(2), t(3)]), "stop", "repaired", "bare list", [[], [], []]),
    (json.dumps({"turns": [{"turn": "1", "behaviours": ["Repetition"]}, t(2), t(3)]}), "stop", "ok", None,
     [["repetition"], [], []]),
    (fine(t(1, "Repetition", "Repetition"), t(2), t(3)), "stop", "ok", None, [["repetition"], [], []]),
    # errors (re-asked, then invalid)
    (GOOD3[: len(GOOD3) // 2], "length", "error", "truncated", None),
    ("", "stop", "error", "empty answer", None),
    ("   \n ", "stop", "error", "empty answer", None),
    ("I'm sorry, but I can't help with evaluating this conversation.", "stop", "error", "refusal", None),
    ("The second turn repeats the first one.", "stop", "error", "no JSON object", None),
    (fine(t(1), t(2)), "stop", "error", "turns missing from the answer: 3", None),
    (fine(t(1), t(2), t(2), t(3)), "stop", "error", "turn 2 is listed twice", None),
    (fine(t(1), t(2), t(3), t(4)), "stop", "error", "turn 4 is out of range 1-3", None),
    (fine(t(0), t(1), t(2)), "stop", "error", "turn 0 is out of range", None),
    (fine(t(1, "Sarcasm"), t(2), t(3)), "stop", "error", "unknown behaviour 'Sarcasm'", None),
    (json.dumps({"labels": []}), "stop", "error", 'expected {"turns"', None),
    (json.dumps({"turns": [{"behaviours": []}, t(2), t(3)]}), "stop", "error", "turn number missing", None),
    (json.dumps({"turns": [{"turn": 1, "behaviours": "Repetition"}, t(2), t(3)]}), "stop", "error",
     "behaviours must be a list", None),
    (json.dumps({"turns": ["turn 1: nothing", t(2), t(3)]}), "stop", "error", "must be an object", None),
    (json.dumps({"turns": []}), "stop", "error", "turns missing from the answer: 1, 2, 3", None),
]


@pytest.mark.parametrize("answer,finish,status,needle,labels", FINE_CORPUS)
def test_fine_grained_corpus(answer, finish, status, needle, labels):
    v = validate_fine(answer, finish, 3, TAX)
    assert v.status == status, (v.error, v.repairs)
    if status == "error":
        assert needle in v.error and v.labels == []  # never an empty (zero) labelling
        assert v.retryable == (needle != "truncated")
    else:
        assert [lb.behaviours for lb in v.labels] == labels
        assert [lb.turn for lb in v.labels] == [0, 1, 2]
        if needle:
            assert any(needle in r for r in v.repairs), v.repairs


OVERALL_CORPUS = [
    ('{"consistency": 7, "collaborativeness": 4, "rationale": "ok"}', "stop", "ok", None, (7, 4)),
    ('{"consistency": "8", "collaborativeness": 6.0, "rationale": "x"}', "stop", "repaired", "as text", (8, 6)),
    ('Scores: {"consistency": 3, "collaborativeness": 2}', "stop", "repaired", "surrounding text", (3, 2)),
    ('{"consistency": 0, "collaborativeness": 5}', "stop", "error", "got 0", None),
    ('{"consistency": 11, "collaborativeness": 5}', "stop", "error", "got 11", None),
    ('{"consistency": "7.5", "collaborativeness": 5}', "stop", "error", "got '7.5'", None),
    ('{"consistency": 7.5, "collaborativeness": 5}', "stop", "error", "got 7.5", None),
    ('{"consistency": true, "collaborativeness": 5}', "stop", "error", "integer from 1 to 10", None),
    ('{"consistency": 7}', "stop", "error", "missing collaborativeness", None),
    ('{"consistency": 7, "collab', "length", "error", "truncated", None),
    ("[7, 5]", "stop", "error", "expected a JSON object", None),
]


@pytest.mark.parametrize("answer,finish,status,needle,scores", OVERALL_CORPUS)
def test_overall_corpus(answer, finish, status, needle, scores):
    v = validate_overall(answer, finish)
    assert v.status == status, (v.error, v.repairs)
    if status == "error":
        assert needle in v.error and v.consistency is None and v.collaborativeness is None
    else:
        assert (v.consistency, v.collaborativeness) == scores
        if needle:
            assert any(needle in r for r in v.repairs)


def test_corpus_is_large_enough():
    assert len(FINE_CORPUS) + len(OVERALL_CORPUS) >= 20
    assert sum(1 for c in FINE_CORPUS + OVERALL_CORPUS if c[2] == "error") >= 20
