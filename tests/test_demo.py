from __future__ import annotations

import json

from cocoeval import BuildConfig, build, load_instances
from cocoeval.sources.demo import NOTE, write_demo_data


def test_demo_data_builds_in_every_format_and_says_it_is_illustrative(tmp_path):
    paths = write_demo_data(tmp_path / "data")
    assert set(paths) == {"qmsum", "convokit", "tcr", "chat"}
    report = build([f"{k}:{p}" for k, p in paths.items()], tmp_path / "bench", BuildConfig(per_dataset=1))
    assert set(report["datasets"]) == {"qmsum_product", "demo_debates", "demo_sim", "chat"}
    assert all(d["eval_instances"] == 1 for d in report["datasets"].values())
    assert len(load_instances(tmp_path / "bench")) == 4
    for f in (tmp_path / "data").rglob("*.json*"):
        assert "ILLUSTRATIVE" in f.read_text()
    assert "not human data" in NOTE
    # the demo exercises the cleaning and pseudo-speaker paths
    dropped = {k: v for s in report["sources"] for k, v in s["dropped_turns"].items()}
    assert dropped.get("pseudo-speaker (e.g. RESULTS)") == 1
    raw = json.loads((tmp_path / "data/qmsum/product/DEMO001.json").read_text())
    assert any("{vocalsound}" in t["content"] for t in raw["meeting_transcripts"])


def test_demo_data_is_deterministic(tmp_path):
    write_demo_data(tmp_path / "a")
    write_demo_data(tmp_path / "b")
    for f in (tmp_path / "a").rglob("*"):
        if f.is_file():
            assert f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes()


def test_the_shipped_qmsum_sample_is_real_credited_and_builds_demo_and_full_windows(tmp_path):
    import hashlib
    import re

    from cocoeval.sources.demo import GENERATED_DATASETS, demo_sources, sample_dir

    d = sample_dir()
    files = sorted(p for p in d.rglob("*") if p.is_file())
    assert sum(p.stat().st_size for p in files) <= 2_000_000
    assert "MIT License" in (d / "LICENSE").read_text() and "Yale-LILY" in (d / "LICENSE").read_text()
    credits = (d / "CREDITS.md").read_text()
    listed = dict(re.findall(r"\| `([\w/.]+)` \| `([0-9a-f]{64})` \|", credits))
    shipped = {p.relative_to(d).as_posix() for p in files} - {"CREDITS.md"}
    assert set(listed) == shipped  # every shipped file is credited with its sha256, and only those
    for rel, digest in listed.items():
        assert hashlib.sha256((d / rel).read_bytes()).hexdigest() == digest, rel
    for text in ("AMI", "ICSI", "CC BY 4.0", "Welsh Parliament", "Parliament of Canada"):
        assert text in credits
    for f in d.rglob("*.json"):
        assert "ILLUSTRATIVE" not in f.read_text()  # real meetings, not the generated ones

    # the demo's windows (8 + 6 after 5) from every domain, and the generated data labelled so
    demo = build(
        demo_sources(tmp_path / "gen"),
        tmp_path / "demo",
        BuildConfig(history_turns=8, reference_turns=6, min_prior_turns=5, per_dataset=1),
    )
    assert set(demo["datasets"]) == {"qmsum_product", "qmsum_academic", "qmsum_committee", *GENERATED_DATASETS.values()}
    assert all(n.startswith("generated_") for n in GENERATED_DATASETS.values())
    assert all(v["eval_instances"] == 1 for v in demo["datasets"].values())
    real = [i for i in load_instances(tmp_path / "demo", None) if i.dataset.startswith("qmsum_")]
    # recorded relative to the folder holding the source, never as this machine's absolute path
    assert {i.provenance.source_file for i in real} <= {p.relative_to(d.parent).as_posix() for p in d.rglob("*.json")}
    # and the paper's full windows (30 + 30 after 10) too
    full = build([f"qmsum:{d}"], tmp_path / "full", BuildConfig(per_dataset=1))
    assert all(v["eval_instances"] == 1 for v in full["datasets"].values()) and len(full["datasets"]) == 3
    assert full["skipped_conversations"] == []


def test_the_sample_ships_in_the_wheel():
    import tomllib
    from fnmatch import fnmatch

    from cocoeval.sources.demo import sample_dir

    from .conftest import ROOT

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["cocoeval"]
    pkg = ROOT / "cocoeval"
    for p in sample_dir().rglob("*"):
        if p.is_file():
            rel = p.relative_to(pkg).as_posix()
            assert any(fnmatch(rel, pat) and rel.count("/") == pat.count("/") for pat in patterns), rel


def test_demo_params_name_only_datasets_the_demo_builds(tmp_path):
    from cocoeval.run import load_params
    from cocoeval.sources.demo import demo_sources

    from .conftest import ROOT

    params = load_params(ROOT / "params" / "demo.yaml").params
    report = build(demo_sources(tmp_path / "gen"), tmp_path / "bench", params.build.options)
    named = {d for s in params.setups for d in (s.datasets or [])} | set(params.instances.datasets or [])
    judged = {d for j in params.judges for d in (j.datasets or [])}
    assert named and judged and named | judged <= set(report["datasets"])
    # every real meeting dataset is simulated by some setup, and judged on a real meeting
    assert {d for d in report["datasets"] if d.startswith("qmsum_")} <= named
    assert any(d.startswith("qmsum_") for d in judged)
    # smol-vanilla-6 simulates enough instances, real meetings among them, for an interval
    from cocoeval.analysis.inference import MIN_N

    eval_instances = load_instances(tmp_path / "bench")
    chosen = next(s for s in params.setups if s.name == "smol-vanilla-6").select(eval_instances)
    assert len(chosen) >= MIN_N and sum(i.dataset.startswith("qmsum_") for i in chosen) >= len(chosen) // 2


def test_the_demo_benchmark_is_the_same_under_any_hash_seed(tmp_path):
    """Equal sentence scores once tied differently as the set order of their words changed with
    PYTHONHASHSEED: another summary, another prompt, a cached demo run missing its cache."""
    import os
    import subprocess
    import sys

    from .conftest import ROOT

    code = (
        "import sys, json; from cocoeval import build, load_instances; from cocoeval.sources.demo import demo_sources; "
        "from cocoeval.run import load_params; o = sys.argv[1]; "
        "build(demo_sources(o), o + '/bench', load_params(sys.argv[2]).params.build.options); "
        "print(json.dumps([[i.id, i.summary.text] for i in load_instances(o + '/bench')]))"
    )
    seen = []
    for seed in ("0", "6"):  # two seeds whose orders broke the ties differently
        out = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / seed), str(ROOT / "params" / "demo.yaml")],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert out.returncode == 0, out.stderr[-2000:]
        seen.append(json.loads(out.stdout.splitlines()[-1]))
    assert seen[0] == seen[1] and len(seen[0]) == 18
