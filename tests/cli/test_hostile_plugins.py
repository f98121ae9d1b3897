"""Simulator plugins are untrusted code, run through ``cocoeval`` as a researcher would install
one (a package offering ``cocoeval.simulators`` entry points): a plugin that edits what it is
given changes nothing outside its own copy; one that exits, interrupts, blocks or breaks the
contract ends its continuation invalid with the reason or is refused (exit 2, naming the plugin,
before any call); its notes survive its failure; a re-run keeps what it finished, so a plugin that
is not deterministic is not paid twice; ``cocoeval simulators`` lists the broken ones with why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cocoeval import build

from ..conftest import qmsum_meeting, write_json
from .test_simulators_cli import ANSWERS

PLUGINS = '''
import random
import sys
import time

from pydantic import BaseModel

from cocoeval.core.schema import Turn
from cocoeval.simulate.plugins import InvalidContinuation, Simulator


class Leaky(Simulator):
    """Edits the instance, its reference and the turns it is given, then writes the reference."""

    async def next_turns(self, ctx):
        ref = ctx.instance.reference[len(ctx.turns)]
        speaker, text = ref.speaker, ref.text
        for t in ctx.instance.reference:
            t.text = "EDITED BY THE PLUGIN"
        ctx.instance.history.clear()
        for t in ctx.turns:
            t.text = "CHANGED LATER"
        return [Turn(speaker=speaker, text="said: " + text)]


class Exits(Simulator):
    async def next_turns(self, ctx):
        sys.exit(0)


class Interrupts(Simulator):
    async def next_turns(self, ctx):
        raise KeyboardInterrupt


class RaisesBase(Simulator):
    async def next_turns(self, ctx):
        raise BaseException("from deep inside")


class Blocks(Simulator):
    async def next_turns(self, ctx):
        time.sleep(3600)


class NotesThenFails(Simulator):
    async def next_turns(self, ctx):
        ctx.notes.append("looked at the history")
        if ctx.turns:
            ctx.notes.append("about to give up")
            raise InvalidContinuation("gave up on purpose")
        return [Turn(speaker=ctx.next_reference_speaker, text="a first turn")]


class Random(Simulator):
    """Asks the model with an unseeded random number: not deterministic."""

    async def next_turns(self, ctx):
        req = ctx.llm.request([("user", f"say something {random.random()}")], max_tokens=50)
        reply = await ctx.llm.generate(req)
        return [Turn(speaker=ctx.next_reference_speaker, text=reply.text[:40])]


class InitRaises(Simulator):
    def __init__(self, setup, taxonomy):
        raise RuntimeError("no config file here")

    async def next_turns(self, ctx):
        return []


class NotAsync(Simulator):
    def next_turns(self, ctx):
        return []


class DictOptions(Simulator):
    Options = dict

    async def next_turns(self, ctx):
        return []


class ObjectVersion(Simulator):
    version = object()

    async def next_turns(self, ctx):
        return []


class ForecastRaises(Simulator):
    needs_model = True

    async def next_turns(self, ctx):
        reply = await ctx.llm.generate(ctx.llm.request([("user", "hi")], max_tokens=50))
        return [Turn(speaker=ctx.next_reference_speaker, text=reply.text)]

    def forecast_reply(self, call, ctx):
        raise ValueError("cannot guess")
'''

ENTRY_POINTS = {
    "leaky": "Leaky",
    "exits": "Exits",
    "interrupts": "Interrupts",
    "raises-base": "RaisesBase",
    "blocks": "Blocks",
    "notes-then-fails": "NotesThenFails",
    "random": "Random",
    "init-raises": "InitRaises",
    "not-async": "NotAsync",
    "dict-options": "DictOptions",
    "object-version": "ObjectVersion",
    "forecast-raises": "ForecastRaises",
    "missing-module": "no_such_module_anywhere:Thing",
}


@pytest.fixture(scope="module")
def world(tmp_path_factory, server):
    """A benchmark of six QMSum-shaped meetings, a package of hostile plugins on PYTHONPATH, and
    the fake server answering as in test_simulators_cli."""
    tmp = tmp_path_factory.mktemp("hostile-plugins")
    for i in range(6):
        write_json(tmp / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp / 'src'}"], tmp / "bench")
    site = tmp / "site"
    site.mkdir()
    (site / "hostile_sims.py").write_text(PLUGINS)
    info = site / "hostile_sims-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-sims\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[cocoeval.simulators]\n"
        + "".join(f"{name} = {cls if ':' in cls else 'hostile_sims:' + cls}\n" for name, cls in ENTRY_POINTS.items())
    )
    return tmp, site


def cocoeval(world, *args: object, code: int) -> subprocess.CompletedProcess:
    tmp, site = world
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-m", "cocoeval", *map(str, args)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == code, f"exit {out.returncode}\n{out.stdout}{out.stderr}"
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    return out


def params(world, name: str, setups: list[dict], *, judge: bool = False, srv=None) -> Path:
    tmp, _ = world
    p = tmp / f"{name}.yaml"
    body: dict = {
        "name": name,
        "out": f"runs/{name}",
        "bench": "bench",
        "instances": {"per_dataset": 2},
        "llm": {"cache": f"{name}.sqlite"},
        "setups": setups,
    }
    if judge:
        body["judges"] = [{"name": "j", "model": f"openai-compatible/fake@{srv.openai_base}"}]
    p.write_text(yaml.safe_dump(body, sort_keys=False))
    return p


def continuations(world, run: str, setup: str) -> list[dict]:
    tmp, _ = world
    return [json.loads(x) for x in (tmp / "runs" / run / "continuations" / f"{setup}.jsonl").read_text().splitlines()]


def test_a_plugin_that_edits_what_it_is_given_changes_neither_the_reference_nor_the_judged_text(world, srv):
    srv.configure(answers=ANSWERS)
    model = f"openai-compatible/fake@{srv.openai_base}"
    p = params(
        world,
        "leak",
        [{"name": "leaky", "simulator": "leaky"}, {"name": "k30", "model": model, "turns_per_call": 30}],
        judge=True,
        srv=srv,
    )
    cocoeval(world, "run", p, "--no-progress", code=0)
    sent = json.dumps(srv.stats()["bodies"])
    assert "EDITED BY THE PLUGIN" not in sent and "CHANGED LATER" not in sent
    tmp, _ = world
    assert "EDITED" not in (tmp / "runs" / "leak" / "instances.jsonl").read_text()
    [c, _] = continuations(world, "leak", "leaky")
    assert c["status"] == "ok" and all(t["text"].startswith("said: Turn number") for t in c["turns"])


@pytest.mark.parametrize(
    ("plugin", "said"),
    [
        ("exits", "raised SystemExit"),
        ("interrupts", "raised KeyboardInterrupt"),
        ("raises-base", "raised BaseException: from deep inside"),
    ],
)
def test_a_plugin_that_exits_or_interrupts_ends_its_continuations_invalid_and_the_run_completes(world, plugin, said):
    p = params(world, f"x-{plugin}", [{"name": "bad", "simulator": plugin}, {"name": "fine", "simulator": "leaky"}])
    out = cocoeval(world, "run", p, "--no-progress", code=3)  # completed, something invalid
    tmp, _ = world
    manifest = json.loads((tmp / "runs" / f"x-{plugin}" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["format"] == 1  # the run directory's format version
    bad = continuations(world, f"x-{plugin}", "bad")
    assert len(bad) == 2 and all(c["status"] == "invalid" and said in c["reason"] for c in bad)
    assert "hostile_sims.py" in bad[0]["reason"]  # where it happened
    assert all(c["status"] == "ok" for c in continuations(world, f"x-{plugin}", "fine"))
    assert said.split(":")[0] in out.stdout + out.stderr


def test_a_plugin_that_blocks_is_stopped_at_its_step_time_limit(world):
    p = params(world, "blocks", [{"name": "slow", "simulator": "blocks", "step_timeout_s": 1}])
    started = time.monotonic()
    cocoeval(world, "run", p, "--no-progress", code=3)
    assert time.monotonic() - started < 60
    bad = continuations(world, "blocks", "slow")
    assert all(c["status"] == "invalid" and "ran for more than 1 s" in c["reason"] for c in bad), bad


@pytest.mark.parametrize(
    ("plugin", "said"),
    [
        ("init-raises", "__init__ raised RuntimeError: no config file here"),
        ("not-async", "next_turns is not a coroutine function"),
        ("dict-options", "Options is a type, not a pydantic model class"),
        ("object-version", "version is a object"),
        ("missing-module", "cannot be loaded: ModuleNotFoundError"),
    ],
)
def test_a_plugin_that_breaks_the_contract_is_refused_naming_it_before_any_call(world, srv, plugin, said):
    model = f"openai-compatible/fake@{srv.openai_base}"
    p = params(
        world,
        f"c-{plugin}",
        [{"name": "bad", "simulator": plugin}, {"name": "k30", "model": model, "turns_per_call": 30}],
    )
    err = cocoeval(world, "run", p, "--no-progress", code=2).stderr
    assert said in err and plugin in err, err
    assert srv.stats()["requests"] == 0
    tmp, _ = world
    assert not (tmp / "runs" / f"c-{plugin}" / "manifest.json").exists()  # never "running"


def test_a_forecast_reply_that_raises_is_an_error_naming_the_plugin(world, srv):
    p = params(
        world,
        "fc",
        [{"name": "f", "simulator": "forecast-raises", "model": f"openai-compatible/fake@{srv.openai_base}"}],
    )
    err = cocoeval(world, "estimate", p, code=2).stderr
    assert "forecast-raises" in err and "forecast_reply raised ValueError: cannot guess" in err


def test_cocoeval_simulators_lists_every_plugin_and_marks_the_broken_ones_with_why(world):
    out = cocoeval(world, "simulators", code=0).stdout
    lines = {line.split()[0]: line for line in out.splitlines() if line and not line[0].isdigit()}
    assert set(ENTRY_POINTS) | {"agents"} <= set(lines)
    for broken in ("not-async", "dict-options", "object-version", "missing-module"):
        assert "CANNOT BE USED" in lines[broken], lines[broken]
    for fine in ("agents", "leaky", "random", "init-raises"):  # __init__ runs only for a setup
        assert "CANNOT BE USED" not in lines[fine] and "version" in lines[fine]
    assert "4 of" in out


def test_a_plugins_notes_are_kept_when_its_continuation_ends_invalid(world):
    p = params(world, "notes", [{"name": "n", "simulator": "notes-then-fails"}])
    cocoeval(world, "run", p, "--no-progress", code=3)
    c = continuations(world, "notes", "n")[0]
    assert c["reason"] == "gave up on purpose"
    assert "turn 1: looked at the history" in c["notes"] and "turn 2: about to give up" in c["notes"]


def test_a_rerun_keeps_what_a_nondeterministic_plugin_finished_and_pays_nothing_again(world, srv):
    srv.configure(answers=[{"match": "", "text": "something"}])
    p = params(
        world, "rand", [{"name": "r", "simulator": "random", "model": f"openai-compatible/fake@{srv.openai_base}"}]
    )
    cocoeval(world, "run", p, "--no-progress", code=0)
    first = srv.stats()["requests"]
    assert first == 2 * 30
    before = continuations(world, "rand", "r")
    cocoeval(world, "run", p, "--no-progress", code=0)
    assert srv.stats()["requests"] == first  # nothing sent again
    assert continuations(world, "rand", "r") == before


def test_a_plugin_setup_with_a_bad_step_time_limit_is_a_params_error(world):
    p = params(world, "limit", [{"name": "l", "simulator": "leaky", "step_timeout_s": 0}])
    err = cocoeval(world, "run", p, "--no-progress", code=2).stderr
    assert "step_timeout_s" in err


def test_an_agent_that_answers_as_someone_else_and_a_moderator_that_writes_the_turn_are_told_apart(world, srv):
    srv.configure(
        answers=[
            {"match": "Who speaks next?", "text": "MARKETING: I would like to add something"},
            {"match": "'s turn", "text": "Marketing: my view"},
        ]
    )
    model = f"openai-compatible/fake@{srv.openai_base}"
    p = params(
        world,
        "agents",
        [
            {"name": "oracle", "simulator": "agents", "model": model},
            {"name": "mod", "simulator": "agents", "model": model, "options": {"policy": "moderator"}},
        ],
    )
    cocoeval(world, "run", p, "--no-progress", code=3)
    oracle = continuations(world, "agents", "oracle")
    assert all(c["status"] == "invalid" and "(last answer: answered as Marketing)" in c["reason"] for c in oracle)
    assert not any("empty answer" in n for c in oracle for n in c["notes"])
    mod = continuations(world, "agents", "mod")  # the moderator named Marketing, in capitals, before its words
    assert all(c["status"] == "ok" and {t["speaker"] for t in c["turns"]} == {"Marketing"} for c in mod), mod[0]


def test_cocoeval_check_names_a_plugin_whose_init_raises(world):
    p = params(world, "chk", [{"name": "bad", "simulator": "init-raises"}])
    err = cocoeval(world, "check", p, code=1).stderr
    assert "setup bad" in err and "__init__ raised RuntimeError: no config file here" in err


def test_a_stopping_rule_that_stops_sooner_keeps_what_a_nondeterministic_plugin_finished(world, srv):
    srv.configure(answers=ANSWERS)
    model = f"openai-compatible/fake@{srv.openai_base}"
    p = params(world, "soon", [{"name": "r", "simulator": "random", "model": model}], judge=True, srv=srv)
    cocoeval(world, "run", p, "--no-progress", code=0)  # no stopping: both instances simulated
    before = {c["instance_id"]: c for c in continuations(world, "soon", "r")}
    assert len(before) == 2
    body = yaml.safe_load(p.read_text())
    body["stopping"] = {"rule": "precise", "eps": 1000.0, "round_conversations": 1, "min_rounds": 1}
    p.write_text(yaml.safe_dump(body, sort_keys=False))
    cocoeval(world, "run", p, "--no-progress", code=0)  # stops after its first conversation
    tmp, _ = world
    kept = continuations(world, "soon", "r")
    assert len(kept) == 1 and kept[0] == before[kept[0]["instance_id"]]
    assert (tmp / "runs" / "soon" / "cache" / "unused-continuations" / "r.jsonl").is_file()
    del body["stopping"]
    p.write_text(yaml.safe_dump(body, sort_keys=False))
    sent = srv.stats()["requests"]
    cocoeval(world, "run", p, "--no-progress", code=0)  # every instance again: the other one is not paid twice
    assert srv.stats()["requests"] == sent
    assert {c["instance_id"]: c for c in continuations(world, "soon", "r")} == before
    assert not (tmp / "runs" / "soon" / "cache" / "unused-continuations" / "r.jsonl").exists()
