"""Prompt caching: prefix-stable layout, cache-key invariance, send order, Anthropic breakpoints,
the fake server's billing and the forecast's arithmetic."""

from __future__ import annotations

import itertools
import json

from cocoeval.core.schema import Continuation, Turn
from cocoeval.core.targets import targets_for
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import JudgeConfig
from cocoeval.judge.engine import JudgeTask, send_order
from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
from cocoeval.llm.base import Usage, get_provider
from cocoeval.llm.promptcache import AnthropicBreakpointCache, OpenAIPrefixCache, openai_cached
from cocoeval.llm.usage import PriceTable
from cocoeval.prompts.files import load_prompt
from cocoeval.simulate.engine import SimTask
from cocoeval.simulate.setup import Setup

from .._cache_key_cases import cases, prompt_of
from ..conftest import ROOT
from ..sim_helpers import instance

LONG = "word " * 1200  # ~1,500 tokens: above both providers' minimum cacheable length


def long_instance(iid: str = "d/c/0", n_ref: int = 10):
    inst = instance(iid, n_hist=30, n_ref=n_ref)
    hist = [Turn(speaker=t.speaker, text=t.text + " " + "budget and design " * 20) for t in inst.history]
    return inst.model_copy(update={"history": hist})


def test_cache_keys_of_existing_requests_are_unchanged():
    golden = json.loads((ROOT / "tests" / "data" / "cache_keys_before_prompt_cache.json").read_text())
    now = cases()
    # a prompt another change edited on purpose (a new version) has new keys; every other is checked
    same = {p for p, ref in golden["prompt_refs"].items() if load_prompt(p).ref == ref}
    checked = [c for c in golden["keys"] if prompt_of(c) in same]
    assert {"vanilla", "taxonomy", "judge_fine_grained"} <= same and len(checked) >= 40
    assert {c: now[c] for c in checked} == {c: golden["keys"][c] for c in checked}


def test_the_calls_of_a_continuation_share_a_byte_identical_growing_prefix():
    tax = load_taxonomy()
    inst = long_instance()
    for prompt, k in (("vanilla", 1), ("taxonomy", 5), ("copy_then_continue", 1)):
        s = Setup(name="s", model="anthropic/claude-sonnet-4", prompt=prompt, turns_per_call=k)
        t = SimTask(s, "id", inst, tax)
        reqs = []
        while len(t.turns) < len(inst.reference):
            reqs.append(t.next_call().request)
            t.turns = list(inst.reference[: len(t.turns) + k])
        assert len({r.messages[0].content for r in reqs}) == 1 and len({r.cache_group for r in reqs}) == 1
        for a, b in itertools.pairwise(reqs):
            i, end = a.cache_points[-1]  # where this call's "so far" turns end: a prefix of the next call
            assert b.messages[i].content[:end] == a.messages[i].content[:end]
            assert (i, end) in b.cache_points  # and the next call reads it there
        assert reqs[-1].cache_points[-1] == reqs[-2].cache_points[-1]  # the last call writes nothing new
    one = Setup(name="s30", model="openai/gpt-4.1", turns_per_call=30)
    req = SimTask(one, "id", instance(), tax).next_call().request
    assert req.cache_points == [] and req.cache_group is None  # one call: nothing shared, no write surcharge


def test_the_judge_targets_of_an_instance_share_everything_before_the_target():
    tax = load_taxonomy()
    inst = long_instance()
    conts = {
        f"s{n}": [Continuation(instance_id=inst.id, setup_id=f"x{n}", turns=inst.reference[n:] + inst.reference[:n])]
        for n in range(1, 4)
    }
    targets = targets_for([inst], conts)
    for kind in ("overall", "fine_grained"):
        reqs = [
            JudgeTask(JudgeConfig(name="j", model="openai/o4-mini"), kind, t, tax).next_call().request for t in targets
        ]
        (_, sys_end), (_, at) = reqs[0].cache_points
        assert len({(r.messages[0].content, r.messages[1].content[:at], r.cache_group) for r in reqs}) == 1
        assert len({r.messages[1].content[at:] for r in reqs}) == len(reqs)  # the targets differ after it
        assert sys_end == len(reqs[0].messages[0].content)
    alone = JudgeTask(JudgeConfig(name="j", model="m/x"), "overall", targets[0], tax, shared=False)
    assert alone.cache_points == [] and alone.cache_group is None


def test_judge_calls_are_sent_instance_by_instance():
    tax = load_taxonomy()
    insts = [instance(f"d/c{i}/0", n_ref=4) for i in range(3)]
    conts = {s: [Continuation(instance_id=i.id, setup_id=s, turns=i.reference) for i in insts] for s in ("a", "b")}
    judges = [JudgeConfig(name="j1", model="openai/o4-mini"), JudgeConfig(name="j2", model="openai/gpt-4.1")]
    tasks = [JudgeTask(j, k, t, tax) for j in judges for t in targets_for(insts, conts) for k in j.kind]
    order = [(t.target.instance.id, t.judge.name, t.kind, t.target.name) for t in send_order(tasks, judges)]
    groups = [o[:3] for o in order]
    assert len(order) == len(tasks) == 36
    assert groups == sorted(groups, key=lambda g: (g[0], g[1], g[2] == "fine_grained"))  # contiguous
    assert [o[3] for o in order[:3]] == ["reference", "a", "b"]  # the reference first within a group


