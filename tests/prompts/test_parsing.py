"""Parsing model answers into turns: a corpus of messy outputs, round-trip properties, speaker
matching and copied-turn stripping."""

from __future__ import annotations

import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cocoeval.core.schema import Turn
from cocoeval.prompts.parse import match_speaker, norm_name, parse_turns, strip_copied

P = ["Alice", "Bob", "Carol", "Alice Smith"]

# (id, answer, kwargs, expected pairs, note substrings, unknown speakers)
CORPUS = [
    (
        "plain",
        "Alice: Hello everyone.\nBob: Hi Alice.\nCarol: Shall we start?",
        {},
        [("Alice", "Hello everyone."), ("Bob", "Hi Alice."), ("Carol", "Shall we start?")],
        [],
        [],
    ),
    (
        "numbered",
        "1. Alice: First point.\n2) Bob: Second point.\n(3) Carol: Third.",
        {},
        [("Alice", "First point."), ("Bob", "Second point."), ("Carol", "Third.")],
        [],
        [],
    ),
    ("bold-colon-inside", "**Alice:** hi there\n**Bob:** hello", {}, [("Alice", "hi there"), ("Bob", "hello")], [], []),
    (
        "bold-colon-outside",
        "**Alice**: hi there\n__Bob__: hello",
        {},
        [("Alice", "hi there"), ("Bob", "hello")],
        [],
        [],
    ),
    ("bracketed", "[Alice]: hi\n[Bob]: hello", {}, [("Alice", "hi"), ("Bob", "hello")], [], []),
    (
        "bullets",
        "- Alice: one\n* Bob: two\n• Carol: three\n> Alice: four",
        {},
        [("Alice", "one"), ("Bob", "two"), ("Carol", "three"), ("Alice", "four")],
        [],
        [],
    ),
    (
        "preamble-and-remark",
        "Sure! Here is the continuation:\n\nAlice: We need a budget.\nBob: Agreed.\n\n"
        "Let me know if you would like more turns.",
        {},
        [("Alice", "We need a budget."), ("Bob", "Agreed.")],
        ["before the first turn", "1 line(s) of text after the last turn"],
        [],
    ),
    (
        "prose-preamble-no-colon",
        "Here's how the meeting goes on\nAlice: ok\nBob: fine",
        {},
        [("Alice", "ok"), ("Bob", "fine")],
        ["ignored 1 line(s) of text before the first turn"],
        [],
    ),
    (
        "markdown-heading-and-rules",
        "### Continuation\n---\nAlice: ok\n---\nBob: fine\n---",
        {},
        [("Alice", "ok"), ("Bob", "fine")],
        ["before the first turn"],
        [],
    ),
    (
        "multi-line-turn",
        "Alice: I think\nwe should wait.\nBob: Why?",
        {},
        [("Alice", "I think we should wait."), ("Bob", "Why?")],
        [],
        [],
    ),
    (
        "paragraph-between-turns",
        "Alice: First part.\n\nSecond part.\nBob: Why?",
        {},
        [("Alice", "First part. Second part."), ("Bob", "Why?")],
        [],
        [],
    ),
    (
        "speaker-on-its-own-line",
        "Alice:\nI think so.\nBob:\n\nMe too.",
        {},
        [("Alice", "I think so."), ("Bob", "Me too.")],
        [],
        [],
    ),
    (
        "missing-first-speaker",
        "we were talking about money\nBob: Right.",
        {},
        [("Bob", "Right.")],
        ["ignored 1 line(s) of text before the first turn"],
        [],
    ),
    (
        "case-and-spacing",
        "alice: a\nBOB: b\nAlice  Smith: c\nalice smith: d",
        {},
        [("Alice", "a"), ("Bob", "b"), ("Alice Smith", "c"), ("Alice Smith", "d")],
        ["'alice' matched to 'Alice'", "'Alice  Smith' matched to 'Alice Smith'"],
        [],
    ),
    (
        "parenthetical-roles",
        "Alice (chair): Let's begin.\n**Bob (PM):** Ready.\nCarol [intern]: Me too.",
        {},
        [("Alice", "Let's begin."), ("Bob", "Ready."), ("Carol", "Me too.")],
        ["'Alice (chair)' matched to 'Alice'", "'Carol [intern]' matched to 'Carol'"],
        [],
    ),
    (
        "unknown-speaker",
        "Alice: Who is here?\nDave: I am.\nDave: Again.",
        {},
        [("Alice", "Who is here?"), ("Dave", "I am."), ("Dave", "Again.")],
        ["unknown speaker 'Dave'"],
        ["Dave"],
    ),
    (
        "quoted",
        'Alice: "Let us vote."\nBob: “Fine by me.”\nCarol: "Yes," she said, "now."',
        {},
        [("Alice", "Let us vote."), ("Bob", "Fine by me."), ("Carol", '"Yes," she said, "now."')],
        [],
        [],
    ),
    (
        "empty-utterance",
        "Alice: hi\nBob:\nCarol: ok",
        {},
        [("Alice", "hi"), ("Carol", "ok")],
        ["dropped 1 empty turn(s)"],
        [],
    ),
    (
        "truncated",
        "Alice: hi\nBob: I was going to sa",
        {"truncated": True},
        [("Alice", "hi")],
        ["cut off at max_tokens"],
        [],
    ),
    (
        "json-fence",
        'Here you go:\n```json\n[{"speaker": "Alice", "text": "hi"}, {"speaker": "bob", "text": "yo"}]\n```\nDone.',
        {},
        [("Alice", "hi"), ("Bob", "yo")],
        ["code fence", "'bob' matched to 'Bob'"],
        [],
    ),
    (
        "json-fence-unclosed-truncated",
        '```json\n[{"speaker": "Alice", "text": "hi"},\n {"speaker": "Bob", "text": "I was go',
        {"truncated": True},
        [("Alice", "hi")],
        ["code fence", "repaired near-valid JSON"],
        [],
    ),
    (
        "json-fence-after-text",
        'Sure: ```json\n{"turns": [{"speaker": "Bob", "text": "yo"}]}\n```',
        {},
        [("Bob", "yo")],
        ["code fence"],
        [],
    ),
    ("text-fence", "```\nAlice: hi\nBob: yo\n```", {}, [("Alice", "hi"), ("Bob", "yo")], ["code fence"], []),
    (
        "raw-json-list",
        '[{"speaker": "Alice", "text": "hi"}, {"speaker": "Bob", "text": "yo"}]',
        {},
        [("Alice", "hi"), ("Bob", "yo")],
        [],
        [],
    ),
    ("json-turns-object", '{"turns": [{"speaker": "Carol", "text": "ok"}]}', {}, [("Carol", "ok")], [], []),
    (
        "json-trailing-comma",
        '[{"speaker": "Alice", "text": "hi"},]',
        {},
        [("Alice", "hi")],
        ["repaired near-valid JSON"],
        [],
    ),
    (
        "json-missing-bracket",
        '[{"speaker": "Alice", "text": "hi"}, {"speaker": "Bob", "text": "yo"}',
        {},
        [("Alice", "hi"), ("Bob", "yo")],
        ["repaired near-valid JSON"],
        [],
    ),
    (
        "json-alt-keys",
        '[{"name": "Alice", "utterance": "hi"}, {"participant": "Bob", "content": "yo"}]',
        {},
        [("Alice", "hi"), ("Bob", "yo")],
        [],
        [],
    ),
    ("json-list-of-lines", '["Alice: hi", "Bob: yo"]', {}, [("Alice", "hi"), ("Bob", "yo")], [], []),
    ("refusal", "I'm sorry, but I can't help with that.", {}, [], ["before the first turn"], []),
    (
        "refusal-with-colon",
        "I'm sorry. I cannot continue this conversation: it is private.",
        {},
        [],
        ["before the first turn"],
        [],
    ),
    ("empty-answer", "", {}, [], [], []),
    ("whitespace-answer", "  \n\n ", {}, [], [], []),
    (
        "clock-time-continuation",
        "Alice: The agenda.\n12:30 the meeting starts\nAt 13:00: lunch.",
        {},
        [("Alice", "The agenda. 12:30 the meeting starts At 13:00: lunch.")],
        [],
        [],
    ),
    ("clock-time-first", "12:30 the meeting starts\nBob: ok", {}, [("Bob", "ok")], ["before the first turn"], []),
    (
        "url-continuation",
        "Alice: See the page\nhttps://example.org/budget for details.",
        {},
        [("Alice", "See the page https://example.org/budget for details.")],
        [],
        [],
    ),
    (
        "inline-backticks",
        "Alice: run ```make``` first\nBob: ok",
        {},
        [("Alice", "run ```make``` first"), ("Bob", "ok")],
        [],
        [],
    ),
]


