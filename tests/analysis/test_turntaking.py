"""Turn-taking as a measured object (beyond the paper): next-speaker accuracy, speaker agreement,
run lengths and per-speaker fidelity, each against a plain re-computation (loops over the turns,
no code of ``cocoeval.core.speakers`` or ``analysis.turntaking``) on small random runs."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import analyses, turntaking
from cocoeval.analysis.analyses import Params
from cocoeval.analysis.convstats import HISTORY
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.inference import rng_for
from cocoeval.core.schema import Continuation, Turn
from cocoeval.run import Run

from ..sim_helpers import instance
from .test_stats import TAX, fine

PEOPLE = ["Alice", "Bob Smith", "Carol", "Dan"]
WORDS = ["yes", "Alice", "Bob", "Carol", "Danny", "budget", "Alan", "I agree", "Dan"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def _random_instance(k: int, conv: int, rng: random.Random, n_hist: int = 12, n_ref: int = 10):
    inst = instance(f"d/c{conv}/{k}", n_hist=n_hist, n_ref=n_ref)
    m = inst.metadata.model_copy(
        update={
            "participants": [
                p.model_copy(update={"name": n}) for n, p in zip(PEOPLE, itertools.cycle(inst.metadata.participants))
            ]
        }
    )
    turns = [Turn(speaker=rng.choice(PEOPLE[:3] if i % 5 else PEOPLE), text=_text(rng)) for i in range(n_hist + n_ref)]
    return inst.model_copy(update={"metadata": m, "history": turns[:n_hist], "reference": turns[n_hist:]})


def _instances(seed=0, convs=6, per=3):
    rng = random.Random(seed)
    return [_random_instance(k, c, rng) for c in range(convs) for k in range(per)]


# ------------------------------------------------------------------ plain re-implementations


def _plain_named(text, speaker, people):
    words = re.findall(r"\w+", text)
    firsts = Counter(p.split()[0] for p in people)
    hits = set()
    for p in people:
        if p == speaker:
            continue
        pw = p.split()
        whole = any(words[i : i + len(pw)] == pw for i in range(len(words)))
        if whole or (len(pw) > 1 and firsts[pw[0]] == 1 and pw[0] in words):
            hits.add(p)
    return hits.pop() if len(hits) == 1 else None


def _plain_scores(inst):
    """Per position: {rule: probability it names the actual speaker}, by loops."""
    people = [p.name for p in inst.metadata.participants]
    for t in inst.history:
        if t.speaker not in people:
            people.append(t.speaker)
    hist = [t.speaker for t in inst.history]
    out = []
    for t in range(len(inst.reference)):
        so_far = list(inst.history) + list(inst.reference[:t])
        actual = inst.reference[t].speaker
        last = so_far[-1]
        follow = {}
        for a, b in itertools.pairwise(hist):
            if a == last.speaker:
                follow[b] = follow.get(b, 0) + 1
        if not follow:
            for s in hist:
                follow[s] = follow.get(s, 0) + 1
        p_hist = follow.get(actual, 0) / sum(follow.values())
        counts = {}
        for x in so_far:
            counts[x.speaker] = counts.get(x.speaker, 0) + 1
        top = max(counts.values())
        tied = [p for p in people if counts.get(p) == top] or [x.speaker for x in so_far if counts[x.speaker] == top]
        rr = people[(people.index(last.speaker) + 1) % len(people)]
        named = _plain_named(last.text, last.speaker, people)
        out.append(
            {
                "same_as_previous": float(last.speaker == actual),
                "most_frequent": float(tied[0] == actual),
                "history": p_hist,
                "round_robin": float(rr == actual),
                "addressee": float(named == actual) if named else p_hist,
            }
        )
    return out


def _plain_interval(hits_by_conv, resamples, seed, what):
    """The conversation bootstrap by a loop over resamples (the same draws), centred on the
    estimate and widened by √(C/(C − 1))·t_{C−1, 0.975}/z_{0.975}, kept within [0, 1]."""
    from scipy.stats import norm, t

    convs = list(hits_by_conv)
    idx = rng_for(seed, "cluster-bootstrap", *what).integers(0, len(convs), size=(resamples, len(convs)))
    boot = []
    for row in idx:
        right = sum(sum(hits_by_conv[convs[i]]) for i in row)
        n = sum(len(hits_by_conv[convs[i]]) for i in row)
        boot.append(right / n)
    point = sum(sum(v) for v in hits_by_conv.values()) / sum(len(v) for v in hits_by_conv.values())
    c = len(convs)
    widen = (c / (c - 1)) ** 0.5 * t.ppf(0.975, c - 1) / norm.ppf(0.975)
    spread = [point + (b - sum(boot) / len(boot)) * widen for b in boot]
    return max(0.0, np.percentile(spread, 2.5)), min(1.0, np.percentile(spread, 97.5))


def test_teacher_forced_accuracy_agrees_with_plain_loops():
    insts = _instances()
    frame = turntaking.next_speaker_frame(insts)
    acc = turntaking.accuracy(frame, resamples=200, seed=3, min_n=2)
    for p in turntaking.POLICIES:
        by_conv: dict[str, list[float]] = {}
        for inst in insts:
            by_conv.setdefault(inst.id.split("/")[1], []).extend(s[p] for s in _plain_scores(inst))
        all_hits = [x for v in by_conv.values() for x in v]
        row = acc.filter(pl.col("predictor") == p).row(0, named=True)
        assert row["accuracy"] == pytest.approx(sum(all_hits) / len(all_hits)), p
        assert row["n"] == len(all_hits) == 18 * 10 and row["conversations"] == 6 and row["kind"] == "teacher-forced"
        lo, hi = _plain_interval(by_conv, 200, 3, ["next"])
        assert (row["ci_low"], row["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
    named = frame["addressee_named"].mean()
    assert 0 < named < 1  # both branches of the addressee rule are exercised


def test_accuracy_has_no_interval_below_min_n_conversations_and_says_so():
    acc = turntaking.accuracy(turntaking.next_speaker_frame(_instances(convs=3)), resamples=50, min_n=5)
    assert acc["ci_low"].is_null().all() and acc["ci_note"].str.contains("conversations").all()


def _run_with_setups(insts, rng):
    """Setups: 'copy' (the reference itself), 'rand' (random speakers), 'mono' (Alice only)."""
    conts = {
        "copy": [Continuation(instance_id=i.id, setup_id="copy", turns=i.reference) for i in insts],
        "rand": [
            Continuation(
                instance_id=i.id,
                setup_id="rand",
                turns=[Turn(speaker=rng.choice(PEOPLE), text="x") for _ in i.reference],
            )
            for i in insts
        ],
        "mono": [
            Continuation(instance_id=i.id, setup_id="mono", turns=[Turn(speaker="Alice", text="x")] * len(i.reference))
            for i in insts
        ],
    }
    return Run.model_validate(
        {
            "instances": insts,
            "continuations": conts,
            "manifest": {
                "params": {
                    "setups": [
                        {"name": "copy", "continuations": "c.jsonl"},
                        {"name": "rand", "simulator": "agents", "model": "m", "options": {"policy": "self_selection"}},
                        {"name": "mono", "model": "m", "turns_per_call": 30},
                    ]
                }
            },
        }
    )


def test_free_running_speaker_agreement_agrees_with_plain_loops():
    insts = _instances(seed=1)
    run = _run_with_setups(insts, random.Random(5))
    got = turntaking.free_running(
        turntaking.speaker_match_frame(run), turntaking.setup_policies(run), resamples=100, min_n=2
    )
    rows = {r["predictor"]: r for r in got.iter_rows(named=True)}
    assert got["predictor"][0] == HISTORY and rows["copy"]["accuracy"] == 1.0
    for name, cs in run.continuations.items():
        same = [
            a.speaker == b.speaker
            for c, i in zip(cs, insts, strict=True)
            for a, b in zip(c.turns, i.reference, strict=True)
        ]
        assert rows[name]["accuracy"] == pytest.approx(sum(same) / len(same))
    yard = [a.speaker == b.speaker for i in insts for a, b in zip(i.history[-10:], i.reference, strict=True)]
    assert rows[HISTORY]["accuracy"] == pytest.approx(sum(yard) / len(yard)) and rows[HISTORY]["n"] == len(yard)
    assert rows["rand"]["what"] == "agents, policy self_selection" and "not teacher-forced" in rows["rand"]["kind"]


def test_the_yardstick_compares_the_last_r_turns_of_x_with_r():
    rng = random.Random(2)
    insts = [_random_instance(k, k % 4, rng, n_hist=12, n_ref=6) for k in range(8)]
    run = Run.model_validate({"instances": insts, "continuations": {}})
    got = turntaking.free_running(turntaking.speaker_match_frame(run), resamples=50, min_n=2)
    same = [a.speaker == b.speaker for i in insts for a, b in zip(i.history[-6:], i.reference, strict=True)]
    assert got.row(0, named=True)["accuracy"] == pytest.approx(sum(same) / len(same)) and got["n"][0] == 48


def _plain_runs(turns):
    out = []
    for t in turns:
        if out and out[-1][0] == t.speaker:
            out[-1][1] += 1
        else:
            out.append([t.speaker, 1])
    return out


def test_run_lengths_agree_with_plain_loops():
    insts = _instances(seed=4)
    run = _run_with_setups(insts, random.Random(6))
    summary = turntaking.run_lengths(turntaking.run_length_frame(run), resamples=100, min_n=2)
    assert summary["target"][0] == "reference"
    targets = {
        "reference": [i.reference for i in insts],
        **{k: [c.turns for c in v] for k, v in run.continuations.items()},
    }
    for name, convs in targets.items():
        lengths = [n for turns in convs for _, n in _plain_runs(turns)]
        row = summary.filter(pl.col("target") == name).row(0, named=True)
        assert row["runs"] == len(lengths) and row["turns"] == sum(lengths)
        assert row["mean_run"] == pytest.approx(sum(lengths) / len(lengths)) and row["longest"] == max(lengths)
        for k in (1, 2, 3):
            assert row[f"share_{k}"] == pytest.approx(sum(x == k for x in lengths) / len(lengths))
        assert row["share_4plus"] == pytest.approx(sum(x >= 4 for x in lengths) / len(lengths))
    assert summary.filter(pl.col("target") == "mono")["mean_run"].item() == 10.0  # Alice holds all 10 turns
    per = turntaking.run_lengths_per_speaker(turntaking.run_length_frame(run))
    alice = per.filter((pl.col("speaker") == "Alice") & (pl.col("target") == "mono")).row(0, named=True)
    ref_alice = [n for i in insts for s, n in _plain_runs(i.reference) if s == "Alice"]
    assert alice["mean_run"] == 10.0 and alice["reference_mean_run"] == pytest.approx(sum(ref_alice) / len(ref_alice))


# ------------------------------------------------------------------ per-speaker fidelity


def _fidelity_run():
    """Six instances over three conversations, the reference's speakers Carol, Alice, Bob, Carol
    (so Carol speaks turns 0 and 3). The reference: repetition on turn 0; setup 's' (the same
    speakers): repetition on turns 0 and 3 in conversations c0 and c1, on turn 0 in c2; off topic on
    Alice's turn everywhere."""
    insts = [instance(f"d/c{c}/{k}", n_hist=2, n_ref=4) for c in range(3) for k in range(2)]
    js = []
    for i in insts:
        c = i.id.split("/")[1]
        js.append(fine(i.id, "reference", "J", [["repetition"], [], [], []]))
        rep = (
            [["repetition"], ["off_topic"], [], ["repetition"]]
            if c != "c2"
            else [["repetition"], ["off_topic"], [], []]
        )
        js.append(fine(i.id, "s", "J", rep))
    conts = {"s": [Continuation(instance_id=i.id, setup_id="s", turns=i.reference) for i in insts]}
    return Run.model_validate(
        {"instances": insts, "continuations": conts, "judgments": {"J": js}, "manifest": {"params": {"setups": []}}}
    )


