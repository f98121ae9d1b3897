"""The vectorised judge-free statistics (``convstats.conversation_frame``, and ``conversation_stats``
for one conversation: the same code) equal, to the last bit, the one-conversation-at-a-time
implementation they replaced (``convstats_reference``, the oracle): on the demo run, on the
shipped QMSum sample (30 + 30 turns, real meetings), on hand-made edge cases and on the real data
in ../shared/data when it is there."""

from __future__ import annotations

import polars as pl
import pytest

from cocoeval import BuildConfig, build, load_instances
from cocoeval.analysis.convstats import conversation_frame, conversation_stats
from cocoeval.core.schema import Continuation, Turn
from cocoeval.core.targets import targets_for
from cocoeval.run import Run

from ..conftest import ROOT, SHARED_DATA
from ..sim_helpers import instance
from . import convstats_reference as ref


def same(run: Run) -> int:
    new, old = conversation_frame(run), ref.conversation_frame(run)
    assert new.schema == old.schema
    assert new.height == old.height
    for col in new.columns:  # exact: nulls where the reference has them, floats bit for bit
        a, b = new[col].to_list(), old[col].to_list()
        assert a == b, (col, next((i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y))
    return new.height


def same_one_by_one(run: Run) -> int:
    """``conversation_stats`` on each target of ``run`` alone equals the reference's, bit for bit."""
    targets = targets_for(run.instances, run.current_continuations)
    for t in targets:
        inst = t.instance
        kw = {
            "history": inst.history,
            "goals": inst.metadata.goals,
            "scored": t.judged,
            "participants": len({x.speaker for x in [*inst.history, *inst.reference]}),
        }
        assert conversation_stats(t.turns, **kw) == ref.conversation_stats(t.turns, **kw), (t.name, inst.id)
    return len(targets)


def run_of(instances, shifts=(1, 2)) -> Run:
    """A run whose setups continue each instance with the real turns of other instances (their
    reference, shifted), so that every statistic sees real text, repeats and questions."""
    insts = list(instances)
    conts = {
        f"s{k}": [
            Continuation(
                instance_id=i.id,
                setup_id=f"s{k}",
                turns=[
                    Turn(speaker=t.speaker, text=t.text)
                    for t in insts[(n + k) % len(insts)].reference[: len(i.reference)]
                ],
            )
            for n, i in enumerate(insts)
        ]
        for k in shifts
    }
    conts["copy"] = [
        Continuation(instance_id=i.id, setup_id="copy", turns=list(i.history[-len(i.reference) :]))
        for i in insts
        if len(i.history) >= len(i.reference)
    ]
    return Run.model_validate({"instances": insts, "continuations": conts, "judgments": {}, "manifest": {}})


def test_the_demo_run_gives_the_same_values():
    d = ROOT / "runs" / "demo"
    if not (d / "manifest.json").is_file():
        pytest.skip("no demo run in runs/demo (make demo); the shipped sample is compared below")
    assert same(Run.open(d)) > 0


def test_the_shipped_sample_gives_the_same_values(tmp_path):
    from cocoeval.sources.demo import demo_sources

    out = tmp_path / "bench"
    build(
        demo_sources(tmp_path / "gen"),
        out,
        BuildConfig(history_turns=30, reference_turns=30, min_prior_turns=5, per_dataset=4),
    )
    insts = load_instances(out)
    assert len(insts) >= 6 and any(i.dataset == "generated_chat" for i in insts)  # chats: user turns only
    assert same(run_of(insts)) > len(insts)
    assert same_one_by_one(run_of(insts, shifts=(1,))) > len(insts)


def test_edge_cases_give_the_same_values():
    empty = [Turn(speaker="A", text=""), Turn(speaker="B", text="?"), Turn(speaker="A", text="Mm-hmm. {vocalsound}")]
    repeat = [
        Turn(speaker="A", text="we cut the budget we cut the budget"),
        Turn(speaker="A", text="we cut the budget"),
        Turn(speaker="B", text="We CUT the budget? Don't we?"),
        Turn(speaker="A", text="okay yeah right so"),
    ]
    insts = [instance("d/a/0", 3, 3), instance("d/b/0", 0, 4), instance("chat/c/0", 4, 4, chat=True)]
    insts[0] = insts[0].model_copy(update={"reference": empty})
    insts[1] = insts[1].model_copy(
        update={"reference": repeat, "metadata": insts[1].metadata.model_copy(update={"goals": []})}
    )
    conts = {
        "s": [
            Continuation(instance_id="d/a/0", setup_id="s", turns=repeat[:3]),
            Continuation(instance_id="d/b/0", setup_id="s", turns=list(reversed(repeat))),
            Continuation(instance_id="chat/c/0", setup_id="s", turns=insts[2].history),
        ]
    }
    run = Run.model_validate({"instances": insts, "continuations": conts, "judgments": {}, "manifest": {}})
    assert same(run) == 6 and same_one_by_one(run) == 6
    for kw in ({}, {"scored": []}, {"participants": 5}, {"history": repeat, "goals": ["cut budget"]}):
        for turns in ([], empty, repeat):
            assert conversation_stats(turns, **kw) == ref.conversation_stats(turns, **kw), (turns, kw)
    assert conversation_frame(
        Run.model_validate({"instances": [], "continuations": {}, "judgments": {}, "manifest": {}})
    ).equals(pl.DataFrame(schema=ref.FRAME_SCHEMA))


@pytest.mark.realdata
def test_real_data_gives_the_same_values(tmp_path):
    if not (SHARED_DATA / "qmsum").is_dir():
        pytest.skip(f"real human data not present at {SHARED_DATA}")
    sources = [f"qmsum:{SHARED_DATA / 'qmsum'}"]
    if (SHARED_DATA / "iq2-corpus").is_dir():
        sources.append(f"convokit:{SHARED_DATA / 'iq2-corpus'}")
    out = tmp_path / "bench"
    build(sources, out, BuildConfig(per_dataset=20, seed=0))
    assert same(run_of(load_instances(out))) > 0