@pytest.mark.parametrize(
    ("answer", "kwargs", "pairs", "notes", "unknown"), [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS]
)
def test_corpus(answer, kwargs, pairs, notes, unknown):
    res = parse_turns(answer, P, **kwargs)
    assert [(t.speaker, t.text) for t in res.turns] == pairs
    for sub in notes:
        assert any(sub in n for n in res.notes), (sub, res.notes)
    assert res.unknown_speakers == unknown


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 20


def test_notes_are_not_repeated_per_turn():
    res = parse_turns("dave: a\nalice: b\ndave: c\nalice: d", P)
    assert res.notes == ["unknown speaker 'dave'", "speaker 'alice' matched to 'Alice'"]
    assert res.unknown_speakers == ["dave"]


def test_clean_answer_has_no_notes():
    assert parse_turns("Alice: hi\nBob: yo", P).notes == []


# --- round trip -------------------------------------------------------------------------------

SPEAKERS = ["Alice", "Bob", "Alice Smith", "Dr. Jones", "Mary-Jane", "O'Brien", "Speaker 2", "Project Manager", "Zoë"]
WORD = st.text(alphabet=string.ascii_letters + string.digits + ".,!?'()-", min_size=1, max_size=8)
TEXT = st.lists(WORD, min_size=1, max_size=8).map(" ".join)


