"""The turn-taking policies of ``simulator: agents`` beyond oracle, moderator and history (round
robin, addressee, self-selection), on canned answers from the in-process mock model: each
speaker sequence checked against a plain re-derivation of the rule, and the rules themselves
(``core.speakers``) against plain loops."""

from __future__ import annotations

import json
import random
import re

import pytest

from cocoeval.core.schema import Turn
from cocoeval.core.speakers import history_weights, most_frequent, named_participant, round_robin_next
from cocoeval.llm import LLMConfig, Runner
from cocoeval.simulate.agents import MALFORMED, PASSED
from cocoeval.simulate.engine import simulate
from cocoeval.simulate.plugins import check_setup
from cocoeval.simulate.setup import PluginSetup

from ..sim_helpers import SPEAKERS, instance

N = 6


def mock(tmp_path, answers) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "answers.json"
    p.write_text(json.dumps({"answers": answers}))
    return f"mock/{p}"


def run(tmp_path, answers, inst=None, **options):
    setup = PluginSetup(name="ag", simulator="agents", model=mock(tmp_path, answers), options=options)
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    [c] = simulate([inst or instance(n_ref=N)], [setup], r)["ag"]
    t = r.ledger.totals()
    return c, t["calls"] - t["cache_hits"]


def shuffled_history(inst):
    """``inst`` with x spoken in the order Carol, Alice, Bob (not M's order)."""
    order = ["Carol", "Alice", "Bob"]
    hist = [Turn(speaker=order[i % 3], text=f"utterance {i}") for i in range(len(inst.history))]
    return inst.model_copy(update={"history": hist})


def test_round_robin_follows_the_participants_order_after_the_last_speaker_of_x(tmp_path):
    inst = shuffled_history(instance(n_ref=N))  # x ends with Bob (30 turns: Carol, Alice, Bob, ...)
    c, calls = run(tmp_path, [{"match": "", "text": "a point"}], inst, policy="round_robin")
    assert c.status == "ok", c.reason
    expected, last = [], inst.history[-1].speaker
    for _ in range(N):  # the order is M's (Alice, Bob, Carol), whatever order x spoke in
        last = SPEAKERS[(SPEAKERS.index(last) + 1) % len(SPEAKERS)]
        expected.append(last)
    assert [t.speaker for t in c.turns] == expected == ["Carol", "Alice", "Bob", "Carol", "Alice", "Bob"]
    assert calls == N  # one agent call per turn, no call to pick the speaker


def test_addressee_gives_the_turn_to_the_one_participant_named_else_to_the_history_policy(tmp_path):
    answers = [
        {"match": "It is Alice's turn", "text": "Carol, what is your view?"},
        {"match": "It is Carol's turn", "text": "I would ask Bob."},
        {"match": "It is Bob's turn", "text": "Alicia and Alan agree, and so does Carolina."},  # no one named
    ]
    c, calls = run(tmp_path, answers, policy="addressee")
    assert c.status == "ok", c.reason
    # x cycles Alice -> Bob -> Carol and ends with Carol's "utterance 29", naming no one: the history
    # policy (after Carol, x only ever had Alice); Alice names Carol; Carol names Bob; Bob names no
    # one (no name inside another word): the history policy (after Bob, x only ever had Carol)
    assert [t.speaker for t in c.turns] == ["Alice", "Carol", "Bob", "Carol", "Bob", "Carol"]
    assert calls == N


def test_addressee_naming_two_participants_falls_back_to_history(tmp_path):
    answers = [{"match": "It is Alice's turn", "text": "Bob and Carol disagree."}, {"match": "", "text": "hm"}]
    c, _ = run(tmp_path, answers, policy="addressee")
    assert [t.speaker for t in c.turns][:2] == ["Alice", "Bob"]  # two named: x's transition after Alice


