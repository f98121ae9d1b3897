from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoeval import BuildConfig, Conversation, Turn, build, build_instances, load_instances
from cocoeval.bench.build import candidate_windows, merge_consecutive
from cocoeval.bench.config import ChatSelection

from ..conftest import qmsum_meeting


def conv(cid: str, n: int, dataset: str = "d", speakers=("A", "B", "C")) -> Conversation:
    turns = [
        Turn(speaker=speakers[i % len(speakers)], text=f"{cid} turn {i} says something useful here.", source_index=i)
        for i in range(n)
    ]
    return Conversation(
        id=cid, dataset=dataset, source_format="test", source_file=f"{cid}.json", turns=turns, goals=["goal"]
    )


@settings(max_examples=200)
@given(
    n=st.integers(0, 400),
    h=st.integers(1, 40),
    r=st.integers(1, 40),
    prior=st.integers(0, 30),
    seed=st.integers(0, 10**6),
)
def test_windows_fit_do_not_overlap_and_leave_prior_turns(n, h, r, prior, seed):
    cfg = BuildConfig(history_turns=h, reference_turns=r, min_prior_turns=prior)
    starts = candidate_windows(n, cfg, random.Random(seed))
    L = h + r
    assert len(starts) == max(0, (n - prior) // L)
    for a, b in itertools.pairwise(starts):
        assert b - a >= L
    assert all(s >= prior and s + L <= n for s in starts)


@settings(max_examples=50, deadline=None)
@given(lengths=st.lists(st.integers(0, 250), min_size=1, max_size=12), seed=st.integers(0, 1000), per=st.integers(0, 8))
def test_build_properties(lengths, seed, per):
    convs = [conv(f"c{i}", n) for i, n in enumerate(lengths)]
    cfg = BuildConfig(history_turns=30, reference_turns=30, min_prior_turns=10, per_dataset=per, seed=seed)
    res = build_instances(convs, cfg)
    by_id = {c.id: c for c in convs}
    for inst in res.eval + res.train:
        assert len(inst.history) == 30 and len(inst.reference) == 30
        c = by_id[inst.provenance.conversation_id]
        s = inst.provenance.start_index
        assert s >= 10
        assert inst.history + inst.reference == c.turns[s : s + 60]  # contiguous in the source
        assert inst.summary.covers_turns == s
    assert len(res.eval) <= per
    eval_convs = {i.provenance.conversation_id for i in res.eval}
    train_convs = {i.provenance.conversation_id for i in res.train}
    assert not eval_convs & train_convs
    ids = [i.id for i in res.eval + res.train]
    assert len(ids) == len(set(ids))
    # windows of one conversation never overlap
    for cid in by_id:
        starts = sorted(i.provenance.start_index for i in res.eval + res.train if i.provenance.conversation_id == cid)
        assert all(b - a >= 60 for a, b in itertools.pairwise(starts))
    # every short conversation is reported with its reason
    short = {c.id for c in convs if len(c.turns) < 70}
    assert {s["conversation"] for s in res.report["skipped_conversations"]} == short
    assert all("too short" in s["reason"] for s in res.report["skipped_conversations"])


def test_same_seed_same_instances_other_seed_differs():
    convs = [conv(f"c{i}", 200 + 7 * i) for i in range(10)]
    cfg = BuildConfig(per_dataset=4, seed=1)
    a, b = build_instances(convs, cfg), build_instances(list(reversed(convs)), cfg)
    assert [i.to_json() for i in a.eval] == [i.to_json() for i in b.eval]
    c = build_instances(convs, BuildConfig(per_dataset=4, seed=2))
    assert [i.id for i in a.eval + a.train] != [i.id for i in c.eval + c.train]


def test_eval_counts_round_robin_and_growth():
    # 10 conversations of exactly one window each: eval needs 6 -> grows past the 50% share
    convs = [conv(f"c{i}", 75) for i in range(10)]
    res = build_instances(convs, BuildConfig(per_dataset=6))
    d = res.report["datasets"]["d"]
    assert d["eval_instances"] == 6 and d["eval_conversations"] == 6
    assert d["train_instances"] == 4
    # long conversations: one window from each eval conversation before a second from any
    convs = [conv(f"c{i}", 1000) for i in range(4)]
    res = build_instances(convs, BuildConfig(per_dataset=3, train_per_dataset=5))
    assert len({i.provenance.conversation_id for i in res.eval}) == 2
    assert sorted(
        len([i for i in res.eval if i.provenance.conversation_id == c])
        for c in {i.provenance.conversation_id for i in res.eval}
    ) == [1, 2]
    assert len(res.train) == 5


def test_shortfall_is_reported():
    res = build_instances([conv("a", 80), conv("b", 80)], BuildConfig(per_dataset=5))
    d = res.report["datasets"]["d"]
    assert d["eval_instances"] == 1 and "asked for 5" in d["eval_shortfall"]


def test_single_speaker_and_min_speakers():
    res = build_instances([conv("solo", 100, speakers=("A",))], BuildConfig())
    assert "single speaker" in res.report["skipped_conversations"][0]["reason"]
    res = build_instances([conv("duo", 100, speakers=("A", "B"))], BuildConfig(min_speakers=3))
    assert "at least 3 distinct speakers" in res.report["skipped_conversations"][0]["reason"]


def test_merge_same_speaker_is_off_by_default_and_merges_when_on():
    turns = [
        Turn(speaker=s, text=t, source_index=i)
        for i, (s, t) in enumerate([("A", "one"), ("A", "two"), ("B", "three"), ("A", "four")])
    ]
    merged = merge_consecutive(turns)
    assert [(t.speaker, t.text, t.source_index, t.merged) for t in merged] == [
        ("A", "one two", 0, 2),
        ("B", "three", 2, None),
        ("A", "four", 3, None),
    ]
    c = Conversation(
        id="m",
        dataset="d",
        source_format="t",
        source_file="f",
        turns=[Turn(speaker="AB"[(i // 2) % 2], text=f"x{i}") for i in range(200)],
    )
    assert len(build_instances([c], BuildConfig(per_dataset=1)).eval[0].history[0].text.split()) == 1
    inst = build_instances([c], BuildConfig(per_dataset=1, merge_same_speaker=True)).eval[0]
    assert all(t.merged == 2 for t in inst.history)


def test_metadata_and_summary_are_extractive_and_use_only_the_past():
    c = conv("c", 150)
    res = build_instances([c], BuildConfig(per_dataset=1, min_prior_turns=20))
    inst = res.eval[0]
    assert inst.metadata.method == "extractive" and inst.summary.method == "extractive"
    assert inst.metadata.goals == ["goal"]
    s = inst.provenance.start_index
    later = {f"turn {i} " for i in range(s, 150)}
    assert not any(x in inst.summary.text for x in later)
    assert f"{s} turns precede this excerpt" in inst.summary.text


def test_duplicate_conversation_ids_are_reported():
    res = build_instances([conv("a", 80), conv("a", 90)], BuildConfig(per_dataset=1))
    assert "duplicate conversation id" in res.report["skipped_conversations"][0]["reason"]


@pytest.mark.parametrize("field,value", [("history_turns", 0), ("eval_share", 0), ("per_dataset", -1)])
def test_config_validation(field, value):
    with pytest.raises(ValueError):
        BuildConfig(**{field: value})


def _chat_file(path, lengths):
    """A ShareChat-like JSONL file the test writes: one {id, messages} chat per line."""
    rows = [
        {
            "id": f"c{n}",
            "messages": [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"c{n} message {i}"} for i in range(n)
            ],
        }
        for n in lengths
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return path


def test_chats_for_the_generalization_study(tmp_path):
    """D.1 / Table 13: chats with more than 60 turns, N of them (25 by default, at most
    per_dataset, the cap of every dataset), one window of 30 + 30 each, all eval; multi-party
    datasets keep their own rules."""
    assert (BuildConfig().chat.min_turns, BuildConfig().chat.conversations) == (61, 25)
    f = _chat_file(tmp_path / "chats.jsonl", [60, 61, 70, 80, 100, 150, 200])
    meetings = tmp_path / "m" / "product"
    meetings.mkdir(parents=True)
    for i in range(4):
        (meetings / f"M{i}.json").write_text(json.dumps(qmsum_meeting(80)), encoding="utf-8")
    cfg = BuildConfig(per_dataset=2, chat=ChatSelection(conversations=4))
    report = build([f"chat:{f}#sharechat", f"qmsum:{tmp_path / 'm'}"], tmp_path / "b", cfg)
    ev, tr = load_instances(tmp_path / "b"), load_instances(tmp_path / "b", "train")
    chats = [i for i in ev if i.dataset == "sharechat"]
    assert len(chats) == 2 and len({i.provenance.conversation_id for i in chats}) == 2  # one window each
    assert not [i for i in tr if i.dataset == "sharechat"]
    for inst in chats:
        assert len(inst.history) == len(inst.reference) == 30
        assert inst.provenance.start_index >= 1 and inst.provenance.conversation_id != "c60"
    [short] = [s for s in report["skipped_conversations"] if s["conversation"] == "c60"]
    assert "need 61" in short["reason"] and "chat.min_turns" in short["reason"]
    assert "at least 61 turns, 2 conversations" in report["datasets"]["sharechat"]["selection"]  # capped
    assert report["datasets"]["qmsum_product"]["eval_instances"] == 2
    # the paper's shape: 50 per dataset, 25 chats -> the chat count (here 4 of the 6 long chats)
    build([f"chat:{f}#sharechat"], tmp_path / "p", BuildConfig(per_dataset=50, chat=ChatSelection(conversations=4)))
    paper = load_instances(tmp_path / "p")
    assert len(paper) == 4 and len({i.provenance.conversation_id for i in paper}) == 4
    # the hand-picked chats only
    cfg = BuildConfig(chat=ChatSelection(ids=["c61", "c200"], min_turns=70))
    res = build([f"chat:{f}#sharechat"], tmp_path / "c", cfg)
    assert sorted(i.provenance.conversation_id for i in load_instances(tmp_path / "c")) == ["c200"]
    reasons = {s["conversation"]: s["reason"] for s in res["skipped_conversations"]}
    assert "need 70" in reasons["c61"] and "chat.ids" in reasons["c80"]