def _plain_cross_square(diffs, convs):
    """mean over behaviours of Σ_{i, j in different conversations} D_i D_j / (number of such pairs)."""
    k = len(diffs[0])
    total, pairs = np.zeros(k), 0
    for a in range(len(diffs)):
        for b in range(len(diffs)):
            if convs[a] != convs[b]:
                total += np.array(diffs[a]) * np.array(diffs[b])
                pairs += 1
    return float(np.mean(total / pairs))


def test_per_speaker_fidelity_agrees_with_a_plain_cross_conversation_square():
    run = _fidelity_run()
    f = run_frames(run)
    got = turntaking.speaker_fidelity(run, f, ["J"], resamples=200, seed=0, min_n=2, min_turns=2)
    rows = {r["speaker"]: r for r in got.iter_rows(named=True)}
    ids = list(TAX.ids)
    diffs, convs = [], []
    for i in run.instances:
        d = [0.0] * len(ids)
        if i.id.split("/")[1] != "c2":
            d[ids.index("repetition")] = 1.0 - 0.5  # Carol: 2 of 2 turns in s, 1 of 2 in the reference
        else:
            d[ids.index("repetition")] = 0.5 - 0.5
        diffs.append(d)
        convs.append(i.id.split("/")[1])
    want = max(_plain_cross_square(diffs, convs), 0) ** 0.5
    assert rows["Carol"]["scored"] and rows["Carol"]["distance"] == pytest.approx(want) and want > 0
    assert rows["Carol"]["turns_reference"] == rows["Carol"]["turns_setup"] == 12
    assert rows["Carol"]["conversations"] == 3 and rows["Carol"]["n"] == 6
    alice = [0.0] * len(ids)
    alice[ids.index("off_topic")] = 1.0  # Alice: off topic on her one turn in s, never in the reference
    assert rows["Alice"]["distance"] == pytest.approx(_plain_cross_square([alice] * 6, convs) ** 0.5)
    assert rows["Bob"]["distance"] == 0.0
    strict = turntaking.speaker_fidelity(run, f, ["J"], resamples=50, min_n=2, min_turns=7)
    assert not strict.filter(pl.col("speaker") == "Bob")["scored"].item()  # 6 turns each side
    assert "too few turns" in strict.filter(pl.col("speaker") == "Bob")["reason"].item()
    assert strict.filter(pl.col("speaker") == "Carol")["scored"].item()


