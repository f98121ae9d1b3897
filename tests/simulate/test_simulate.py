"""Simulation: its logic on canned answers from the in-process mock model (``mock/<script>``,
no socket), and what reaches the wire through the fake provider server (real SDKs)."""

from __future__ import annotations

import json

import pytest

from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.llm import LLMConfig, Runner
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import format_behaviours, step_messages
from cocoeval.simulate.engine import simulate
from cocoeval.simulate.setup import Setup

from ..sim_helpers import SPEAKERS, instance, lines


def run(tmp_path, setups, insts=None):
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    return simulate(insts or [instance()], setups, r)


def mock(tmp_path, answers) -> str:
    """A mock model answering from ``answers`` (the fake server's scripted answers)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "answers.json"
    p.write_text(json.dumps({"answers": answers}))
    return f"mock/{p}"


def sent(tmp_path, setups, insts=None):
    """``run``, and how many calls were sent (not served from the cache)."""
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    res = simulate(insts or [instance()], setups, r)
    t = r.ledger.totals()
    return res, t["calls"] - t["cache_hits"]


def oa(srv, model="gpt-4.1"):
    return f"openai/{model}@{srv.openai_base}"


@pytest.mark.parametrize("k,expected_calls", [(30, 1), (5, 6), (1, 30), (7, 5)])
def test_turns_per_call(tmp_path, k, expected_calls):
    model = mock(tmp_path, [{"match": f"next {n} turn", "text": lines(n)} for n in (30, 7, 5, 2, 1)])
    res, n_sent = sent(tmp_path, [Setup(name="s", model=model, turns_per_call=k)])
    [c] = res["s"]
    assert c.status == "ok", c.reason
    assert len(c.turns) == 30 and all(t.speaker in SPEAKERS for t in c.turns)
    assert len(c.calls) == expected_calls == n_sent
    assert c.instance_hash == instance().content_hash()  # what it was made from, for the stale rule


def test_too_many_and_too_few_turns(tmp_path):
    model = mock(tmp_path, [{"match": "next 5 turns", "text": lines(8)}])
    [c] = run(tmp_path, [Setup(name="s", model=model, turns_per_call=5)])["s"]
    assert c.status == "ok" and len(c.turns) == 30 and len(c.calls) == 6
    assert any("kept the first 5 of 8" in n for n in c.notes)
    model = mock(tmp_path / "b", [{"match": "next 5 turns", "text": lines(3)}, {"match": "turns", "text": lines(3)}])
    [c] = run(tmp_path / "b", [Setup(name="s", model=model, turns_per_call=5)])["s"]
    assert c.status == "ok" and len(c.turns) == 30 and len(c.calls) == 10
    assert any("asked for 5 turns, got 3" in n for n in c.notes)


def test_unusable_answers_end_invalid_with_reason(tmp_path):
    model = mock(tmp_path, [{"match": "", "text": "I'm sorry, I can't continue this conversation."}])
    res, n_sent = sent(tmp_path, [Setup(name="s", model=model, turns_per_call=30, max_attempts=3)])
    [c] = res["s"]
    assert c.status == "invalid" and "no usable turn in 3 attempts at turn 1" in c.reason
    assert n_sent == 3  # each attempt is a new sample, not a cache hit
    assert c.reason.endswith("(last answer: refusal)")  # a refusal is told apart from garbage
    assert "I'm sorry, I can't continue" in c.notes[-1]  # and what the model said is recorded


@pytest.mark.parametrize(
    "answer,why",
    [
        ("Sorry: I cannot continue this conversation.", "refusal"),  # read as a turn of speaker 'Sorry' before
        ("Assistant: I'm unable to write lines for real people.", "refusal"),
        ("", "empty answer"),
        ("The meeting goes on and they agree on the budget.", "no turn in 'Speaker: text' form"),
    ],
)
def test_a_refusal_or_unusable_answer_is_never_a_turn(tmp_path, answer, why):
    model = mock(tmp_path, [{"match": "", "text": answer}])
    res, n_sent = sent(tmp_path, [Setup(name="s", model=model, turns_per_call=30, max_attempts=2)])
    [c] = res["s"]
    assert (c.status, c.turns) == ("invalid", [])
    assert c.reason == f"no usable turn in 2 attempts at turn 1 (last answer: {why})"
    assert n_sent == 2


def test_the_models_own_remarks_are_dropped_not_counted_as_turns(tmp_path):
    model = mock(
        tmp_path,
        [
            {
                "match": "next 30 turns",
                "text": "Note: here is the continuation.\n" + lines(29) + "\n\nNote: I kept each speaker's style.",
            },
            {"match": "next 1 turn", "text": lines(1, 29)},
        ],
    )
    [c] = run(tmp_path, [Setup(name="s", model=model, turns_per_call=30)])["s"]
    assert c.status == "ok" and len(c.turns) == 30 and {t.speaker for t in c.turns} <= set(SPEAKERS)
    assert c.unknown_speakers == [] and len(c.calls) == 2
    assert any('dropped "Note: I kept each speaker\'s style."' in n for n in c.notes)


def test_a_cut_off_user_turn_of_a_chat_is_no_usable_turn(tmp_path):
    # budget 60 + 8 * 4 = 92 tokens = 368 characters: the user turn is cut off, every time
    model = mock(
        tmp_path,
        [{"match": "Write the user's next message", "text": "user: " + "word " * 200}, {"match": "", "text": "Sure."}],
    )
    inst = instance("chat/c1/0", n_hist=6, n_ref=6, chat=True)
    setup = Setup(name="h", model=model, kind="human_ai", max_tokens_per_turn=8, max_attempts=2)
    [c] = run(tmp_path, [setup], [inst])["h"]
    assert c.status == "invalid" and c.reason.endswith("(last answer: cut off at max_tokens)")
    assert all(t.speaker == "assistant" for t in c.turns)  # no cut-off user turn was kept


def test_failed_call_makes_the_continuation_invalid(tmp_path):
    model = mock(tmp_path, [{"match": "", "error": "context_length"}])
    [c] = run(tmp_path, [Setup(name="s", model=model, turns_per_call=30)])["s"]
    assert c.status == "invalid" and "context_length" in c.reason and c.turns == []


def test_unknown_speakers_are_kept_and_recorded(tmp_path):
    model = mock(tmp_path, [{"match": "", "text": lines(29) + "\nZed: I'm new here"}])
    [c] = run(tmp_path, [Setup(name="s", model=model, turns_per_call=30)])["s"]
    assert c.status == "ok" and c.unknown_speakers == ["Zed"] and c.turns[-1].speaker == "Zed"


def test_presence_penalty_variant_sent_only_where_supported(srv, tmp_path):
    inst = instance()
    copied = "\n".join(f"{t.speaker}: {t.text}" for t in inst.history[-5:])
    srv.configure(answers=[{"match": "", "text": copied + "\nAlice: a brand new point"}])
    setups = [
        Setup(name="oa", model=oa(srv), prompt="copy_then_continue", turns_per_call=1),
        Setup(
            name="an",
            model=f"anthropic/claude-opus-4@{srv.anthropic_base}",
            prompt="copy_then_continue",
            turns_per_call=1,
        ),
    ]
    res = run(tmp_path, setups, [inst])
    oa_c, an_c = res["oa"][0], res["an"][0]
    assert oa_c.turns[0].text == "a brand new point"  # the 5 copies stripped
    assert all(call.dropped_params == [] for call in oa_c.calls)
    assert all(call.dropped_params == ["presence_penalty"] for call in an_c.calls)
    # later steps: the copies come from the history then the new turns; the fake model keeps
    # copying the history, so the check finds fewer copies and says so
    assert any("copied turns" in n for n in oa_c.notes)


def test_copy_instruction_is_in_the_system_prompt_and_the_copies_lead_the_response(srv, tmp_path):
    """C.2: 'as shown in Table 17' (the system prompt) the model is told to include the five
    most recent turns in its response before the next turn; presence_penalty 2.0. The SFT
    variant of section 5.4 is the same setup on a fine-tuned model id."""
    inst = instance()
    copied = "\n".join(f"{t.speaker}: {t.text}" for t in inst.history[-5:])
    srv.configure(answers=[{"match": "", "text": copied + "\nAlice: a brand new point"}])
    ft = oa(srv, "ft:gpt-4.1-2025-04-14:org:cocoeval-k1:abc123")
    [c] = run(tmp_path, [Setup(name="sft-pp", model=ft, prompt="copy_then_continue", turns_per_call=1)], [inst])[
        "sft-pp"
    ]
    assert c.turns[0].text == "a brand new point" and c.calls[0].dropped_params == []
    body = srv.stats()["bodies_last"]
    system, user = (m["content"] for m in body["messages"])
    assert "Begin your response by copying the 5 most recent turns" in system
    assert "cop" not in user.lower() and user.endswith(
        step_messages(load_prompt("vanilla"), inst, c.turns[:29], 1)[1].content.split("\n")[-1]
    )
    assert body["presence_penalty"] == 2.0 and body["model"] == "ft:gpt-4.1-2025-04-14:org:cocoeval-k1:abc123"


def test_human_ai_setup(srv, tmp_path):
    srv.configure(answers=[{"match": "Write the user's next message", "text": "user: can you shorten it?"}])
    inst = instance("chat/c1/0", n_hist=6, n_ref=6, chat=True)
    setup = Setup(name="h", model=oa(srv, "gpt-4.1"), kind="human_ai", chatbot=oa(srv, "gpt-4.1-mini"))
    [c] = run(tmp_path, [setup, Setup(name="multi", model=oa(srv))], [inst])["h"]
    assert c.status == "ok" and [t.speaker for t in c.turns] == [t.speaker for t in inst.reference]
    users = [t for t in c.turns if t.speaker == "user"]
    assert all(t.text == "can you shorten it?" for t in users)
    models = [call.model for call in c.calls]
    assert models == [oa(srv) if t.speaker == "user" else oa(srv, "gpt-4.1-mini") for t in inst.reference]
    body = srv.stats()["bodies_last"]
    assert (
        body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
        or "Write the user's next message" in body["messages"][-1]["content"]
    )


def test_multiparty_setups_skip_chat_instances_and_vice_versa(tmp_path):
    res = run(
        tmp_path,
        [Setup(name="m", model="mock/echo"), Setup(name="h", model="mock/echo", kind="human_ai")],
        [instance()],
    )
    assert len(res["m"]) == 1 and res["h"] == []


def test_setup_ids():
    a = Setup(name="a", model="openai/gpt-4.1", prompt="vanilla", turns_per_call=5)
    assert a.setup_id() == Setup(name="renamed", model="openai/gpt-4.1", turns_per_call=5).setup_id()
    assert a.setup_id() != Setup(name="a", model="openai/gpt-4.1", turns_per_call=1).setup_id()
    assert a.setup_id() != Setup(name="a", model="openai/gpt-4.1", turns_per_call=5, temperature=1).setup_id()
    t = Setup(name="t", model="openai/gpt-4.1", prompt="taxonomy")
    tax = load_taxonomy()
    other = tax.model_copy(update={"behaviours": tax.behaviours[:3]})
    assert t.setup_id(tax) != t.setup_id(other)
    assert a.setup_id(tax) == a.setup_id(other)  # vanilla does not depend on the taxonomy
    assert Setup(name="c", model="m/x" if False else "openai/x", prompt="copy_then_continue").presence_penalty == 2.0


def test_taxonomy_copy_prompt_is_the_taxonomy_prompt_with_the_copy_paragraph(srv, tmp_path):
    """params/paper-c2.yaml's reading of C.2 (the copy instruction of Table 17 in every simulation
    prompt): the taxonomy-guided prompt plus copy_then_continue's paragraph, penalised, the copies
    checked and stripped like copy_then_continue's."""
    from cocoeval.prompts.render import format_behaviours

    tax = load_taxonomy()
    inst = instance()
    beh = format_behaviours(tax)
    copy_sys = step_messages(load_prompt("copy_then_continue"), inst, [], 1)[0].content
    tax_sys = step_messages(load_prompt("taxonomy"), inst, [], 1, behaviours=beh)[0].content
    both = step_messages(load_prompt("taxonomy_copy_then_continue"), inst, [], 1, behaviours=beh)[0].content
    para = next(x for x in copy_sys.split("\n\n") if x.startswith("Begin your response by copying the 5"))
    assert both == tax_sys.replace("\n\n# Conversation metadata", "\n\n" + para + "\n\n# Conversation metadata", 1)
    s = Setup(name="tc", model=oa(srv), prompt="taxonomy_copy_then_continue", turns_per_call=1)
    assert (s.presence_penalty, s.copies) == (2.0, 5) and Setup(name="v", model="openai/x").copies == 0
    copied = "\n".join(f"{t.speaker}: {t.text}" for t in inst.history[-5:])
    srv.configure(answers=[{"match": "", "text": copied + "\nAlice: a brand new point"}])
    [c] = run(tmp_path, [s], [inst])["tc"]
    assert c.turns[0].text == "a brand new point" and c.calls[0].dropped_params == []


def test_prompts_render_the_taxonomy_and_share_a_prefix():
    inst = instance()
    tax = load_taxonomy()
    p = load_prompt("taxonomy")
    first = step_messages(p, inst, [], 1, behaviours=format_behaviours(tax))
    later = step_messages(p, inst, inst.reference[:10], 1, behaviours=format_behaviours(tax))
    for b in tax.behaviours:
        assert b.name in first[0].content and b.definition in first[0].content
    assert first[0] == later[0]  # constant system prefix (instructions, M, S, x)
    assert "utterance 9 of" not in first[1].content and "utterance 39 of" in later[1].content
    vanilla = step_messages(load_prompt("vanilla"), inst, [], 1)[0].content
    assert "Repetition" not in vanilla


def test_every_shipped_prompt_loads_with_a_version():
    from cocoeval.prompts.files import available_prompts

    names = available_prompts()
    assert {
        "vanilla",
        "taxonomy",
        "copy_then_continue",
        "user_simulator",
        "chatbot",
        "metadata",
        "summary",
        "clean",
    } <= set(names)
    for n in names:
        p = load_prompt(n)
        assert p.name == n and p.version and p.ref.startswith(f"{n}@")
