"""``cocoeval run`` with a ``stopping:`` section (beyond the paper) on the mock model: a setup clearly
different from the humans stops early, the manifest and the report say where and why, and a second
run without the rule goes on from the call cache without sending a completed call again."""

from __future__ import annotations

import json

import yaml

from cocoeval import build
from cocoeval.analysis.frames import NOT_NEEDED, run_frames
from cocoeval.cli import main
from cocoeval.llm.providers.mock import MockProvider
from cocoeval.run import Run
from cocoeval.run.stopping import StoppingSection, processed_instances

from ..conftest import qmsum_meeting, write_json

SPEAKERS = ["Project Manager", "Marketing", "User Interface"]
MEETINGS = 12


def _scripts(tmp_path):
    def script(name, answers):
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump({"answers": answers}))
        return f"mock/{p}"

    far = script("far", [{"text": "\n".join(f"{SPEAKERS[i % 3]}: again and again {i}" for i in range(30))}])
    near = script("near", [{"text": "\n".join(f"{SPEAKERS[i % 3]}: point {i}" for i in range(30))}])
    labelled = {
        "turns": [{"turn": i, "behaviours": [{"behaviour": "repetition", "evidence": "again"}]} for i in range(1, 31)]
    }
    judge = script(
        "judge",
        [
            {"match": "Continuation to annotate", "context": "again and again", "text": json.dumps(labelled)},
            {
                "match": "Continuation to annotate",
                "text": json.dumps({"turns": [{"turn": i, "behaviours": []} for i in range(1, 31)]}),
            },
            {
                "match": "Continuation to evaluate",
                "text": '{"consistency": 8, "collaborativeness": 7, "rationale": "ok"}',
            },
        ],
    )
    return far, near, judge


def _usage(run_dir):
    return json.loads((run_dir / "usage.json").read_text())