def _order(inst, n: int) -> list[str]:
    """The seeded order the agents are asked in at turn n (the plugin's rng: sample|instance|turn)."""
    order = list(SPEAKERS)
    random.Random(f"0|{inst.id}|{n}").shuffle(order)
    return order


def test_self_selection_asks_in_a_seeded_order_and_the_first_that_does_not_pass_speaks(tmp_path):
    answers = [
        {"match": "PASS", "context": "You are Alice", "text": "PASS"},
        {"match": "PASS", "context": "You are Bob", "text": "**Pass.**"},
        {"match": "PASS", "context": "You are Carol", "text": "Carol: I'll take this one."},
    ]
    inst = instance(n_ref=N)
    c, calls = run(tmp_path, answers, inst, policy="self_selection")
    assert c.status == "ok", c.reason
    assert [t.speaker for t in c.turns] == ["Carol"] * N and {t.text for t in c.turns} == {"I'll take this one."}
    expected_calls = sum(_order(inst, n).index("Carol") + 1 for n in range(N))  # the passes before Carol, and hers
    assert calls == expected_calls == len(c.calls)
    said = [n for n in c.notes if PASSED in n]
    assert len(said) == N and all(n.endswith("Carol spoke") for n in said)
    again, sent = run(tmp_path, answers, inst, policy="self_selection")  # the passes are cached calls too
    assert sent == 0 and [t.model_dump() for t in again.turns] == [t.model_dump() for t in c.turns]


def test_self_selection_counts_a_malformed_answer_and_never_reads_it_as_a_pass(tmp_path):
    answers = [
        {"match": "PASS", "context": "You are Alice", "text": "PASS - let Bob answer", "times": 1},
        {"match": "PASS", "context": "You are Alice", "text": "PASS"},
        {"match": "PASS", "context": "You are Bob", "text": "Carol: speaking for Carol", "times": 1},
        {"match": "PASS", "context": "You are Bob", "text": "PASS"},
        {"match": "PASS", "context": "You are Carol", "text": "PASS"},
        {"match": "It is", "text": "my fallback turn"},
    ]
    inst = instance(n_ref=2)
    c, _ = run(tmp_path, answers, inst, policy="self_selection")
    assert c.status == "ok", c.reason
    malformed = [n for n in c.notes if MALFORMED in n]
    assert len(malformed) == 2
    assert any("Alice" in n and "PASS with more text" in n for n in malformed)
    assert any("Bob" in n and "answered as Carol" in n for n in malformed)
    # every agent passed (once asked again): the history policy picks the speaker (after Carol in x: Alice)
    assert any("every agent passed: the history policy chose Alice" in n for n in c.notes)
    passes = [n for n in c.notes if "3 passed (" in n and n.endswith("; every agent passed")]
    assert len(passes) == 2 and all({"Alice", "Bob", "Carol"} <= set(re.findall(r"\w+", n)) for n in passes)
    assert c.turns[0].speaker == "Alice" and c.turns[0].text == "my fallback turn"


def test_self_selection_ends_invalid_after_max_attempts_malformed_answers(tmp_path):
    answers = [{"match": "PASS", "text": ""}]
    c, calls = run(tmp_path, answers, instance(n_ref=2), policy="self_selection", max_attempts=2)
    assert c.status == "invalid" and "2 malformed self-selection answers in a row" in c.reason
    assert "empty answer" in c.reason and calls == 2


@pytest.mark.parametrize("policy", ["round_robin", "addressee", "self_selection"])
def test_new_policies_are_accepted_and_change_the_setup_id(tmp_path, policy):
    setup = PluginSetup(name="ag", simulator="agents", model="mock/echo", options={"policy": policy})
    assert check_setup(setup).options["policy"] == policy
    assert setup.setup_id() != PluginSetup(name="ag", simulator="agents", model="mock/echo").setup_id()
    refs = setup.prompt_names()
    assert ("agent_self_selection" in refs) == (policy == "self_selection")


# ------------------------------------------------------------------ the rules, against plain loops