def _render(i: int, speaker: str, text: str, number: str, bold: str) -> str:
    prefix = {"": "", "dot": f"{i + 1}. ", "paren": f"{i + 1}) ", "dash": "- "}[number]
    head = {"": f"{speaker}:", "in": f"**{speaker}:**", "out": f"**{speaker}**:"}[bold]
    return f"{prefix}{head} {text}"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(SPEAKERS),
            TEXT,
            st.sampled_from(["", "dot", "paren", "dash"]),
            st.sampled_from(["", "in", "out"]),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_round_trip(rows):
    answer = "\n".join(_render(i, sp, tx, num, bold) for i, (sp, tx, num, bold) in enumerate(rows))
    res = parse_turns(answer, SPEAKERS)
    assert [(t.speaker, t.text) for t in res.turns] == [(sp, tx) for sp, tx, _, _ in rows]
    assert res.notes == [] and res.unknown_speakers == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SPEAKERS), TEXT), min_size=1, max_size=6), st.booleans())
def test_round_trip_truncated_drops_only_the_last(rows, fenced_json):
    import json

    answer = "\n".join(f"{sp}: {tx}" for sp, tx in rows)
    if fenced_json:
        answer = "```json\n" + json.dumps([{"speaker": s, "text": t} for s, t in rows]) + "\n```"
    res = parse_turns(answer, SPEAKERS, truncated=True)
    assert [(t.speaker, t.text) for t in res.turns] == rows[:-1]