def test_a_participant_in_one_conversation_is_listed_not_scored():
    run = _fidelity_run()
    one = Run.model_validate(
        {
            "instances": [i for i in run.instances if "/c0/" in i.id],
            "continuations": {"s": [c for c in run.continuations["s"] if "/c0/" in c.instance_id]},
            "judgments": {"J": [j for j in run.judgments["J"] if "/c0/" in j.instance_id]},
            "manifest": {"params": {"setups": []}},
        }
    )
    got = turntaking.speaker_fidelity(one, run_frames(one), ["J"], resamples=50, min_n=2, min_turns=1)
    assert not got["scored"].any() and got["reason"].str.contains("one source conversation").all()


# ------------------------------------------------------------------ the registered analysis, its charts


def test_the_analysis_has_its_tables_and_charts_marked_beyond_the_paper():
    insts = _instances(seed=7)
    run = _run_with_setups(insts, random.Random(8))
    ans = analyses.compute("turn_taking_measured", run, Params(resamples=50, min_n=2))
    assert ans is not None and not ans.judge_based and "beyond the paper" in ans.question
    assert {"next_speaker", "run_lengths", "run_lengths_per_speaker", "speaker_fidelity", "self_selection"} <= set(
        ans.tables
    )
    assert ans.text[0].startswith("Beyond the paper")
    ns = ans.charts["next_speaker"].to_dict()
    assert "beyond the paper" in ns["title"] and len(ns["layer"]) == 3
    assert {v["predictor"] for v in ns["data"]["values"]} >= set(turntaking.POLICIES) | {"copy", "rand", "mono"}
    rl = ans.charts["run_lengths"].to_dict()
    assert "beyond the paper" in rl["title"] and rl["mark"]["type"] == "bar"
    spec = analyses.get("turn_taking_measured").report
    assert spec is not None and spec.section == "judge-free"
    assert all(o.what.startswith("Beyond the paper") for o in [*spec.tables.values(), *spec.figures.values()])