def _plain_named(text: str, speaker: str, participants: list[str]) -> str | None:
    """A plain re-implementation: split the text into words (letters, digits, underscore) and look
    for each name's words in a row, or its first word when no other name starts with it."""
    words = re.findall(r"\w+", text)
    found = set()
    for p in participants:
        if p == speaker:
            continue
        pw = re.findall(r"\w+", p)
        whole = any(words[i : i + len(pw)] == pw for i in range(len(words)))
        first = len(pw) > 1 and sum(re.findall(r"\w+", q)[0] == pw[0] for q in participants) == 1 and pw[0] in words
        if whole or first:
            found.add(p)
    return found.pop() if len(found) == 1 else None


@pytest.mark.parametrize(
    "text",
    [
        "Alice, what do you think?",
        "Alicia thinks so",
        "ask Bob Smith and Carol",
        "Bob?",
        "PhD A and PhD B",
        "PhD A: over to you",
        "nobody here",
        "Carol's idea",
        "alice in lower case",
        "Project Manager said that",
        "the project manager said",
        "Bob_the_builder",
    ],
)
def test_named_participant_agrees_with_a_plain_word_search(text):
    people = ["Alice", "Bob Smith", "Carol", "PhD A", "PhD B", "Project Manager"]
    for speaker in ("Alice", "Carol", "Nobody"):
        assert named_participant(text, speaker, people) == _plain_named(text, speaker, people), (text, speaker)


def test_named_participant_examples():
    people = ["Alice", "Bob Smith", "Carol"]
    assert named_participant("Bob, your view?", "Alice", people) == "Bob Smith"  # the first name
    assert named_participant("Also, Alan", "Carol", people) is None  # not inside other words
    assert named_participant("I, Alice, ask Carol", "Alice", people) == "Carol"  # the speaker herself not counted
    assert named_participant("Carol and Bob", "Alice", people) is None  # two named


def test_round_robin_history_and_most_frequent_rules():
    assert round_robin_next(["A", "B", "C"], "C") == "A" and round_robin_next(["A", "B"], "Z") == "A"
    assert round_robin_next([], "A") is None
    hist = ["A", "B", "A", "C", "A", "B"]
    assert history_weights(hist, "A", ["A", "B", "C"]) == {"B": 2, "C": 1}
    assert history_weights(hist, "Z", ["A", "B", "C"]) == {"A": 3, "B": 2, "C": 1}  # never followed: turns in x
    assert history_weights([], "Z", ["A", "B"]) == {"A": 1, "B": 1}
    assert most_frequent(["B", "A", "B", "A"], ["A", "B"]) == "A"  # a tie: M's order
    assert most_frequent(["B", "C", "C", "B"], ["A"]) == "B"  # a tie, neither listed: the first to speak


def test_the_forecast_of_self_selection_passes_until_the_references_next_speaker():
    from cocoeval.core.taxonomy import load_taxonomy
    from cocoeval.llm import CallResult
    from cocoeval.llm.base import GenerateResponse
    from cocoeval.simulate.engine import plan_continuations

    inst = instance(n_ref=N)
    setup = PluginSetup(name="ag", simulator="agents", model="mock/echo", options={"policy": "self_selection"})
    [task] = plan_continuations([inst], [setup], load_taxonomy())["ag"]
    calls = 0
    while not task.done:
        waiting = task.next_calls()
        replies = task.forecast_replies(waiting)
        task.apply_results(
            [
                CallResult(key="f", model=c.model, stage="simulate", status="ok", response=GenerateResponse(text=t))
                for c, t in zip(waiting, replies, strict=True)
            ]
        )
        calls += len(waiting)
    c = task.result()
    assert c.status == "ok" and [t.speaker for t in c.turns] == [t.speaker for t in inst.reference]
    assert calls == sum(_order(inst, n).index(inst.reference[n].speaker) + 1 for n in range(N))
