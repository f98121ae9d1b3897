"""One renderer of prompts (``cocoeval/prompts/render.py``) and the stages' public call planning: what
``plan_continuations`` / ``plan_judgments`` plan (the forecast's requests) is what ``simulate`` /
``judge`` send; simulation and judging never import each other (DESIGN.md)."""

from __future__ import annotations

import ast

from cocoeval.core.schema import Continuation
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import JudgeConfig
from cocoeval.judge.engine import judge, plan_judgments, send_order
from cocoeval.llm import LLMConfig, Runner
from cocoeval.llm.base import get_provider, request_key
from cocoeval.simulate.engine import plan_continuations, simulate
from cocoeval.simulate.setup import Setup

from ..conftest import ROOT
from ..sim_helpers import instance, lines
from ..test_architecture import imported_modules as _imports

TAX = load_taxonomy()


def _key(model: str, request) -> str:
    prov = get_provider(model)
    return request_key(prov.cache_identity(), prov.prepare(request)[0])


def test_planned_simulation_calls_are_the_calls_simulate_sends(srv, tmp_path):
    srv.configure(answers=[{"match": f"next {n} turn", "text": lines(n)} for n in (30, 5)])
    model = f"openai/gpt-4.1@{srv.openai_base}"
    insts = [instance(f"d/c{i}/0") for i in range(2)] + [instance("chat/c/0", n_hist=4, n_ref=4, chat=True)]
    setups = [
        Setup(name="k30", model=model),
        Setup(name="k5", model=model, turns_per_call=5, prompt="taxonomy"),
        Setup(name="u", model=model, kind="human_ai", max_per_dataset=1),
    ]
    plan = plan_continuations(insts, setups, TAX)
    assert {n: [t.inst.id for t in ts] for n, ts in plan.items()} == {
        "k30": ["d/c0/0", "d/c1/0"],
        "k5": ["d/c0/0", "d/c1/0"],
        "u": ["chat/c/0"],
    }
    first = {(n, t.inst.id): _key(model, t.next_call().request) for n, ts in plan.items() for t in ts}
    res = simulate(insts, setups, Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)), taxonomy=TAX)
    sent = {(n, c.instance_id): c.calls[0].request_hash for n, cs in res.items() for c in cs}
    assert sent == first
    assert all(c.setup_id == t.setup_id for n, ts in plan.items() for t, c in zip(ts, res[n], strict=True))


def test_planned_judge_calls_are_the_calls_judge_sends(srv, tmp_path):
    srv.configure(
        answers=[
            {
                "match": "Continuation to evaluate",
                "text": '{"consistency": 7, "collaborativeness": 6, "rationale": "ok"}',
            }
        ]
    )
    insts = [instance(f"{ds}/c/0", n_hist=4, n_ref=3) for ds in ("a", "b")]
    for i in insts:
        i.dataset = i.id.split("/")[0]
    conts = {"s": [Continuation(instance_id=insts[0].id, setup_id="x", setup_name="s", turns=insts[0].reference[::-1])]}
    model = f"openai/gpt-4.1@{srv.openai_base}"
    judges = [
        JudgeConfig(name="j", model=model, kind=["overall"]),
        JudgeConfig(name="k", model=model, kind=["overall"], datasets=["b"]),
    ]
    plan = plan_judgments(insts, conts, judges, TAX)
    assert {n: [(t.target.instance.id, t.target.name) for t in ts] for n, ts in plan.items()} == {
        "j": [("a/c/0", "reference"), ("b/c/0", "reference"), ("a/c/0", "s")],
        "k": [("b/c/0", "reference")],
    }
    # the two targets of a/c/0 share a prompt prefix (cache hints); b's single target has none
    assert [bool(t.cache_points) for t in plan["j"]] == [True, False, True]
    order = send_order([t for ts in plan.values() for t in ts], judges)
    assert [(t.judge.name, t.target.instance.id) for t in order] == [
        ("j", "a/c/0"),
        ("j", "a/c/0"),
        ("j", "b/c/0"),
        ("k", "b/c/0"),
    ]
    planned = {
        (n, t.target.instance.id, t.target.name): _key(model, t.next_call().request)
        for n, ts in plan.items()
        for t in ts
    }
    res = judge(insts, conts, judges, Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)), taxonomy=TAX)
    sent = {(n, j.instance_id, j.target_name): j.calls[0].request_hash for n, js in res.items() for j in js}
    assert sent == planned and all(j.status == "ok" for js in res.values() for j in js)


def _rendering_names() -> set[str]:
    tree = ast.parse((ROOT / "cocoeval" / "prompts" / "render.py").read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return names


def _from_imports(path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every ``from module import name`` (relative modules resolved)."""
    mods: dict[int, str] = {}
    for line, mod in _imports(path):  # a ``from`` statement's module comes first on its line
        mods.setdefault(line, mod)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            out += [(node.lineno, mods[node.lineno], a.name) for a in node.names]
    return out


def test_prompts_are_rendered_in_one_module_and_stages_do_not_import_each_other():
    names = _rendering_names()
    assert {"step_messages", "judge_messages", "format_turns", "behaviours_block", "chatbot_messages"} <= names
    render = ROOT / "cocoeval" / "prompts" / "render.py"
    files = [
        p
        for d in ("cocoeval", "tests", "benchmarks", "notebooks")
        for p in sorted((ROOT / d).rglob("*.py"))
        if p != render
    ]
    bad = [
        f"{p.relative_to(ROOT)}:{line}: {name} from {mod}"
        for p in files
        for line, mod, name in _from_imports(p)
        if name in names and mod.startswith("cocoeval.") and mod != "cocoeval.prompts.render"
    ]
    assert bad == []
    users = {p.relative_to(ROOT).as_posix() for p in files for _, m in _imports(p) if m == "cocoeval.prompts.render"}
    assert {
        "cocoeval/simulate/engine.py",
        "cocoeval/judge/engine.py",
        "cocoeval/simulate/sft.py",
        "cocoeval/bench/llm_context.py",
        "cocoeval/bench/clean.py",
    } <= users
    for stage, other in (("simulate", "cocoeval.judge"), ("judge", "cocoeval.simulate")):
        for p in sorted((ROOT / "cocoeval" / stage).rglob("*.py")):
            assert [m for _, m in _imports(p) if m == other or m.startswith(other + ".")] == [], p
