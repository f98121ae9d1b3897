"""A continuation whose turns are mostly by speakers who are not participants ("Goals",
"Participants": a small model echoing the prompt's headings) is invalid with its reason, whatever
wrote it (the paper's simulator, a plugin, an imported file), and the invalid accounting shows the
share of such turns per setup (``invalid_rates``' ``unknown_speaker_share``)."""

from __future__ import annotations

import json

import polars as pl

from cocoeval.analysis.frames import invalid_rates, run_frames
from cocoeval.core.schema import Continuation, Turn, unknown_speaker_turns
from cocoeval.llm import LLMConfig, Runner
from cocoeval.run import Run
from cocoeval.simulate.engine import simulate
from cocoeval.simulate.plugins import SimContext, Simulator, simulator
from cocoeval.simulate.setup import ImportedSetup, PluginSetup, Setup
from cocoeval.simulate.validity import MAX_UNKNOWN_SPEAKER_SHARE, continuation, speaker_problem

from ..sim_helpers import SPEAKERS, instance

HEADINGS = ["Goals", "Participants", "Summary"]
N = 6


def mixed(n_unknown: int, n: int = N) -> list[Turn]:
    """``n`` turns, the first ``n_unknown`` by the prompt's headings, the rest by participants."""
    return [Turn(speaker=HEADINGS[i % 3] if i < n_unknown else SPEAKERS[i % 3], text=f"line {i}") for i in range(n)]


def test_more_than_half_of_the_turns_by_non_participants_is_invalid_with_the_reason():
    inst = instance(n_ref=N)
    assert MAX_UNKNOWN_SPEAKER_SHARE == 0.5
    assert speaker_problem(inst, mixed(3)) is None  # half: a usable continuation, its strangers noted
    why = speaker_problem(inst, mixed(4))
    assert why == "4 of 6 turns by speakers who are not participants: 'Goals' (2), 'Participants' (1), 'Summary' (1)"
    assert speaker_problem(inst, inst.reference) is None and speaker_problem(inst, []) is None
    c = continuation(inst, "sid", "s", mixed(N), None)
    assert c.status == "invalid" and c.reason.startswith("6 of 6 turns by speakers who are not participants")
    # the simulator's own reason comes first, and is the only one
    c = continuation(inst, "sid", "s", mixed(N), "call failed at turn 7: timeout")
    assert c.reason == "call failed at turn 7: timeout"
    # the history's speakers are participants too (M may leave one out)
    bare = inst.model_copy(update={"metadata": inst.metadata.model_copy(update={"participants": []})})
    assert unknown_speaker_turns(bare, inst.reference) == [] and speaker_problem(bare, inst.reference) is None


def test_human_ai_chats_and_the_test_instances_never_fire():
    chat = instance("chat/c/0", n_ref=N, chat=True)
    assert [p.name for p in chat.metadata.participants] == ["user", "assistant"]
    assert speaker_problem(chat, chat.reference) is None
    assert speaker_problem(chat, [Turn(speaker="user", text="hi")] * N) is None


def runner(tmp_path):
    return Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))


@simulator("test-headings")
class Headings(Simulator):
    """Writes every turn as one of the prompt's headings."""

    async def next_turns(self, ctx: SimContext) -> list[Turn]:
        return [Turn(speaker=HEADINGS[len(ctx.turns) % 3], text="the goals are")]


def test_every_simulator_path_applies_the_rule(srv, tmp_path):
    """The paper's simulator (a model answering with headings as speakers), a plugin and an
    imported file: the same rule, the same reason."""
    inst = instance(n_ref=N)
    echo = "\n".join(f"{HEADINGS[i % 3]}: point {i}" for i in range(N))
    srv.configure(answers=[{"match": "", "text": echo}])
    rec = {"instance_id": inst.id, "turns": [{"speaker": HEADINGS[i % 3], "text": "x"} for i in range(N)]}
    (tmp_path / "mine.jsonl").write_text(json.dumps(rec) + "\n")
    res = simulate(
        [inst],
        [
            Setup(name="s", model=f"openai/gpt-4.1@{srv.openai_base}", turns_per_call=N),
            PluginSetup(name="p", simulator="test-headings"),
            ImportedSetup(name="i", continuations=str(tmp_path / "mine.jsonl")),
        ],
        runner(tmp_path),
    )
    for name in ("s", "p", "i"):
        [c] = res[name]
        assert c.status == "invalid", name
        assert c.reason.startswith(f"{N} of {N} turns by speakers who are not participants: 'Goals' (2)"), c.reason
        assert c.unknown_speakers == HEADINGS and len(c.turns) == N  # kept, as written


def test_invalid_rates_show_the_share_of_turns_by_non_participants(tmp_path):
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=N) for i in range(3)]
    conts = {
        "sim": [
            continuation(insts[0], "sid", "sim", insts[0].reference, None),
            continuation(insts[1], "sid", "sim", mixed(2), None),  # 2 of 6: ok, noted
            continuation(insts[2], "sid", "sim", mixed(5), None),
        ],  # 5 of 6: invalid
        "old": [Continuation(instance_id=insts[0].id, setup_id="other", setup_name="old", turns=mixed(N))],
    }
    params = {
        "name": "r",
        "bench": "b",
        "setups": [
            {"name": "sim", "model": "openai/m", "turns_per_call": 3},
            {"name": "old", "model": "openai/m", "turns_per_call": 2},
        ],
    }
    run = Run.model_validate(
        {
            "manifest": {"params": params, "setups": {"sim": "sid", "old": "oid"}},
            "instances": insts,
            "continuations": conts,
        }
    )
    assert [c.status for c in conts["sim"]] == ["ok", "ok", "invalid"]
    f = run_frames(run)
    assert f.continuations.filter(pl.col("setup") == "sim")["unknown_speaker_turns"].to_list() == [0, 2, 5]
    r = {x["target"]: x for x in invalid_rates(f).filter(pl.col("stage") == "simulate").to_dicts()}
    assert r["sim"]["unknown_speaker_share"] == 7 / 18 and r["sim"]["invalid"] == 1
    assert r["old"]["stale"] == 1 and r["old"]["unknown_speaker_share"] is None  # stale turns count nowhere
    assert invalid_rates(f).filter(pl.col("stage") == "judge")["unknown_speaker_share"].is_null().all()