def test_a_clearly_different_setup_stops_early_and_a_run_without_the_rule_goes_on_from_the_cache(
    tmp_path, monkeypatch, capsys
):
    MockProvider.reset()
    for i in range(MEETINGS):
        meeting = qmsum_meeting(70 + i)  # every meeting's words its own: no two calls alike
        for t in meeting["meeting_transcripts"]:
            t["content"] = f"Meeting {i}: {t['content']}"
        write_json(tmp_path / "src" / "product" / f"M{i}.json", meeting)
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    far, near, judge = _scripts(tmp_path)
    stopping = {"round_conversations": 2, "min_rounds": 2, "seed": 3}  # the rule: --stop-when
    params = {
        "name": "stop",
        "out": "runs/stop",
        "bench": "bench",
        "setups": [{"name": "far", "model": far}, {"name": "near", "model": near}],
        "judges": [{"name": "j", "model": judge}],
        "llm": {"cache": "cache.sqlite"},
        "stopping": stopping,
    }
    pfile = tmp_path / "stop.yaml"
    pfile.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(pfile), "--no-progress", "--stop-when", "differs"]) == 0
    assert "  stop  far" in capsys.readouterr().out
    run_dir = tmp_path / "runs" / "stop"
    run = Run.open(run_dir)
    n = len(run.instances)
    rec = run.manifest.stopping
    assert run.manifest.params_set == ['stopping.rule="differs"']
    assert (
        rec is not None
        and rec.rule == "differs"
        and rec.conversations_planned == len({f"{i.dataset}/{i.provenance.conversation_id}" for i in run.instances})
        and rec.rounds_planned == (rec.conversations_planned + 1) // 2 >= 4
    )
    far_stop, near_stop = rec.setups["far"], rec.setups["near"]
    assert (far_stop.status, far_stop.round, far_stop.conversations) == ("differs", 2, 4)
    assert any(b.behaviour == "repetition" and b.low > 0 for b in far_stop.bounds)
    assert (near_stop.status, near_stop.round, near_stop.instances) == ("budget", rec.rounds_planned, n)
    done = processed_instances(run.instances, StoppingSection.model_validate(stopping), 4)
    assert 0 < far_stop.instances == len(done) < n
    assert {c.instance_id for c in run.continuations["far"]} == done  # only the instances it did
    assert len(run.continuations["near"]) == n
    first = _usage(run_dir)
    # far: 1 simulation call + 2 judgments per instance done; near and the reference: every instance
    assert first["requests_sent"] == len(done) * 3 + n * 3 + n * 2

    # the same command again (a killed run resumes so): the same rounds from the cache, the same stops
    assert main(["run", str(pfile), "--no-progress", "--stop-when", "differs"]) == 0
    assert _usage(run_dir)["requests_sent"] == 0
    assert Run.open(run_dir).manifest.stopping == rec
    assert main(["run", str(pfile), "--stage", "simulate", "--stop-when", "differs"]) == 2  # rounds need both stages
    assert "runs the simulate and judge stages together" in capsys.readouterr().err

    f = run_frames(run)  # the rest of far's instances are not needed, not missing
    assert f.missing.is_empty()
    unneeded = f.expected.filter(f.expected["reason"].str.starts_with(NOT_NEEDED))
    assert unneeded.height == (n - len(done)) * 3 and set(unneeded["target"]) == {"far"}

    out = tmp_path / "report"
    assert main(["report", str(run_dir), "--out", str(out), "--html"]) == 0
    index = (out / "index.md").read_text()
    assert (
        "Stopped when the answer was known" in index and f"**far**: differs — round 2 of {rec.rounds_planned}" in index
    )
    assert f"**near**: budget — round {rec.rounds_planned} of {rec.rounds_planned}" in index and "fixed-n" in index
    assert "Stopped when the answer was known" in (out / "index.html").read_text()
    assert list(out.rglob("leaderboard_stopping*"))  # the table beside the others

    capsys.readouterr()
    assert main(["estimate", str(pfile), "--stop-when", "differs"]) == 0  # the saving forecast, assumed rates
    said = capsys.readouterr().out
    assert "stopping (beyond the paper): rule differs" in said and "assumed per-turn rates" in said
    assert "without stopping" in said and "if every setup is that separated" in said
    assert main(["estimate", str(pfile), "--stop-when", "differs", "--run", str(run_dir)]) == 0
    assert "the run's judged human reference" in capsys.readouterr().out

    del params["stopping"]  # the rule removed: every instance, from the cache where done
    pfile.write_text(yaml.safe_dump(params))
    assert main(["run", str(pfile), "--no-progress"]) == 0
    second = _usage(run_dir)
    assert second["requests_sent"] == (n - len(done)) * 3  # only far's remaining simulations and judgments
    assert second["cache"]["hits"] == first["requests_sent"]  # every completed call answered by the cache
    run = Run.open(run_dir)
    assert run.manifest.stopping is None and len(run.continuations["far"]) == n
    assert run_frames(run).missing.is_empty()


def test_a_stopping_rule_without_what_it_needs_is_refused_naming_the_key_and_the_flag(tmp_path, capsys):
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump({"name": "p", "bench": "bench", "judges": [{"name": "j", "model": "mock/echo"}]}))
    assert main(["estimate", str(pfile), "--stop-when", "precise"]) == 2
    err = capsys.readouterr().err
    assert "stopping" in err and "needs eps" in err
    pfile.write_text(yaml.safe_dump({"name": "p", "bench": "bench", "stopping": {"rule": "differs"}}))
    assert main(["run", str(pfile)]) == 2
    assert "no LLM judge in judges makes them" in capsys.readouterr().err
    capped = {
        "name": "p",
        "bench": "bench",
        "setups": [{"name": "s", "model": "mock/echo", "max_per_dataset": 3}],
        "judges": [{"name": "j", "model": "mock/echo", "max_per_dataset": 2}],
        "stopping": {"rule": "differs"},
    }
    pfile.write_text(yaml.safe_dump(capped))  # a cap per dataset would be applied to each round anew
    assert main(["run", str(pfile)]) == 2
    err = capsys.readouterr().err
    assert "max_per_dataset is set on s, j" in err and "instances: per_dataset:" in err


