"""Simulator plugins and ``simulator: agents`` through the fake provider server (real SDKs): one
call per turn, each speaking to one participant; the turn-taking policies; a plugin's bugs and
bad answers end its continuation invalid with the reason; the forecast drives the same tasks."""

from __future__ import annotations

import itertools
import re

import pytest

from cocoeval.core.errors import ConfigError
from cocoeval.core.schema import Turn
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.llm import LLMConfig, Runner
from cocoeval.simulate.agents import own_turn
from cocoeval.simulate.engine import plan_continuations, simulate
from cocoeval.simulate.plugins import SimContext, Simulator, check_setup, get_simulator, simulator
from cocoeval.simulate.setup import PluginSetup

from ..sim_helpers import SPEAKERS, instance

N = 6


def oa(srv, model="gpt-4.1"):
    return f"openai/{model}@{srv.openai_base}"


def runner(tmp_path):
    return Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))


def agents(srv, **options):
    return PluginSetup(name="ag", simulator="agents", model=oa(srv), options=options)


def systems(srv) -> list[str]:
    return [b["messages"][0]["content"] for b in srv.stats()["bodies"]]


def test_oracle_agents_one_call_per_turn_each_to_one_participant(srv, tmp_path):
    srv.configure(answers=[{"match": f"It is {s}'s turn", "text": f"{s}: my point, as {s}"} for s in SPEAKERS])
    inst = instance(n_ref=N)
    [c] = simulate([inst], [agents(srv)], runner(tmp_path))["ag"]
    assert c.status == "ok", c.reason
    assert [t.speaker for t in c.turns] == [t.speaker for t in inst.reference]  # oracle: the reference's order
    assert [t.text for t in c.turns] == [f"my point, as {t.speaker}" for t in inst.reference]  # own name stripped
    assert srv.stats()["requests"] == len(c.calls) == N
    for system, ref in zip(systems(srv), inst.reference, strict=True):
        addressed = re.findall(r"^You are (\w+)", system, flags=re.M)
        assert addressed == [ref.speaker] and f"Speak only as {ref.speaker}" in system
    # the conversation so far grows: the last call sees the history and the turns written before it
    last_user = srv.stats()["bodies"][-1]["messages"][-1]["content"]
    assert inst.history[0].text in last_user and f"my point, as {inst.reference[-2].speaker}" in last_user


def test_agents_resume_from_the_cache_sends_nothing_again(srv, tmp_path):
    srv.configure(answers=[{"match": "", "text": "a point"}])
    first = simulate([instance(n_ref=N)], [agents(srv)], runner(tmp_path))["ag"]
    sent = srv.stats()["requests"]
    again = simulate([instance(n_ref=N)], [agents(srv)], runner(tmp_path))["ag"]
    assert srv.stats()["requests"] == sent == N
    assert [t.model_dump() for t in again[0].turns] == [t.model_dump() for t in first[0].turns]


def test_history_policy_is_seeded_and_follows_x(srv, tmp_path):
    srv.configure(answers=[{"match": "", "text": "a point"}])
    inst = instance(n_ref=12)  # x cycles Alice -> Bob -> Carol: each speaker only ever follows one
    [c] = simulate([inst], [agents(srv, policy="history")], runner(tmp_path))["ag"]
    order = [inst.history[-1].speaker, *(t.speaker for t in c.turns)]
    assert all(SPEAKERS.index(b) == (SPEAKERS.index(a) + 1) % 3 for a, b in itertools.pairwise(order))
    [d] = simulate([inst], [agents(srv, policy="history")], runner(tmp_path / "b"))["ag"]
    assert [t.speaker for t in d.turns] == [t.speaker for t in c.turns]


def test_moderator_policy_picks_the_speaker_and_reasks_on_an_unknown_name(srv, tmp_path):
    srv.configure(
        answers=[
            {"match": "Who speaks next", "text": "Nobody in particular", "times": 1},
            {"match": "Who speaks next", "text": "carol."},
            {"match": "It is Carol's turn", "text": "Carol here"},
        ]
    )
    [c] = simulate([instance(n_ref=2)], [agents(srv, policy="moderator")], runner(tmp_path))["ag"]
    assert c.status == "ok", c.reason
    assert [t.speaker for t in c.turns] == ["Carol", "Carol"]
    assert any("the moderator named no participant (attempt 1)" in n for n in c.notes)
    assert srv.stats()["requests"] == 1 + 2 * 2  # one re-ask, then a moderator call and an agent call per turn


def test_agent_answers_that_are_no_turn(srv, tmp_path):
    srv.configure(answers=[{"match": "", "text": "I'm sorry, I can't write lines for a real person."}])
    [c] = simulate([instance(n_ref=N)], [agents(srv, max_attempts=2)], runner(tmp_path))["ag"]
    assert c.status == "invalid" and "no usable turn from the agent of" in c.reason and "2 attempts" in c.reason
    assert srv.stats()["requests"] == 2  # each attempt a new sample


def test_failed_call_ends_the_continuation_invalid(srv, tmp_path):
    srv.configure(faults=[{"kind": "http", "status": 400, "times": 100}])
    [c] = simulate([instance(n_ref=N)], [agents(srv)], runner(tmp_path))["ag"]
    assert c.status == "invalid" and c.reason.startswith("call failed at turn 1")


def test_own_turn_keeps_only_the_agents_words():
    assert own_turn("Alice: hello there", "Alice", SPEAKERS) == ("hello there", [])
    text, notes = own_turn("I agree.\nBob: and I do not", "Alice", SPEAKERS)
    assert text == "I agree." and notes == ["cut the answer where it went on as Bob"]
    text, notes = own_turn("Bob: speaking for Bob", "Alice", SPEAKERS)
    assert text == "" and "wrote as Bob" in notes[0]
    assert own_turn("Note: the budget is tight", "Alice", SPEAKERS)[0] == "Note: the budget is tight"