# --- copied turns -----------------------------------------------------------------------------

OLD_WORDS = st.text(alphabet="abcdefghijklm", min_size=1, max_size=8)
NEW_WORDS = st.text(alphabet="nopqrstuvwxyz", min_size=1, max_size=8)


def _turns(words: st.SearchStrategy[str], min_size: int = 0) -> st.SearchStrategy[list[Turn]]:
    turn = st.builds(
        lambda sp, ws: Turn(speaker=sp, text=" ".join(ws)), st.sampled_from(P), st.lists(words, min_size=1, max_size=8)
    )
    return st.lists(turn, min_size=min_size, max_size=6)


@settings(max_examples=300, deadline=None)
@given(_turns(OLD_WORDS, min_size=1), _turns(NEW_WORDS), st.data())
def test_strip_copied_property(expected, new, data):
    n = data.draw(st.integers(0, len(expected)))
    copied = expected[len(expected) - n :]
    assert strip_copied(copied + new, expected) == (new, n)


@settings(max_examples=100, deadline=None)
@given(_turns(OLD_WORDS, min_size=1), _turns(NEW_WORDS, min_size=1))
def test_strip_copied_tolerates_case_and_spacing(expected, new):
    sloppy = [Turn(speaker=t.speaker, text="  " + t.text.upper().replace(" ", "  ")) for t in expected]
    assert strip_copied(sloppy + new, expected) == (new, len(expected))


def test_strip_copied_examples():
    hist = [
        Turn(speaker="Alice", text="We start with the budget."),
        Turn(speaker="Bob", text="The budget is too small."),
        Turn(speaker="Carol", text="Then we cut the catering."),
    ]
    new = [Turn(speaker="Alice", text="No, catering stays.")]
    # the model copied only the most recent turn, not all it was asked for
    assert strip_copied([hist[-1], *new], hist) == (new, 1)
    # copying from the start of the history (not its end) is not stripped
    assert strip_copied([hist[0], *new], hist) == ([hist[0], *new], 0)
    assert strip_copied(new, hist) == (new, 0)
    assert strip_copied([], hist) == ([], 0)
    assert strip_copied(new, []) == (new, 0)


# --- speaker matching -------------------------------------------------------------------------


def test_match_speaker_examples():
    assert match_speaker("Alice", P) == ("Alice", "exact")
    assert match_speaker(" **Alice** ", P) == ("Alice", "exact")
    assert match_speaker("alice  SMITH", P) == ("Alice Smith", "normalised")
    assert match_speaker("Alice-Smith", P) == ("Alice Smith", "normalised")
    assert match_speaker("Alice (chair)", P) == ("Alice", "normalised")
    assert match_speaker("Dave", P) == ("Dave", "unknown")
    assert match_speaker("", P) == ("", "unknown")
    assert match_speaker("Jose", ["José", "Ana"]) == ("José", "normalised")


def test_match_never_picks_a_different_participant():
    people = ["Alex", "Alexa", "Al Ex", "alex b"]
    assert match_speaker("Alex", people) == ("Alex", "exact")
    assert match_speaker("alex", people) == ("Alex", "normalised")
    assert match_speaker("ALEXA", people) == ("Alexa", "normalised")
    assert match_speaker("al  ex", people) == ("Al Ex", "normalised")
    assert match_speaker("Alex B", people) == ("alex b", "normalised")
    assert match_speaker("Alex (chair)", people) == ("Alex", "normalised")
    # "al-ex" could be "Alex" or "Al Ex": ambiguous, so it stays unknown
    assert match_speaker("al-ex", people) == ("al-ex", "unknown")
    assert match_speaker("Alexander", people) == ("Alexander", "unknown")
    assert match_speaker("Alex", ["alex", "ALEX"]) == ("Alex", "unknown")


