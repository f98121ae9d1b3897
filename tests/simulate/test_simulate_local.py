"""End to end on the real local model (llama.cpp in process): every prompt, k = 1 and more,
the presence-penalty variant and the human–AI setup. Each continuation has its turns with
participants' (or recorded unknown) speakers, or is invalid with a reason."""

from __future__ import annotations

import pytest

from cocoeval.llm import LLMConfig, Runner
from cocoeval.simulate.engine import simulate
from cocoeval.simulate.setup import Setup

from ..llm.test_llm_local import HAVE_LOCAL
from ..sim_helpers import SPEAKERS, instance

pytestmark = pytest.mark.skipif(not HAVE_LOCAL, reason="the local extra is not installed")


def test_local_model_every_setup(tmp_path):
    insts = [instance("d/c/0", n_hist=6, n_ref=4), instance("chat/c/0", n_hist=4, n_ref=4, chat=True)]
    kw = {"model": "local/smollm2", "temperature": 0.7, "max_tokens_per_turn": 24}
    setups = [
        Setup(name="v4", prompt="vanilla", turns_per_call=4, **kw),
        Setup(name="t2", prompt="taxonomy", turns_per_call=2, **kw),
        Setup(name="c1", prompt="copy_then_continue", turns_per_call=1, **kw),
        Setup(name="h", kind="human_ai", **kw),
    ]
    runner = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, concurrency=1))
    res = simulate(insts, setups, runner)
    assert {k: len(v) for k, v in res.items()} == {"v4": 1, "t2": 1, "c1": 1, "h": 1}
    for name, (c,) in res.items():
        if c.status == "ok":
            assert len(c.turns) == 4, name
            allowed = ["user", "assistant"] if name == "h" else SPEAKERS + c.unknown_speakers
            assert all(t.speaker in allowed and t.text for t in c.turns), name
        else:
            assert c.reason, name
        assert c.calls and all(call.status in ("ok", "failed") for call in c.calls)
    # the presence penalty reaches llama.cpp (which accepts it): nothing dropped
    assert all(call.dropped_params == [] for call in res["c1"][0].calls)
    # a second run is served entirely from the cache and gives the same continuations
    again = simulate(insts, setups, Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)))
    assert {k: [c.model_dump(exclude={"calls"}) for c in v] for k, v in again.items()} == {
        k: [c.model_dump(exclude={"calls"}) for c in v] for k, v in res.items()
    }
    assert all(call.cache_hit for v in again.values() for c in v for call in c.calls)


def test_local_model_judges(tmp_path):
    from cocoeval.judge.config import JudgeConfig
    from cocoeval.judge.engine import judge

    inst = instance("d/c/0", n_hist=4, n_ref=3)
    runner = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, concurrency=1))
    [js] = judge(
        [inst],
        {},
        [JudgeConfig(name="smol", model="local/smollm2", max_tokens_per_turn=40, max_tokens_overall=120)],
        runner,
    ).values()
    assert {j.kind for j in js} == {"overall", "fine_grained"}
    for j in js:
        if j.status == "invalid":
            assert j.reason and j.raw is not None and j.labels == []
        elif j.kind == "fine_grained":
            assert [lb.turn for lb in j.labels] == [0, 1, 2]
        else:
            assert 1 <= j.consistency <= 10 and 1 <= j.collaborativeness <= 10