def test_bad_options_and_unknown_simulators_are_refused_when_the_setup_is_checked(srv):
    with pytest.raises(ConfigError, match="policy"):
        check_setup(agents(srv, policy="loudest"))
    unknown = PluginSetup(name="x", simulator="nope")  # the schema alone looks up no plugin
    with pytest.raises(ConfigError, match="unknown simulator 'nope'; known: agents"):
        check_setup(unknown)
    with pytest.raises(ConfigError, match="calls a model"):
        check_setup(PluginSetup(name="x", simulator="agents"))
    with pytest.raises(ConfigError, match="multi-party"):
        check_setup(PluginSetup(name="x", simulator="agents", model="openai/gpt-4.1", kind="human_ai"))
    with pytest.raises(ConfigError):
        get_simulator("nope")


def test_setup_id_changes_with_what_changes_the_output(srv):
    base = agents(srv).setup_id()
    assert agents(srv, policy="history").setup_id() != base
    assert PluginSetup(name="other-name", simulator="agents", model=oa(srv)).setup_id() == base
    assert PluginSetup(name="ag", simulator="agents", model=oa(srv), sample=1).setup_id() != base
    defaults = {
        "policy": "oracle",
        "moderator_model": None,
        "temperature": None,
        "max_tokens_per_turn": 120,
        "max_attempts": 3,
    }
    assert check_setup(agents(srv)).options == defaults  # filled in when checked: the defaults enter the id
    assert agents(srv, **defaults).setup_id() == base  # the same id, the defaults given or not


# ------------------------------------------------------------------ a plugin of one's own


@simulator("test-echo")
class Echo(Simulator):
    """Repeats the last turn of the conversation, attributed to the next reference speaker; asks
    the model twice at once (generate_many) on every third turn."""

    async def next_turns(self, ctx: SimContext) -> list[Turn]:
        last = [*ctx.instance.history, *ctx.turns][-1]
        if len(ctx.turns) % 3 == 2 and self.setup.model:
            reqs = [
                ctx.llm.request([("user", f"say something {i} at {len(ctx.turns)}")], max_tokens=20) for i in range(2)
            ]
            a, b = await ctx.llm.generate_many(reqs)
            return [Turn(speaker=ctx.next_reference_speaker, text=f"{a.text} / {b.text}")]
        return [Turn(speaker=ctx.next_reference_speaker, text=last.text)]


@simulator("test-buggy")
class Buggy(Simulator):
    async def next_turns(self, ctx: SimContext) -> list[Turn]:
        if ctx.turns:
            raise KeyError("oops")
        return [Turn(speaker="Alice", text="first"), Turn(speaker="Zed", text="a stranger")]


@simulator("test-asyncio")
class UsesAsyncio(Simulator):
    async def next_turns(self, ctx: SimContext) -> list[Turn]:
        import asyncio

        await asyncio.sleep(0)
        return []


def test_a_plugin_without_a_model_makes_no_call(srv, tmp_path):
    [c] = simulate([instance(n_ref=N)], [PluginSetup(name="e", simulator="test-echo")], runner(tmp_path))["e"]
    assert c.status == "ok" and c.calls == [] and len(c.turns) == N


def test_generate_many_sends_the_calls_in_one_round(srv, tmp_path):
    srv.configure(answers=[{"match": "say something 0", "text": "zero"}, {"match": "say something 1", "text": "one"}])
    setup = PluginSetup(name="e", simulator="test-echo", model=oa(srv))
    [c] = simulate([instance(n_ref=N)], [setup], runner(tmp_path))["e"]
    assert c.status == "ok" and c.turns[2].text == "zero / one" and len(c.calls) == 4 == srv.stats()["requests"]


def test_plugin_bugs_end_invalid_with_the_reason_and_the_run_goes_on(srv, tmp_path):
    res = simulate(
        [instance(n_ref=N)],
        [
            PluginSetup(name="b", simulator="test-buggy"),
            PluginSetup(name="a", simulator="test-asyncio"),
            PluginSetup(name="e", simulator="test-echo"),
        ],
        runner(tmp_path),
    )
    [b], [a], [e] = res["b"], res["a"], res["e"]
    assert b.status == "invalid" and "raised KeyError: 'oops'" in b.reason and "test_plugins.py" in b.reason
    assert [t.speaker for t in b.turns] == ["Alice", "Zed"] and b.unknown_speakers == ["Zed"]  # kept, noted
    assert a.status == "invalid" and "awaited" in a.reason and "ctx.llm" in a.reason
    assert e.status == "ok"


def test_forecast_drives_the_plugin_tasks(srv, tmp_path):
    tax = load_taxonomy()
    inst = instance(n_ref=N)
    [task] = plan_continuations([inst], [agents(srv, policy="moderator")], tax)["ag"]
    n = 0
    while not task.done:
        calls = task.next_calls()
        replies = task.forecast_replies(calls)
        from cocoeval.llm import CallResult
        from cocoeval.llm.base import GenerateResponse

        task.apply_results(
            [
                CallResult(key="f", model=c.model, stage="simulate", status="ok", response=GenerateResponse(text=t))
                for c, t in zip(calls, replies, strict=True)
            ]
        )
        n += len(calls)
    c = task.result()
    assert n == 2 * N and c.status == "ok"
    assert [t.speaker for t in c.turns] == [t.speaker for t in inst.reference]  # the moderator's stand-in answers
    assert [t.text for t in c.turns] == [t.text for t in inst.reference]
