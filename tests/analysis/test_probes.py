"""The probe tables' pieces (beyond the paper): model families, Cohen's κ, the self-preference gap
computed by hand on a synthetic run, and the probes' constructions (names replaced everywhere,
one planted behaviour per copy)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from cocoeval.analysis.probes import (
    cohen_kappa,
    model_family,
    probe_tables,
    probe_text,
    self_preference,
)
from cocoeval.core.schema import Continuation, Judgment, TurnLabel
from cocoeval.core.targets import targets_for
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.probes import (
    PLANTED,
    anonymise,
    expected_behaviour,
    letters,
    plant,
    templates_version,
)
from cocoeval.run import Run
from cocoeval.run.rundir import Manifest
from tests.sim_helpers import instance

TAX = load_taxonomy()


@pytest.mark.parametrize("spec, fam", [
    ("openai/gpt-4.1-2025-04-14", "openai"), ("azure/o4-mini", "openai"), ("openai/ft:gpt-4.1:org:x:1", "openai"),
    ("anthropic/claude-opus-4-20250514", "anthropic"), ("local/smollm2", "smollm"),
    ("openai-compatible/meta-llama/Llama-3.1-8B@http://h:8000/v1", "llama"), ("openai-compatible/Qwen2.5-7B@http://h/v1", "qwen"),
    ("openai-compatible/fake@http://127.0.0.1:1/v1", None), (None, None),
])
def test_model_family(spec, fam):
    assert model_family(spec) == fam


def test_kappa_equals_sklearn():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a, b = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
        assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))
    assert np.isnan(cohen_kappa(np.ones(5), np.ones(5)))


def _judgment(iid, target, kind, c=None, k=None, reps=0):
    labels = [TurnLabel(turn=t, behaviours=["repetition"] if t < reps else []) for t in range(4)]
    return Judgment(instance_id=iid, target=target, target_name=target, judge_id="jid", judge_name="j", kind=kind,
                    taxonomy_hash=TAX.hash, consistency=c, collaborativeness=k,
                    labels=labels if kind == "fine_grained" else [], judged_turns=list(range(4)))


def _run(setups: dict[str, str], n: int = 12) -> Run:
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=4) for i in range(n)]
    value = {"reference": (5, 5, 2), "gpt": (7, 6, 0), "claude": (5, 5, 2), "llama": (6, 5, 3)}
    js, conts = [], {}
    for s in setups:
        conts[s] = [Continuation(instance_id=i.id, setup_id=s, setup_name=s, turns=i.reference) for i in insts]
    for i in insts:
        for t in ["reference", *setups]:
            c, k, r = value[t]
            c += (int(i.id.split("/")[1][1:]) % 2) if t == "gpt" else 0  # gpt's own gap varies by instance: an interval
            js += [_judgment(i.id, t, "overall", c, k), _judgment(i.id, t, "fine_grained", reps=r)]
    params = {"judges": [{"name": "j", "model": "openai/gpt-4.1"}],
              "setups": [{"name": s, "model": m} for s, m in setups.items()]}
    return Run(manifest=Manifest(params=params), instances=insts, continuations=conts, judgments={"j": js})


def test_self_preference_gap_by_hand():
    run = _run({"gpt": "openai/gpt-4o", "claude": "anthropic/claude-3", "llama": "openai-compatible/llama-3@http://h/v1"})
    t = self_preference(run, "j", resamples=300)
    row = {r["measure"]: r for r in t.iter_rows(named=True)}
    # the judge's family (openai): gpt; the others: claude (diff 0) and llama (diff +1 Likert, +1 repetition)
    assert row["any"]["same"] == -2 and row["any"]["other"] == 0.5 and row["any"]["gap"] == -2.5
    assert row["repetition"]["gap"] == -2.5 and row["collaborativeness"]["gap"] == 1.0 - 0.0
    gpt_c = np.mean([7 + int(i.id.split("/")[1][1:]) % 2 - 5 for i in run.instances])
    assert row["consistency"]["gap"] == pytest.approx(gpt_c - 0.5)
    assert row["consistency"]["n"] == 12 and row["consistency"]["ci_low"] is not None
    assert row["any"]["ci_low"] is None  # every instance the same gap: no zero-width interval
    assert row["any"]["same_setups"] == "gpt" and row["any"]["other_setups"] == "claude, llama"
    text = probe_text(probe_tables(run, "j", resamples=100))
    assert text[0] == "Judge probes (beyond the paper):"
    assert text[1] == "names, planted behaviours, stability: not run: cocoeval probe PARAMS"
    assert any(line.startswith("self-preference (openai: gpt vs claude, llama), consistency") for line in text)


def test_self_preference_counts_what_the_statistics_count():
    """A judgment the statistics do not count (skipped: no turn to judge; invalid) is in no pair:
    never a zero. The table is made from the frames, as every other statistic."""
    from cocoeval.core.targets import NO_TURNS

    run = _run({"gpt": "openai/gpt-4o", "claude": "anthropic/claude-3"})
    full = {r["measure"]: r for r in self_preference(run, "j", resamples=100).iter_rows(named=True)}
    first = run.instances[0].id
    run.judgments["j"] = [j.model_copy(update={"labels": [], "judged_turns": [], "reason": NO_TURNS})
                          if (j.instance_id, j.target, j.kind) == (first, "gpt", "fine_grained") else
                          j.model_copy(update={"status": "invalid", "reason": "bad"})
                          if (j.instance_id, j.target, j.kind) == (first, "claude", "overall") else j
                          for j in run.judgments["j"]]
    row = {r["measure"]: r for r in self_preference(run, "j", resamples=100).iter_rows(named=True)}
    assert full["any"]["n"] == 12 and row["any"]["n"] == 11 and row["any"]["same"] == -2  # not -2 with a 0 in it
    assert row["consistency"]["n"] == 11 and row["collaborativeness"]["n"] == 11


def test_no_self_preference_without_both_families():
    run = _run({"claude": "anthropic/claude-3", "llama": "openai-compatible/llama-3@http://h/v1"})
    assert self_preference(run, "j").is_empty()
    assert any("self-preference: not computed" in line for line in probe_text(probe_tables(run, "j")))


def test_names_are_replaced_in_m_s_x_and_the_turns():
    inst = instance("d/c0/0", n_hist=3, n_ref=3)
    inst = inst.model_copy(update={"summary": inst.summary.model_copy(update={"text": "Alice asked Bob; Alicette left."}),
                                   "metadata": inst.metadata.model_copy(update={"goals": ["Carol's budget"]})})
    ref = inst.reference
    ref[0] = ref[0].model_copy(update={"text": "Thanks Bob, and Carol too."})
    [t] = targets_for([inst], {})
    new, mapping = anonymise(t)
    assert mapping == {"Alice": "A", "Bob": "B", "Carol": "C"}
    assert new.instance.summary.text == "A asked B; Alicette left."  # whole names only
    assert new.instance.metadata.goals == ["C's budget"]
    assert [p.name for p in new.instance.metadata.participants] == ["A", "B", "C"]
    assert [x.speaker for x in new.instance.history] == ["A", "B", "C"]
    assert new.turns[0].text == "Thanks B, and C too." and new.turns[0].speaker == "A"
    assert t.instance.summary.text.startswith("Alice")  # the source is untouched
    assert [letters(i) for i in (0, 25, 26, 27)] == ["A", "Z", "AA", "AB"]
    chat = targets_for([instance("c/c0/0", chat=True)], {})[0]
    assert anonymise(chat)[1] == {}


def test_one_planted_behaviour_per_copy():
    [t] = targets_for([instance("d/c0/0", n_hist=3, n_ref=6)], {})
    assert templates_version() == "cocoeval-probe-templates@1"
    for b in PLANTED:
        p = plant(t, b, random.Random(0))
        assert p is not None and p.expects == expected_behaviour(b) and TAX.get(p.expects) is not None
        changed = [i for i, (x, y) in enumerate(zip(t.turns, p.target.turns, strict=True)) if x.text != y.text]
        assert changed == [p.turn] and p.target.turns[p.turn].speaker == t.turns[p.turn].speaker
        assert "{" not in p.changed["after"]
    own = plant(t, "contradiction", random.Random(0))
    assert own is not None
    earlier = [x.text for x in [*t.instance.history, *t.turns[: own.turn]] if x.speaker == t.turns[own.turn].speaker]
    assert earlier[-1] in own.changed["after"]
    # a contradiction needs the speaker's own earlier turn
    [first] = targets_for([instance("d/c1/0", n_hist=1, n_ref=1)], {})
    assert plant(first, "contradiction", random.Random(0)) is None
