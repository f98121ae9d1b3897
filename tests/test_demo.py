from __future__ import annotations

import json

from cocoeval import BuildConfig, build, load_instances
from cocoeval.demo import NOTE, write_demo_data


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