def test_an_imported_setup_stops_too_and_only_its_processed_instances_are_judged(tmp_path, monkeypatch, capsys):
    MockProvider.reset()
    for i in range(MEETINGS):
        meeting = qmsum_meeting(70 + i)
        for t in meeting["meeting_transcripts"]:
            t["content"] = f"Meeting {i}: {t['content']}"
        write_json(tmp_path / "src" / "product" / f"M{i}.json", meeting)
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    _, _, judge = _scripts(tmp_path)
    from cocoeval.bench.store import load_instances

    insts = load_instances(tmp_path / "bench", "eval")
    (tmp_path / "imp.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "instance_id": i.id,
                    "turns": [
                        {"speaker": t.speaker, "text": f"again and again {n}"} for n, t in enumerate(i.reference)
                    ],
                }
            )
            + "\n"
            for i in insts
        )
    )
    pfile = tmp_path / "p.yaml"
    pfile.write_text(
        yaml.safe_dump(
            {
                "name": "imp",
                "out": "runs/imp",
                "bench": "bench",
                "setups": [{"name": "imp", "continuations": "imp.jsonl"}],
                "judges": [{"name": "j", "model": judge, "kind": ["fine_grained"]}],
                "llm": {"cache": "cache.sqlite"},
                "stopping": {"round_conversations": 2, "min_rounds": 2},
            }
        )
    )
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(pfile), "--no-progress"]) == 0
    assert "warning" not in capsys.readouterr().err
    run = Run.open(tmp_path / "runs" / "imp")
    stop = run.manifest.stopping.setups["imp"]
    assert (stop.status, stop.round, stop.conversations) == ("differs", 2, 4) and stop.instances < len(insts)
    assert len(run.continuations["imp"]) == stop.instances
    # the reference and the imported continuation of each processed instance: one fine-grained call each
    assert _usage(tmp_path / "runs" / "imp")["requests_sent"] == 2 * stop.instances
    assert run_frames(run).missing.is_empty()


def test_a_setup_on_one_dataset_records_the_prefix_it_ran_through_and_no_instance_it_did_is_not_needed(
    tmp_path, monkeypatch, capsys
):
    MockProvider.reset()
    for i in range(MEETINGS):  # two datasets: the far setup simulates the product meetings only
        folder = "product" if i % 2 == 0 else "academic"
        meeting = qmsum_meeting(90 + i)
        for t in meeting["meeting_transcripts"]:
            t["content"] = f"Meeting {i}: {t['content']}"
        write_json(tmp_path / "src" / folder / f"M{i}.json", meeting)
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    far, _, judge = _scripts(tmp_path)
    params = {
        "name": "stop",
        "out": "runs/stop",
        "bench": "bench",
        "setups": [{"name": "far", "model": far, "datasets": ["qmsum_product"]}],
        "judges": [{"name": "j", "model": judge}],
        "llm": {"cache": "cache.sqlite"},
        "stopping": {"rule": "differs", "round_conversations": 2, "min_rounds": 2, "seed": 3},
    }
    pfile = tmp_path / "stop.yaml"
    pfile.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(pfile), "--no-progress"]) == 0
    run = Run.open(tmp_path / "runs" / "stop")
    rec = run.manifest.stopping
    stop = rec.setups["far"]
    assert stop.status == "differs" and stop.conversations == min(stop.round * 2, rec.conversations_planned)
    did = {c.instance_id for c in run.continuations["far"]}
    assert did and all(i.dataset == "qmsum_product" for i in run.instances if i.id in did)
    assert did == {
        i.id
        for i in run.instances
        if i.dataset == "qmsum_product"
        and i.id
        in processed_instances(run.instances, StoppingSection.model_validate(params["stopping"]), stop.conversations)
    }
    f = run_frames(run)
    unneeded = f.expected.filter(f.expected["reason"].str.starts_with(NOT_NEEDED) & (f.expected["target"] == "far"))
    assert not set(unneeded["instance_id"]) & did  # what it simulated is never called "not needed"
    assert f.missing.is_empty()