def test_self_selection_counts_read_the_notes_the_simulator_writes(tmp_path):
    import json

    from cocoeval.llm import LLMConfig, Runner
    from cocoeval.simulate.engine import simulate
    from cocoeval.simulate.setup import PluginSetup

    answers = [
        {"match": "PASS", "context": "You are Alice", "text": "PASS - or not", "times": 1},  # malformed, asked again
        {"match": "PASS", "context": "You are Alice", "text": "PASS"},
        {"match": "PASS", "context": "You are Bob", "text": "PASS", "times": 3},  # then Bob speaks
        {"match": "PASS", "context": "You are Bob", "text": "my turn"},
        {"match": "PASS", "context": "You are Carol", "text": "PASS"},
        {"match": "It is", "text": "a fallback turn"},
    ]
    (tmp_path / "a.json").write_text(json.dumps({"answers": answers}))
    opts = {"policy": "self_selection"}
    setup = PluginSetup(name="ss", simulator="agents", model=f"mock/{tmp_path / 'a.json'}", options=opts)
    inst = instance(n_ref=5)
    [c] = simulate([inst], [setup], Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)))["ss"]
    assert c.status == "ok", c.reason
    run = Run.model_validate(
        {
            "instances": [inst],
            "continuations": {"ss": [c]},
            "manifest": {"params": {"setups": [{"name": "ss", "simulator": "agents", "model": "m", "options": opts}]}},
        }
    )
    [row] = turntaking.self_selection_counts(run).iter_rows(named=True)
    # by hand from the calls: every call answered PASS is a pass; a turn by Bob's "my turn" is chosen,
    # a turn where all three passed is not
    turns_by_bob = sum(t.text == "my turn" for t in c.turns)
    fallback = sum(t.text == "a fallback turn" for t in c.turns)
    assert turns_by_bob + fallback == 5 and fallback >= 1 and turns_by_bob >= 1
    assert row["malformed"] == 1 and row["turns_chosen"] == turns_by_bob and row["all_passed"] == fallback
    n_calls = len(c.calls)
    # every self-selection call is a pass, the malformed answer, or Bob's turn; the fallback turns' agent calls aside
    assert row["passes"] == n_calls - row["malformed"] - turns_by_bob - fallback