def test_match_non_latin_names_are_not_confused():
    people = ["李雷", "韩梅梅"]
    assert match_speaker("王芳", people) == ("王芳", "unknown")
    assert match_speaker("李雷", people) == ("李雷", "exact")
    assert match_speaker("...", ["!!!"]) == ("...", "unknown")
    assert norm_name("Zoë  O'Brien") == "zoeobrien"


# a small alphabet, so that names often collide once case, spacing or punctuation is ignored
NAME = st.text(alphabet="abAB éÉß .-'", min_size=1, max_size=6).filter(lambda s: s.strip() and s == s.strip(" '"))


def _variants(name: str) -> list[str]:
    return [
        name.lower(),
        name.upper(),
        name.swapcase(),
        f"  {name} ",
        name.replace(" ", "  "),
        f"{name} (chair)",
        f"**{name}**",
    ]


@settings(max_examples=500, deadline=None)
@given(st.lists(NAME, min_size=1, max_size=6, unique=True), st.integers(0, 5))
@example(["a b", "ab"], 0)
@example(["ab", "a b"], 1)
@example(["a", "A"], 0)
def test_match_property_never_maps_to_another_participant(people, i):
    p = people[i % len(people)]
    assert match_speaker(p, people) == (p, "exact")
    for v in _variants(p):
        sp, how = match_speaker(v, people)
        # p itself, or unknown when ambiguous, or another participant written exactly
        assert sp == p or how == "unknown" or (how == "exact" and sp == v.strip()), (v, sp, how)


@settings(max_examples=500, deadline=None)
@given(st.lists(NAME, min_size=1, max_size=6, unique=True), NAME)
def test_match_property_only_equivalent_names(people, raw):
    sp, how = match_speaker(raw, people)
    if how == "unknown":
        assert sp == raw.strip()
    else:
        assert sp in people and norm_name(sp) == norm_name(raw)


def test_long_participant_labels_of_real_committee_meetings_are_read():
    # QMSum committee speakers: longer than 60 characters, or more than six words, or ending in "."
    chair = "The Acting Chair (Mrs. Alexandra Mends (BrossardSaint-Lambert, Lib.))"
    minister = "Hon. Diane Lebouthillier (Minister of National Revenue)"
    clerk = "Mr. Smith, Jr."
    people = [chair, minister, clerk, "Ann"]
    answer = (
        f"{chair}: We resume.\n**{minister}**: Thank you, Madam Chair.\n"
        f"{clerk}: Noted.\nAnn: Fine.\n{chair.upper()}: Next question."
    )
    res = parse_turns(answer, people)
    assert [(t.speaker, t.text) for t in res.turns] == [
        (chair, "We resume."),
        (minister, "Thank you, Madam Chair."),
        (clerk, "Noted."),
        ("Ann", "Fine."),
        (chair, "Next question."),
    ]
    assert res.unknown_speakers == []
    # an unknown long label is still not a speaker: the line continues the previous turn
    res = parse_turns(f"Ann: Fine.\n{minister.replace('Diane', 'Mary')}: hello", people)
    assert len(res.turns) == 1


def test_the_models_own_remarks_are_no_turns_but_participants_and_new_speakers_are():
    people = ["Alice", "Bob", "Assistant"]
    got = parse_turns(
        "Note: as requested.\nAlice: I can't do Tuesday.\nZed: sorry I'm late\n"
        "Assistant: the room is booked\nSorry: I cannot continue this conversation.\n"
        "As an AI language model: I must stop here.",
        people,
    )
    assert [(t.speaker, t.text) for t in got.turns] == [
        ("Alice", "I can't do Tuesday."),
        ("Zed", "sorry I'm late"),
        ("Assistant", "the room is booked"),
    ]
    assert got.refusals == [
        "Note: as requested.",
        "Sorry: I cannot continue this conversation.",
        "As an AI language model: I must stop here.",
    ]
    assert sum("the model's own remark" in n for n in got.notes) == 3
