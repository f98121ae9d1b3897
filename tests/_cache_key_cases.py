"""A fixed set of simulation and judge requests, and their call-cache keys (for the cache-key
invariance test: keys written by the code before prompt-cache layout and scheduling landed)."""

from __future__ import annotations

from cocoeval.core.schema import Continuation
from cocoeval.core.targets import targets_for
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import JudgeConfig
from cocoeval.judge.engine import JudgeTask
from cocoeval.llm.base import get_provider, request_key
from cocoeval.simulate.engine import SimTask
from cocoeval.simulate.setup import Setup

from .sim_helpers import instance

MODELS = ("openai/gpt-4.1", "anthropic/claude-sonnet-4-20250514", "openai/o4-mini")


PROMPT_OF = {
    "user_sim": "user_simulator",
    "chatbot": "chatbot",
    "overall": "judge_overall",
    "fine_grained": "judge_fine_grained",
}


def prompt_of(case: str) -> str:
    """The prompt file a case's request is rendered from (its ref is stored with the keys: a
    prompt another change edits on purpose, with a version bump, changes its keys)."""
    parts = case.split("|")
    return PROMPT_OF.get(parts[-1] if parts[1] != "judge" else parts[2], parts[1])


def cases() -> dict[str, str]:
    """{case name: call-cache key}: steps 1, 2 and 6 of 1- and 5-turn continuations (vanilla,
    taxonomy, copy_then_continue), a 30-turn call, a human-AI user turn, and both judge kinds on
    a reference and a continuation, each prepared for an OpenAI, an Anthropic and a reasoning model."""
    tax = load_taxonomy()
    inst, chat = instance("d/c/0", n_hist=12, n_ref=10), instance("chat/c/0", n_hist=6, n_ref=4, chat=True)
    out: dict[str, str] = {}
    for model in MODELS:
        prov = get_provider(model)
        ident = prov.cache_identity()

        def key(req, prov=prov, ident=ident):
            return request_key(ident, prov.prepare(req)[0])

        for prompt in ("vanilla", "taxonomy", "copy_then_continue"):
            for k in (1, 5, 30):
                s = Setup(name="s", model=model, prompt=prompt, turns_per_call=k)
                t = SimTask(s, s.setup_id(tax), inst, tax)
                for step in range(3 if k < 30 else 1):
                    t.turns = list(inst.reference[: step * k])
                    out[f"{model}|{prompt}|k{k}|step{step}"] = key(t.next_call().request)
        s = Setup(name="u", model=model, kind="human_ai")
        t = SimTask(s, s.setup_id(tax), chat, tax)
        out[f"{model}|user_sim"] = key(t.next_call().request)
        t.turns = list(chat.reference[:1])
        out[f"{model}|chatbot"] = key(t.next_call().request)
        conts = {"s": [Continuation(instance_id=inst.id, setup_id="x", setup_name="s", turns=inst.reference[::-1])]}
        for target in targets_for([inst], conts):
            for kind in ("overall", "fine_grained"):
                j = JudgeConfig(name="j", model=model)
                out[f"{model}|judge|{kind}|{target.name}"] = key(JudgeTask(j, kind, target, tax).next_call().request)
    return out
