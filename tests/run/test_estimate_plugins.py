"""The forecast of a plugin setup's and an agents setup's calls against the calls the same setup
makes through the fake provider server: long human turns (real meetings and debates have turns of
thousands of characters) stand in for answers cut to each call's output budget, so they do not end
the stand-in continuation early (``plugins.within_budget``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cocoeval.core.jsonio import write_jsonl
from cocoeval.core.schema import Turn
from cocoeval.llm import LLMConfig, Runner
from cocoeval.llm.usage import count_tokens
from cocoeval.prompts.parse import over_budget
from cocoeval.run import load_params
from cocoeval.run.estimate import forecast
from cocoeval.simulate.engine import simulate
from cocoeval.simulate.plugins import SimContext, Simulator, simulator, within_budget

from ..conftest import SHARED_DATA
from ..sim_helpers import instance


@simulator("test-turn-per-call")
class TurnPerCall(Simulator):
    """One call per turn with a small output budget, its answer the next reference speaker's turn."""

    async def next_turns(self, ctx: SimContext) -> list[Turn]:
        reply = await ctx.llm.generate(
            ctx.llm.request([("user", f"say turn {len(ctx.turns)} of {ctx.instance.id}")], max_tokens=40)
        )
        return [Turn(speaker=ctx.next_reference_speaker, text=reply.text)]


def _params(tmp_path: Path, srv, bench: Path) -> Path:
    model = f"openai/gpt-4.1@{srv.openai_base}"
    p = tmp_path / "p.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "f",
                "out": "run",
                "bench": str(bench),
                "setups": [
                    {"name": "ag", "simulator": "agents", "model": model},
                    {"name": "plug", "simulator": "test-turn-per-call", "model": model},
                ],
                "llm": {"cache": "c.sqlite", "progress": False},
            }
        )
    )
    return p


def _forecast_and_run(tmp_path: Path, srv, bench: Path) -> dict[str, tuple[int, int]]:
    """{setup: (forecast calls, calls the run made)}."""
    srv.configure(answers=[{"match": "", "text": "I see your point."}])
    exp = load_params(_params(tmp_path, srv, bench))
    insts = exp.prepare_instances(write=False)
    rows = {r.name: r.calls for r in forecast(exp, insts) if r.stage == "simulate"}
    res = simulate(insts, exp.params.setups, Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)))
    made = {name: sum(len(c.calls) for c in cs) for name, cs in res.items()}
    assert all(c.status == "ok" for cs in res.values() for c in cs)
    assert sum(made.values()) == srv.stats()["requests"]
    return {name: (rows[name], made[name]) for name in made}


def _assert_within_10_percent(got: dict[str, tuple[int, int]]) -> None:
    for name, (fc, made) in got.items():
        assert made > 0 and abs(fc / made - 1) <= 0.10, (name, fc, made)


def test_the_forecast_of_plugin_and_agents_calls_holds_with_long_human_turns(srv, tmp_path):
    long_turn = " ".join(f"word{i}" for i in range(900))  # ~5,000 characters, as a long committee speech
    insts = []
    for k in range(2):
        inst = instance(f"d/c{k}/0", n_ref=10)
        ref = [t.model_copy(update={"text": long_turn}) if i % 2 == 0 else t for i, t in enumerate(inst.reference)]
        insts.append(inst.model_copy(update={"reference": ref}))
    assert over_budget(long_turn, 60 + 120)  # whole, it could never be an agent's answer
    bench = tmp_path / "bench"
    write_jsonl(bench / "eval.jsonl", insts)
    write_jsonl(bench / "train.jsonl", [])
    got = _forecast_and_run(tmp_path, srv, bench)
    assert got == {"ag": (20, 20), "plug": (20, 20)}
    _assert_within_10_percent(got)


@pytest.mark.realdata
def test_the_forecast_of_plugin_and_agents_calls_on_real_meetings_and_debates(srv, tmp_path):
    if not (SHARED_DATA / "qmsum").is_dir() or not (SHARED_DATA / "iq2-corpus").is_dir():
        pytest.skip(f"real human data not present at {SHARED_DATA}")
    from cocoeval import BuildConfig, build

    bench = tmp_path / "bench"
    build(
        [f"qmsum:{SHARED_DATA / 'qmsum'}", f"convokit:{SHARED_DATA / 'iq2-corpus'}"],
        bench,
        BuildConfig(per_dataset=3, seed=0),
    )
    got = _forecast_and_run(tmp_path, srv, bench)
    assert got["ag"][1] == got["plug"][1] == 12 * 30  # one call per turn: 3 instances of each of 4 datasets
    _assert_within_10_percent(got)


def test_within_budget_cuts_a_long_stand_in_to_whole_words_under_the_budget():
    text = " ".join(f"word{i}" for i in range(900))
    cut = within_budget(text, 40)
    assert text.startswith(cut) and count_tokens(cut) <= 40 and not over_budget(cut, 40)
    assert len(cut.split()) > 5 and cut.split()[-1] in text.split()
    assert within_budget("a short turn", 40) == "a short turn" and within_budget(text, None) == text