def test_the_first_call_of_a_group_goes_alone_so_the_others_read_the_cache(srv, tmp_path):
    srv.configure(latency_s=0.2)
    model = f"openai/gpt-4.1@{srv.openai_base}"

    def calls(group):
        return [
            Call(
                model=model,
                stage="judge",
                tag=str(n),
                request=GenerateRequest(
                    messages=[
                        Message(role="system", content=LONG),
                        Message(role="user", content=f"target {n} {group}"),
                    ],
                    cache_group=group,
                ),
            )
            for n in range(4)
        ]

    for group, expect in ((None, 0), ("g1", 3)):
        runner = Runner(LLMConfig(cache=str(tmp_path / f"{group}.sqlite"), progress=False, concurrency=8))
        res = runner.run(calls(group))
        runner.close()
        hits = sum(r.response.usage.cached_input_tokens > 0 for r in res)
        assert hits == expect, (group, [r.response.usage for r in res])
    assert srv.stats()["bodies_last"]["prompt_cache_key"] == "g1"


def test_anthropic_breakpoints_respect_the_minimum_and_the_limit():
    prov = get_provider("anthropic/claude-sonnet-4")
    short, text = "x" * 400, "word " * 4000 + "tail"
    cuts = [2000, 5000, 8000, 11000, 14000, 20000]  # the first under the minimum (~600 tokens)
    req = GenerateRequest(
        messages=[Message(role="system", content=short), Message(role="user", content=text)],
        cache_points=[(0, len(short)), *((1, c) for c in cuts)],
    )
    kw = prov.kwargs(req)
    assert "cache_control" not in kw["system"][0]  # ~100 tokens: under the minimum, no surcharge for nothing
    blocks = kw["messages"][0]["content"]
    assert "".join(b["text"] for b in blocks) == text  # the same text, cut into blocks
    ends = list(itertools.accumulate(len(b["text"]) for b in blocks))
    assert [e for e, b in zip(ends, blocks, strict=True) if "cache_control" in b] == cuts[2:]  # the 4 longest
    assert blocks[-1]["text"] == "tail" and "cache_control" not in blocks[-1]
    haiku = get_provider("anthropic/claude-3-5-haiku").breakpoints(req)
    assert all(off >= 2048 * 4 - 200 for _, off in haiku)  # its minimum is 2,048 tokens


def test_the_fake_server_bills_caching_the_providers_way(srv):
    import anthropic
    import openai

    oai = openai.OpenAI(base_url=srv.openai_base, api_key="k")
    msgs = [{"role": "system", "content": LONG}, {"role": "user", "content": "one"}]
    first = oai.chat.completions.create(model="gpt-4.1", messages=msgs)
    second = oai.chat.completions.create(model="gpt-4.1", messages=[msgs[0], {"role": "user", "content": "two"}])
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert second.usage.prompt_tokens_details.cached_tokens == 1408  # 1,500 shared tokens in 128-token steps
    ant = anthropic.Anthropic(base_url=srv.anthropic_base, api_key="k")
    system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    a = ant.messages.create(
        model="claude-sonnet-4", max_tokens=10, system=system, messages=[{"role": "user", "content": "one"}]
    )
    b = ant.messages.create(
        model="claude-sonnet-4", max_tokens=10, system=system, messages=[{"role": "user", "content": "two"}]
    )
    assert (a.usage.cache_creation_input_tokens, a.usage.cache_read_input_tokens) == (1500, 0)
    assert (b.usage.cache_creation_input_tokens, b.usage.cache_read_input_tokens) == (0, 1500)
    assert b.usage.input_tokens == 1  # "two": the rest
    five = [{"type": "text", "text": LONG[:n], "cache_control": {"type": "ephemeral"}} for n in (5, 6, 7, 8, 9)]
    try:
        ant.messages.create(
            model="claude-sonnet-4", max_tokens=10, system=five, messages=[{"role": "user", "content": "x"}]
        )
        raise AssertionError("5 breakpoints were accepted")
    except anthropic.BadRequestError as e:
        assert "maximum of 4" in str(e)


def test_billing_rules_and_forecast_arithmetic_by_hand():
    assert (openai_cached(1023), openai_cached(1024), openai_cached(1300)) == (0, 1024, 1280)
    oc = OpenAIPrefixCache(clock=lambda: 0.0)
    body = {"model": "m", "messages": [{"role": "system", "content": "a" * 6000}, {"role": "user", "content": "q1"}]}
    assert oc.bill(body) == 0
    body2 = {**body, "messages": [body["messages"][0], {"role": "user", "content": "q2"}]}
    assert oc.bill(body2) == 1408  # 6,000 shared characters / 4 = 1,500 tokens -> 1,408
    assert oc.bill({**body2, "prompt_cache_key": "other"}) == 0  # another route, another cache
    ac = AnthropicBreakpointCache(clock=lambda: 0.0)
    sys_ = [{"type": "text", "text": "b" * 8000, "cache_control": {"type": "ephemeral"}}]
    assert ac.bill({"model": "claude-sonnet-4", "system": sys_, "messages": []}) == (0, 2000)
    assert ac.bill({"model": "claude-sonnet-4", "system": sys_, "messages": [{"role": "user", "content": "z"}]}) == (
        2000,
        0,
    )
    assert ac.bill({"model": "claude-3-5-haiku", "system": sys_, "messages": []}) == (0, 0)  # under 2,048
    # the bill: 1M input of which 600k read from the cache and 200k written, 100k output, at Sonnet 4's prices
    prices = PriceTable.load()
    u = Usage(input_tokens=1_000_000, cached_input_tokens=600_000, cache_write_tokens=200_000, output_tokens=100_000)
    # 200k fresh x $3 + 600k x $0.30 + 200k x $3.75 + 100k x $15, per million
    assert abs(prices.cost("anthropic/claude-sonnet-4", u) - (0.6 + 0.18 + 0.75 + 1.5)) < 1e-9
    assert abs(prices.cost("openai/gpt-4.1", u) - (0.4 + 0.3 + 0.4 + 0.8)) < 1e-9  # no write surcharge
