"""``cocoeval probe`` against the fake server (beyond the paper): a judge whose labels depend on the
speakers' names is caught by the names probe, a planted-behaviour detection rate equals the rate
scripted into the fake judge, stability κ equals an independent computation, the forecast counts
the probe calls, and a probe run killed mid-way and run again sends no completed call twice."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import pytest
import yaml
from sklearn.metrics import cohen_kappa_score

from cocoeval.analysis.probes import probe_tables, probe_text
from cocoeval.core.jsonio import write_jsonl
from cocoeval.core.targets import targets_for
from cocoeval.run import Run, load_params
from cocoeval.run.estimate import forecast
from cocoeval.run.probes import plan_probes, read_probes, run_probes
from tests.conftest import cached_keys as _keys
from tests.fakes.server import FakeServer
from tests.sim_helpers import instance

N_INST = 10
N_REF = 4
FINE_MARK = "Continuation to annotate"
OVERALL = json.dumps({"consistency": 7, "collaborativeness": 6, "rationale": "fine"})
NAME = {
    "repetition": "Repetition",
    "off_topic": "Off topic",
    "persona_flip": "Persona inconsistency",
    "contradiction": "Logical contradiction",
}


def fine(labels: dict[int, list[str]] | None = None, n: int = N_REF) -> str:
    """A fine-grained answer: ``labels`` {1-based turn: behaviour names}."""
    labels = labels or {}
    return json.dumps(
        {
            "turns": [
                {"turn": t, "behaviours": [{"behaviour": b, "evidence": "x"} for b in labels.get(t, [])]}
                for t in range(1, n + 1)
            ]
        }
    )


def _params(tmp_path, url: str, probes: dict, kind=("fine_grained",), name: str = "exp", latency_note: str = ""):
    bench = tmp_path / "bench" / "eval.jsonl"
    if not bench.exists():
        write_jsonl(bench, [instance(f"d/c{k}/0", n_hist=3, n_ref=N_REF) for k in range(N_INST)])
    model = f"openai-compatible/fake@{url}"
    p = tmp_path / f"{name}.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "out": f"runs/{name}",
                "bench": "bench",
                "judges": [{"name": "j", "model": model, "kind": list(kind), "max_attempts": 1}],
                "probes": probes,
                "llm": {"cache": f"cache-{name}.sqlite", "concurrency": 2},
            }
        )
    )
    return p


def test_a_judge_whose_labels_depend_on_names_is_caught(srv, tmp_path):
    # the fake judge labels every turn Repetition when it sees the name "Alice", nothing otherwise
    srv.configure(
        answers=[
            {"match": FINE_MARK, "context": "Alice:", "text": fine({t: ["Repetition"] for t in range(1, 5)})},
            {"match": FINE_MARK, "text": fine()},
            {"match": "Continuation to evaluate", "context": "Alice:", "text": OVERALL},
            {
                "match": "Continuation to evaluate",
                "text": json.dumps({"consistency": 3, "collaborativeness": 6, "rationale": "x"}),
            },
        ]
    )
    p = _params(tmp_path, srv.openai_base, {"kinds": ["names"], "targets": N_INST}, kind=("overall", "fine_grained"))
    exp = load_params(p)
    exp.run(("judge",), progress=False)
    before = srv.stats()["requests"]
    done = run_probes(exp, progress=False)
    assert done == {"j": {"names": 2 * N_INST}}
    assert srv.stats()["requests"] - before == 2 * N_INST
    recs = read_probes(exp.run_dir, "j")
    assert {r.probe for r in recs} == {"names"} and len(recs) == 2 * N_INST
    assert recs[0].changed["names"] == {"Alice": "A", "Bob": "B", "Carol": "C"}
    tables = probe_tables(Run.open(exp.run_dir), "j", resamples=200)
    names = tables["names"]
    anyrow = names.filter(names["measure"] == "any").row(0, named=True)
    assert (anyrow["n"], anyrow["changed"], anyrow["value"], anyrow["flag"]) == (
        N_INST * N_REF,
        N_INST * N_REF,
        1.0,
        True,
    )
    cons = names.filter(names["measure"] == "consistency").row(0, named=True)
    assert cons["value"] == 4.0 and cons["flag"]
    collab = names.filter(names["measure"] == "collaborativeness").row(0, named=True)
    assert collab["value"] == 0.0 and not collab["flag"]
    text = probe_text(tables)
    assert any("FLAGGED" in line and "any" in line for line in text)
    assert tables["planted"].is_empty() and tables["stability"].is_empty()


def test_a_name_blind_judge_is_not_flagged(srv, tmp_path):
    srv.configure(answers=[{"match": FINE_MARK, "text": fine({2: ["Off topic"]})}])
    p = _params(tmp_path, srv.openai_base, {"kinds": ["names"], "targets": N_INST})
    exp = load_params(p)
    exp.run(("judge",), progress=False)
    run_probes(exp, progress=False)
    names = probe_tables(Run.open(exp.run_dir), "j", resamples=200)["names"]
    assert names["changed"].sum() == 0 and not names["flag"].any()


def _planted_tasks(exp):
    run = Run.open(exp.run_dir)
    targets = targets_for(run.instances, {})
    return plan_probes(exp.params.probes, exp.params.llm_judges, targets, exp.taxonomy)["j"]


DETECT = {
    "repetition": {0, 1, 2, 3, 4, 5},
    "off_topic": {0, 2, 4, 6, 8, 9, 1, 3},
    "persona_flip": {5},
    "contradiction": set(),
}
"""The copies (by instance number) the fake judge detects, per planted behaviour: rates 0.6, 0.8, 0.1, 0."""


def test_planted_detection_rate_equals_the_rate_built_into_the_fake_judge(srv, tmp_path):
    p = _params(tmp_path, srv.openai_base, {"kinds": ["planted"], "targets": N_INST, "seed": 3})
    exp = load_params(p)
    srv.configure(answers=[{"match": FINE_MARK, "text": fine()}])
    exp.run(("judge",), progress=False)
    tasks = _planted_tasks(exp)
    assert len(tasks) == 4 * N_INST
    answers = []
    for t in tasks:
        k = int(t.source.instance.id.split("/")[1][1:])
        b, turn = t.meta["behaviour"], t.meta["turn"]
        labels = {turn + 1: [NAME[b]]} if k in DETECT[b] else {}
        if b == "repetition" and k == 0:  # one false alarm on another turn of one copy
            labels[(turn + 1) % N_REF + 1] = ["Unclear intent"]
        line = f"[{turn + 1}] {t.meta['changed']['speaker']}: {t.meta['changed']['after']}"
        answers.append({"match": line, "context": f"of d/c{k}/0", "text": fine(labels)})
    srv.reset()
    srv.configure(answers=[*answers, {"match": FINE_MARK, "text": fine()}])
    run_probes(exp, progress=False)
    assert srv.stats()["requests"] == 4 * N_INST
    planted = probe_tables(Run.open(exp.run_dir), "j", resamples=300)["planted"]
    got = {r["behaviour"]: r for r in planted.iter_rows(named=True)}
    for b, ks in DETECT.items():
        assert got[b]["n"] == N_INST and got[b]["detected"] == len(ks)
        assert got[b]["rate"] == pytest.approx(len(ks) / N_INST)
    assert got["off_topic"]["ci_low"] is not None and got["off_topic"]["ci_low"] <= 0.8 <= got["off_topic"]["ci_high"]
    assert got["contradiction"]["ci_low"] is None  # every resample 0: no interval, never a zero-width one
    assert got["repetition"]["false_alarms"] == pytest.approx((1 / (N_REF - 1)) / N_INST)
    assert got["off_topic"]["false_alarms"] == 0
    assert got["off_topic"]["expects"] == "off_topic" and got["persona_flip"]["expects"] == "persona_inconsistency"
    recs = read_probes(exp.run_dir, "j")
    assert all(r.templates and r.changed["before"] != r.changed["after"] for r in recs)


def test_stability_kappa_equals_an_independent_computation(srv, tmp_path):
    rng = random.Random(7)
    names = ["Repetition", "Off topic", "Unclear intent"]

    def draw() -> dict[int, list[str]]:
        return {t: [b for b in names if rng.random() < 0.35] for t in range(1, N_REF + 1)}

    first = {k: draw() for k in range(N_INST)}
    second = {k: draw() for k in range(N_INST)}
    answers = [
        {"match": f"of d/c{k}/0", "context": FINE_MARK, "times": 1, "text": fine(first[k])} for k in range(N_INST)
    ]
    answers += [{"match": f"of d/c{k}/0", "context": FINE_MARK, "text": fine(second[k])} for k in range(N_INST)]
    srv.configure(answers=answers)
    p = _params(tmp_path, srv.openai_base, {"kinds": ["stability"], "targets": N_INST, "sample": 2})
    exp = load_params(p)
    exp.run(("judge",), progress=False)
    run_probes(exp, progress=False)
    recs = read_probes(exp.run_dir, "j")
    assert {r.changed["sample"] for r in recs} == {2} and len(recs) == N_INST
    stab = probe_tables(Run.open(exp.run_dir), "j", resamples=300)["stability"]
    ids = {"Repetition": "repetition", "Off topic": "off_topic", "Unclear intent": "unclear_intent"}
    for name, bid in [*ids.items(), ("any", "any")]:
        a = [
            int((name in first[k][t]) if name != "any" else bool(first[k][t]))
            for k in range(N_INST)
            for t in range(1, N_REF + 1)
        ]
        b = [
            int((name in second[k][t]) if name != "any" else bool(second[k][t]))
            for k in range(N_INST)
            for t in range(1, N_REF + 1)
        ]
        row = stab.filter(stab["measure"] == bid).row(0, named=True)
        assert row["kappa"] == pytest.approx(cohen_kappa_score(a, b))
        assert row["n"] == N_INST * N_REF


def test_forecast_counts_the_probe_calls(srv, tmp_path):
    srv.configure(answers=[{"match": FINE_MARK, "text": fine()}])
    p = _params(tmp_path, srv.openai_base, {"targets": 4})
    exp = load_params(p)
    rows = forecast(exp, exp.prepare_instances(write=False))
    probe = {r.name: r.calls for r in rows if r.stage == "probe"}
    assert probe == {"j:names:fine_grained": 4, "j:stability:fine_grained": 4, "j:planted:fine_grained": 16}
    exp.run(("judge",), progress=False)
    before = srv.stats()["requests"]
    run_probes(exp, progress=False)
    assert srv.stats()["requests"] - before == sum(probe.values())
    usage = json.loads((exp.run_dir / "usage.json").read_text())
    assert usage["all_invocations"]["invocations"] == 2


def test_no_params_section_or_run_is_a_clear_error(srv, tmp_path):
    from cocoeval.core.errors import ConfigError, NotFoundError

    p = _params(tmp_path, srv.openai_base, {"targets": 2})
    with pytest.raises(NotFoundError, match="cocoeval run"):
        run_probes(load_params(p), progress=False)
    data = yaml.safe_load(p.read_text())
    del data["probes"]
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="probes"):
        run_probes(load_params(p), progress=False)
    assert probe_text(probe_tables(Run(), "j"))[1].endswith("not run: cocoeval probe PARAMS")


def test_a_killed_probe_run_resumes_without_sending_a_completed_call_twice(tmp_path):
    probes = {"targets": N_INST}
    with FakeServer(latency_s=0.05) as srv:
        srv.configure(answers=[{"match": FINE_MARK, "text": fine({1: ["Repetition"]})}])
        p = _params(tmp_path, srv.openai_base, probes)
        exp = load_params(p)
        exp.run(("judge",), progress=False)
        cache = tmp_path / "cache-exp.sqlite"
        judged = _keys(cache)
        total = 2 * N_INST + 4 * N_INST  # names, stability, planted
        cmd = [sys.executable, "-m", "cocoeval", "probe", str(p), "--no-progress", "--resamples", "50"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while len(_keys(cache)) < len(judged) + 12 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
        done = _keys(cache) - judged
        assert 12 <= len(done) < total
        srv.reset()
        srv.configure(answers=[{"match": FINE_MARK, "text": fine({1: ["Repetition"]})}])
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert "beyond the paper" in out.stdout
        assert srv.stats()["requests"] == total - len(done)  # nothing completed is sent again
        assert len(_keys(cache) - judged) == total
    assert len(read_probes(exp.run_dir, "j")) == total


def test_probes_after_the_judge_changed_are_refused_before_any_call_is_sent(srv, tmp_path, capsys, monkeypatch):
    from cocoeval import cli

    srv.configure(answers=[{"match": FINE_MARK, "text": fine()}])
    p = _params(tmp_path, srv.openai_base, {"kinds": ["names", "stability"], "targets": 3})
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(p), "--stage", "judge", "--no-progress"]) == 0
    old_id = Run.open(tmp_path / "runs" / "exp").manifest.judges["j"]["fine_grained"]
    data = yaml.safe_load(p.read_text())
    data["judges"][0]["model"] = f"openai-compatible/fake-2@{srv.openai_base}"  # another judge model
    p.write_text(yaml.safe_dump(data))
    new_id = load_params(p).params.llm_judges[0].judge_id("fine_grained", load_params(p).taxonomy)
    capsys.readouterr()
    before = srv.stats()["requests"]
    assert cli.main(["probe", str(p), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert srv.stats()["requests"] == before  # nothing sent, nothing paid
    assert err.startswith("error: ") and "Traceback" not in err
    assert old_id in err and new_id in err and "judge j" in err and f"cocoeval run {p} --stage judge" in err
    assert not (tmp_path / "runs" / "exp" / "probes").exists()
    # judged again with the new judge, the probes run
    assert cli.main(["run", str(p), "--stage", "judge", "--no-progress"]) == 0
    assert cli.main(["probe", str(p), "--no-progress", "--resamples", "20"]) == 0
    assert len(read_probes(tmp_path / "runs" / "exp", "j")) == 6