def test_speaker_rates_agree_with_a_plain_count_of_each_speakers_labelled_turns():
    """Per judge, target and instance judged validly: each speaker (in the order they first speak)
    with its judged turns and, per behaviour, the share of them the judge labelled, counted turn
    by turn from the judgments themselves; invalid judgments and other judges left out."""
    from cocoeval.analysis.convstats import speaker_frame

    rng = random.Random(4)
    insts = [_random_instance(k, c, rng, n_ref=8) for c in range(4) for k in range(2)]
    ids = list(TAX.ids)
    conts, js = {}, {"J": [], "K": []}
    for name in ("s", "t"):
        conts[name] = [
            Continuation(
                instance_id=i.id,
                setup_id=name,
                turns=[Turn(speaker=rng.choice(PEOPLE[:3]), text=_text(rng)) for _ in i.reference],
            )
            for i in insts
        ]
    for judge in js:
        for i in insts:
            for target in ("reference", "s", "t"):
                per_turn = [rng.sample(ids, rng.choice([0, 0, 1, 2])) for _ in i.reference]
                status = "invalid" if rng.random() < 0.2 else "ok"
                js[judge].append(fine(i.id, target, judge, per_turn, status=status))
    run = Run.model_validate(
        {"instances": insts, "continuations": conts, "judgments": js, "manifest": {"params": {"setups": []}}}
    )
    f = run_frames(run)
    frame = speaker_frame(run).filter(pl.col("judged"))
    for judge in js:
        want: dict[tuple[str, str], list[tuple]] = {}
        for j in js[judge]:
            if j.status == "invalid":
                continue
            marks = {(lb.turn, b) for lb in j.labels for b in lb.behaviours}
            rows = frame.filter((pl.col("target") == j.target) & (pl.col("instance_id") == j.instance_id))
            per: dict[str, list[int]] = {}
            for pos, speaker in rows.select("position", "speaker").iter_rows():
                per.setdefault(speaker, []).append(pos)
            conv = rows["conversation"][0]
            want[(j.target, j.instance_id)] = [
                (j.instance_id, conv, s, len(p), tuple(sum((i, b) in marks for i in p) / len(p) for b in ids))
                for s, p in per.items()
            ]
        got = turntaking.speaker_rates(run, f, judge)
        assert sorted(got) == sorted(want) and len(got) < 3 * len(insts)  # some invalid judgments left out
        for key, speakers in got.items():
            assert [(s.instance_id, s.conversation, s.speaker, s.turns, s.rates) for s in speakers] == want[key]
        assert any(r for v in got.values() for s in v for r in s.rates)
