"""Any simulator measured the same way, end to end through ``cocoeval``: export the instances,
import continuations written elsewhere into the params file (its comments kept), run: the imported
setup is judged with the very requests a simulated setup of the same turns was judged with, and
gives the same judgments and statistics; an agents setup runs beside them; the report names the
imported file and its sha256; a bad file is an exit-2 error naming the line."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
import yaml

from cocoeval import build
from cocoeval.analysis.convstats import conversation_frame
from cocoeval.analysis.frames import run_frames
from cocoeval.run import Run
from tests.fakes.server import FakeServer

from ..conftest import qmsum_meeting, write_json

SPEAKERS = ["Project Manager", "Marketing", "User Interface"]
WHOLE = "\n".join(f"{SPEAKERS[i % 3]}: point number {i}" for i in range(30))
FINE = json.dumps(
    {
        "turns": [
            {"turn": i, "behaviours": [{"behaviour": "Repetition", "evidence": "again"}] if i % 4 == 0 else []}
            for i in range(1, 31)
        ]
    }
)
ANSWERS = [
    {"match": "Continuation to annotate", "text": FINE},
    {
        "match": "Continuation to evaluate",
        "text": json.dumps({"consistency": 7, "collaborativeness": 6, "rationale": "fine"}),
    },
    {"match": "'s turn", "text": "I see your point."},
    {"match": "", "text": WHOLE},
]


def cli(*args, ok=True):
    out = subprocess.run(
        [sys.executable, "-m", "cocoeval", *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert (out.returncode == 0) == ok, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sims")
    for i in range(6):
        write_json(tmp / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp / 'src'}"], tmp / "bench")
    with FakeServer() as srv:
        srv.configure(answers=ANSWERS)
        model = f"openai-compatible/fake@{srv.openai_base}"
        params = tmp / "p.yaml"
        params.write_text(
            "# my experiment\n"
            + yaml.safe_dump(
                {
                    "name": "p",
                    "out": "runs/p",
                    "bench": "bench",
                    "instances": {"per_dataset": 2},
                    "judges": [{"name": "j", "model": model}],
                    "llm": {"cache": "cache.sqlite"},
                },
                sort_keys=False,
            )
            + "setups:\n  # the paper's simulator\n  - {name: k30, model: '"
            + model
            + "', turns_per_call: 30}\n"
            + "  - {name: ag, simulator: agents, model: '"
            + model
            + "'}  # one agent per participant\n"
        )
        cli("run", params, "--no-progress")
        yield tmp, params, srv


def test_export_import_and_judge_like_a_simulated_setup(world):
    tmp, params, srv = world
    run_dir = tmp / "runs" / "p"
    cli("export-instances", run_dir, "--out", tmp / "in.jsonl")
    exported = [json.loads(x) for x in (tmp / "in.jsonl").read_text().splitlines()]
    run = Run.open(run_dir)
    assert [e["id"] for e in exported] == [i.id for i in run.instances] and exported[0]["n_turns"] == 30
    # "my simulator" writes exactly what k30 wrote
    mine = tmp / "mine.jsonl"
    mine.write_text(
        "".join(
            json.dumps(
                {
                    "instance_id": c.instance_id,
                    "model": "copy-of-k30",
                    "turns": [{"speaker": t.speaker, "text": t.text} for t in c.turns],
                }
            )
            + "\n"
            for c in run.continuations["k30"]
        )
    )
    out = cli("import-continuations", mine, params, "--setup", "mine", "--description", "k30, copied")
    assert "2 continuation(s) of 2 selected instance(s); 2 valid, 0 invalid" in out.stdout
    text = params.read_text()
    assert text.startswith("# my experiment\n") and "# the paper's simulator" in text and "# one agent" in text
    assert "- {name: mine, continuations: mine.jsonl, description: 'k30, copied', model: copy-of-k30}" in text
    srv.reset()
    srv.configure(answers=ANSWERS)
    cli("run", params, "--no-progress")
    assert srv.stats()["requests"] == 0  # the imported turns are judged with k30's very requests: all cached
    run = Run.open(run_dir)
    assert {c.status for c in run.continuations["mine"]} == {"ok"}
    assert run.manifest.imported["mine"]["sha256"] == hashlib.sha256(mine.read_bytes()).hexdigest()

    def labels(name):
        return sorted(
            (j.instance_id, j.kind, j.model_dump_json(include={"labels", "scores", "status"}))
            for j in run.judgments["j"]
            if j.target_name == name
        )

    assert labels("mine") == labels("k30") and len(labels("mine")) == 4
    f = run_frames(run)
    for frame in (f.counts, f.likert):
        cols = [c for c in frame.columns if c != "target"]
        a = frame.filter(frame["target"] == "k30").drop("target").sort(cols)
        b = frame.filter(frame["target"] == "mine").drop("target").sort(cols)
        assert a.height > 0 and a.equals(b)
    conv = conversation_frame(run)
    stats = [c for c in conv.columns if c not in ("target", "setup", "setup_name")]
    a = conv.filter(conv["target"] == "k30").select(stats).sort("instance_id")
    b = conv.filter(conv["target"] == "mine").select(stats).sort("instance_id")
    assert a.equals(b)
    # the agents setup: one call per turn, the oracle's speaker order
    for c in run.continuations["ag"]:
        inst = next(i for i in run.instances if i.id == c.instance_id)
        assert c.status == "ok" and len(c.calls) == 30
        assert [t.speaker for t in c.turns] == [t.speaker for t in inst.reference]
    # the report says where the imported continuations came from
    cli("report", run_dir, "--out", tmp / "report")
    index = (tmp / "report" / "index.md").read_text()
    assert "`mine`: imported from" in index and run.manifest.imported["mine"]["sha256"] in index
    assert "`ag`: simulator plugin `agents`" in index


def test_a_changed_file_is_a_new_setup_and_old_judgments_are_stale(world):
    tmp, params, _ = world
    mine = tmp / "mine.jsonl"
    if not mine.exists():
        pytest.skip("needs the import of the test before")
    run = Run.open(tmp / "runs" / "p")
    old = run.manifest.setups["mine"]
    lines = mine.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["turns"][0]["text"] = "something else entirely"
    changed = tmp / "changed"
    changed.mkdir(exist_ok=True)
    (changed / "p.yaml").write_text(
        params.read_text()
        .replace("mine.jsonl", str(changed / "mine.jsonl"))
        .replace("out: runs/p", f"out: {tmp / 'runs' / 'p'}")
        .replace("bench: bench", f"bench: {tmp / 'bench'}")
        .replace("cache: cache.sqlite", f"cache: {tmp / 'cache.sqlite'}")
    )
    (changed / "mine.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    from cocoeval.run.stages import load_params

    exp = load_params(changed / "p.yaml")
    new = exp.manifest().setups["mine"]
    assert new != old
    stale = [run.stale_reason("mine", c) for c in run.continuations["mine"]]
    assert stale == [None, None]  # under the run's own manifest they are current
    run.manifest.setups["mine"] = new
    assert all(
        "simulated with other setup settings" in (run.stale_reason("mine", c) or "") for c in run.continuations["mine"]
    )


@pytest.mark.parametrize(
    "raw,needle",
    [
        ('{"instance_id": "nope", "turns": []}\n', "instance 'nope' is not among the run's"),
        ("not json\n", "line 1"),
        ('{"instance_id": "x", "turns": [], "speaker": 1}\n', "speaker: Extra inputs are not permitted"),
    ],
)
def test_a_bad_file_is_an_error_and_the_params_file_is_left_as_it_was(world, raw, needle):
    tmp, params, _ = world
    before = params.read_text()
    bad = tmp / "bad.jsonl"
    bad.write_text(raw)
    out = cli("import-continuations", bad, params, "--setup", "bad", ok=False)
    assert out.returncode == 2 and "bad.jsonl" in out.stderr and needle in out.stderr, out.stderr
    assert params.read_text() == before


def test_estimate_forecasts_the_agents_calls_and_nothing_for_imported(world):
    from cocoeval.run.estimate import forecast
    from cocoeval.run.stages import load_params

    _tmp, params, _ = world
    exp = load_params(params)
    rows = forecast(exp, exp.prepare_instances(write=False))
    sim = {r.name: r for r in rows if r.stage == "simulate"}
    assert sim["ag"].calls == 2 * 30 and sim["k30"].calls == 2 and "mine" not in sim
    out = cli("estimate", params)
    assert "ag" in out.stdout


def test_check_names_a_missing_import_file(world, tmp_path):
    tmp, params, _ = world
    p = tmp / "missing.yaml"
    p.write_text(
        params.read_text().replace("setups:\n", "setups:\n  - {name: gone, continuations: nowhere.jsonl}\n", 1)
    )
    out = cli("check", p, ok=False)
    assert (
        "setup gone: " in out.stderr and "nowhere.jsonl" in out.stderr and "cannot read the continuations" in out.stderr
    )
