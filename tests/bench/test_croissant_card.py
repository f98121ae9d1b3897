"""The exported benchmark's Croissant 1.1 metadata, read by the real ``mlcroissant`` (valid, with
its responsible-AI fields, every split's records readable); honest cards (each dataset's licence
and source, "unknown: check the source" where cocoeval does not know); no absolute path of the
building machine in any file a build or an export writes."""

from __future__ import annotations

import hashlib
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import polars as pl
import pytest
import yaml

from cocoeval.bench.export import SOURCE_LICENCES, UNKNOWN, dataset_card, source_licence
from cocoeval.cli import main

from ..conftest import qmsum_meeting, write_json


def _cli(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(list(argv)) == 0, err.getvalue()
    return out.getvalue() + err.getvalue()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, str]:
    """The documented commands in order, with absolute paths: cocoeval build, then cocoeval bench-export."""
    tmp = tmp_path_factory.mktemp("croissant")
    for domain, n in (("product", 3), ("academic", 3), ("committee", 2)):
        for i in range(n):
            write_json(tmp / "data" / domain / f"{domain[0].upper()}{i}.json", qmsum_meeting(60 + i))
    printed = _cli(
        "build",
        "--source",
        f"qmsum:{tmp / 'data'}",
        "--out",
        str(tmp / "bench"),
        "--per-dataset",
        "2",
        "--history-turns",
        "8",
        "--reference-turns",
        "6",
        "--min-prior-turns",
        "5",
    )
    printed += _cli("bench-export", str(tmp / "bench"), "--format", "parquet", "--out", str(tmp / "hf"))
    return tmp, printed


def test_mlcroissant_validates_the_metadata_and_reads_every_split(exported):
    mlc = pytest.importorskip("mlcroissant", reason="mlcroissant is not installed (the interop extra)")
    tmp, _ = exported
    meta = json.loads((tmp / "hf" / "croissant.json").read_text(encoding="utf-8"))
    assert meta["conformsTo"] == "http://mlcommons.org/croissant/1.1"
    ds = mlc.Dataset(jsonld=str(tmp / "hf" / "croissant.json"))
    assert not ds.metadata.ctx.issues.errors and not ds.metadata.ctx.issues.warnings
    m = ds.metadata
    for field in (
        m.data_collection,
        m.data_biases,
        m.data_limitations,
        m.personal_sensitive_information,
        m.data_use_cases,
        m.data_social_impact,
        m.data_annotation_protocol,
        m.data_release_maintenance_plan,
    ):
        assert field  # every RAI field the export writes is read back, not dropped
    assert any("politicians" in p and "qmsum_committee" in p for p in m.personal_sensitive_information)
    for split in ("eval", "train"):
        df = pl.read_parquet(tmp / "hf" / f"{split}.parquet")
        records = list(ds.records(record_set=split))
        assert [r[f"{split}/id"].decode() for r in records] == df["id"].to_list()
        assert [r[f"{split}/summary"].decode() for r in records] == [s["text"] for s in df["summary"].to_list()]
        assert [r[f"{split}/start_index"] for r in records] == [p["start_index"] for p in df["provenance"].to_list()]
        sha = hashlib.sha256((tmp / "hf" / f"{split}.parquet").read_bytes()).hexdigest()
        assert {d["sha256"] for d in meta["distribution"] if d["name"] == f"{split}.parquet"} == {sha}


def test_the_card_gives_each_dataset_its_own_licence_and_source(exported):
    tmp, _ = exported
    text = (tmp / "hf" / "README.md").read_text(encoding="utf-8")
    head, body = text[4:].split("\n---\n", 1)
    meta = yaml.safe_load(head)
    assert meta["license"] == "other" and meta["license_name"]
    lic = meta["source_licenses"]
    assert set(lic) == {"qmsum_product", "qmsum_academic", "qmsum_committee"}
    assert "AMI Meeting Corpus, CC BY 4.0" in lic["qmsum_product"] and "MIT" in lic["qmsum_product"]
    assert "ICSI Meeting Corpus, CC BY 4.0" in lic["qmsum_academic"]
    assert "Open Government Licence" in lic["qmsum_committee"] and UNKNOWN in lic["qmsum_committee"]
    assert "CC BY-SA 4.0" not in lic["qmsum_product"]  # the paper's licence of the whole is said apart
    assert "CC BY-SA 4.0 (its A.1)" in body
    assert "`croissant.json` describes the splits in Croissant 1.1" in body and "(beyond the paper)" in body
    for d in lic:
        assert f"| {d} | {source_licence(d).licence} |" in body


def test_a_dataset_cocoeval_does_not_know_says_unknown_rather_than_a_guess():
    assert source_licence("my_meetings").licence == UNKNOWN == "unknown: check the source"
    assert SOURCE_LICENCES["sharechat"].licence == UNKNOWN
    assert {SOURCE_LICENCES[d].licence for d in ("sim", "ncpc")} == {"CC BY-SA 4.0"}  # the paper, A.1
    card = dataset_card({"eval": 1, "train": 0}, {"my_meetings": {"eval": 1, "train": 0}}, {}, {})
    assert f"my_meetings: {UNKNOWN}" in card.replace("'", "").replace('"', "")


def test_no_file_of_the_build_or_the_export_holds_the_absolute_path_of_its_sources(exported):
    tmp, _ = exported
    root = str(tmp.resolve()).encode()
    files = [p for d in ("bench", "hf") for p in sorted((tmp / d).rglob("*")) if p.is_file()]
    assert {p.name for p in files} >= {"eval.jsonl", "report.json", "eval.parquet", "croissant.json", "README.md"}
    for p in files:
        assert root not in p.read_bytes(), p.relative_to(tmp)
    inst = json.loads((tmp / "bench" / "eval.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert inst["provenance"]["source_file"].startswith("data/")  # relative to the source folder's parent
    report = json.loads((tmp / "bench" / "report.json").read_text(encoding="utf-8"))
    assert [s["source"] for s in report["sources"]] == ["qmsum:data"]
