"""An answer far longer than its call's output budget could be (a server that ignored max_tokens)
is no usable answer: re-asked like a refusal or a cut-off answer, never stored as a turn (#24)."""

from __future__ import annotations

from cocoeval.llm import Call, CallResult, GenerateResponse
from cocoeval.prompts.parse import CHARS_PER_TOKEN, over_budget
from cocoeval.simulate.engine import simulate
from cocoeval.simulate.setup import Setup

from ..sim_helpers import instance, lines


class ScriptedRunner:
    """Answers each call with the next text of ``texts`` (the last one again once they run out),
    finish_reason "stop" whatever the length: a server that does not keep to max_tokens."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.calls = texts, []

    def run(self, calls: list[Call]) -> list[CallResult]:
        out = []
        for c in calls:
            self.calls.append(c)
            text = self.texts[min(len(self.calls), len(self.texts)) - 1]
            out.append(
                CallResult(
                    key=f"k{len(self.calls)}",
                    model=c.model,
                    stage=c.stage,
                    tag=c.tag,
                    status="ok",
                    response=GenerateResponse(text=text, finish_reason="stop"),
                )
            )
        return out


HUGE = "Project Manager: " + "budget " * 300_000  # a 2 MB turn


def test_a_2mb_turn_is_never_stored_and_ends_invalid_with_the_reason():
    r = ScriptedRunner([HUGE])
    [c] = simulate([instance(n_ref=3)], [Setup(name="s", model="openai/m", turns_per_call=3, max_attempts=2)], r)["s"]  # type: ignore[arg-type]
    assert (c.status, c.turns) == ("invalid", [])
    assert len(r.calls) == 2  # re-asked once, as any unusable answer
    assert c.reason.startswith("no usable turn in 2 attempts at turn 1 (last answer: ")
    assert "the server did not keep to max_tokens" in c.reason and f"{len(HUGE)} characters" in c.reason


def test_an_overlong_answer_is_re_asked_and_a_usable_one_kept():
    r = ScriptedRunner([HUGE, lines(3)])
    [c] = simulate([instance(n_ref=3)], [Setup(name="s", model="openai/m", turns_per_call=3)], r)["s"]  # type: ignore[arg-type]
    assert c.status == "ok" and len(c.turns) == 3 and all(len(t.text) < 100 for t in c.turns)
    assert any("did not keep to max_tokens" in n for n in c.notes)


def test_a_chat_setups_overlong_user_turn_is_no_turn():
    inst = instance("chat/c1/0", n_hist=4, n_ref=2, chat=True)
    r = ScriptedRunner(["user: " + "word " * 400_000])
    [c] = simulate([inst], [Setup(name="h", model="openai/m", kind="human_ai", max_attempts=2)], r)["h"]  # type: ignore[arg-type]
    assert c.status == "invalid" and "did not keep to max_tokens" in c.reason
    assert all(len(t.text) < 10_000 for t in c.turns)


def test_over_budget_leaves_answers_a_budget_can_hold():
    assert over_budget("x" * (CHARS_PER_TOKEN * 100), 100) is None
    assert over_budget(("a" + " " * 9) * 100, 100) is None  # 1,000 characters, whitespace runs counted once
    assert over_budget("x" * (CHARS_PER_TOKEN * 100 + 1), 100) is not None
    assert over_budget("x" * 10**6, None) is None  # no budget: nothing to compare
