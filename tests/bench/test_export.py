"""``cocoeval bench-export``: the benchmark as parquet with a Hugging Face dataset card; the
folder read back by ``load_instances`` (and so by ``bench:`` and every command taking a bench)
gives byte-identical instances; the real ``datasets`` library loads it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest
import yaml

from cocoeval import build
from cocoeval.bench.config import BuildConfig
from cocoeval.bench.export import LICENCE
from cocoeval.bench.store import has_benchmark, load_instances, read_parquet_split, split_file
from cocoeval.cli import main
from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import write_jsonl
from cocoeval.core.schema import Participant, Turn

from ..conftest import qmsum_meeting, write_json
from ..sim_helpers import instance


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("export")
    for domain in ("product", "academic"):
        for i in range(3):
            write_json(tmp / "src" / domain / f"{domain[0].upper()}{i}.json", qmsum_meeting(60 + i))
    build(
        [f"qmsum:{tmp / 'src'}"],
        tmp / "bench",
        BuildConfig(history_turns=8, reference_turns=6, min_prior_turns=5, per_dataset=2, seed=0),
    )
    return tmp / "bench"


def _card(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def test_export_round_trip_is_byte_identical(bench, tmp_path, capsys):
    out = tmp_path / "hf"
    assert main(["bench-export", str(bench), "--format", "parquet", "--out", str(out)]) == 0
    assert "eval.parquet" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} == {
        "eval.parquet",
        "train.parquet",
        "README.md",
        "report.json",
        "croissant.json",
    }
    assert has_benchmark(out) and split_file(out, "eval").suffix == ".parquet"
    for split in ("eval", "train"):
        back = load_instances(out, split)
        assert back, split
        write_jsonl(tmp_path / f"{split}.jsonl", back)
        assert (tmp_path / f"{split}.jsonl").read_bytes() == (bench / f"{split}.jsonl").read_bytes()
    meta, body = _card(out / "README.md")
    assert meta["license"] == LICENCE == "other"  # the parts carry several licences (source_licenses)
    assert meta["configs"][0]["data_files"] == [
        {"split": "eval", "path": "eval.parquet"},
        {"split": "train", "path": "train.parquet"},
    ]
    n = {s: len(load_instances(bench, s)) for s in ("eval", "train")}
    assert {s["name"]: s["num_examples"] for s in meta["dataset_info"]["splits"]} == n
    assert [f["name"] for f in meta["dataset_info"]["features"]] == pl.read_parquet(out / "eval.parquet").columns
    assert set(meta["source_licenses"]) == {"qmsum_product", "qmsum_academic"}
    assert "AMI Meeting Corpus, CC BY 4.0" in meta["source_licenses"]["qmsum_product"]
    assert "ICSI Meeting Corpus, CC BY 4.0" in meta["source_licenses"]["qmsum_academic"]
    for name in (
        "eval.parquet",
        "train.parquet",
        "report.json",
        "croissant.json",
    ):  # provenance: the hashes of the files
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() in body
    assert hashlib.sha256((bench / "eval.jsonl").read_bytes()).hexdigest() in body
    assert "| qmsum_product |" in body and "## How it was built" in body


def test_every_field_survives_and_duplicates_are_refused(tmp_path):
    full = instance("d/full/0", n_hist=3, n_ref=2)
    full = full.model_copy(
        update={
            "kind": "multiparty",
            "history": [
                Turn(speaker="A", text="<b>x</b> \u2028 é", raw_text="uh <b>x</b>", source_index=7, merged=2),
                *full.history[1:],
            ],
            "metadata": full.metadata.model_copy(
                update={
                    "participants": [Participant(name="A", role="chair", stance="for"), Participant(name="B")],
                    "extra": {"topics": ["budget", {"nested": [1, 2.5, None, True]}], "z": "last", "a": "order kept"},
                    "method": "llm",
                    "model": "openai/o4-mini",
                    "prompt": "metadata@1#abc",
                }
            ),
        }
    )
    bare = instance("d/bare/0", n_hist=1, n_ref=1)
    src = tmp_path / "bench"
    write_jsonl(src / "eval.jsonl", [full, bare])
    write_jsonl(src / "train.jsonl", [])  # an empty split stays empty
    assert main(["bench-export", str(src), "--out", str(tmp_path / "hf")]) == 0
    write_jsonl(tmp_path / "back.jsonl", load_instances(tmp_path / "hf"))
    assert (tmp_path / "back.jsonl").read_bytes() == (src / "eval.jsonl").read_bytes()
    assert load_instances(tmp_path / "hf", "train") == []
    df = pl.read_parquet(tmp_path / "hf" / "eval.parquet")
    pl.concat([df, df.head(1)]).write_parquet(tmp_path / "dup.parquet")
    with pytest.raises(InputError, match="twice"):
        read_parquet_split(tmp_path / "dup.parquet")


def test_a_params_file_takes_the_exported_folder_as_its_bench(bench, tmp_path, capsys):
    from cocoeval.run.stages import load_params

    assert main(["bench-export", str(bench), "--out", str(tmp_path / "hf")]) == 0
    params = tmp_path / "p.yaml"
    params.write_text("name: x\nbench: hf\nsetups: []\n")
    exp = load_params(params)
    assert exp.prepare_instances(write=False) == load_instances(bench)
    first = load_instances(bench)[0]
    assert main(["show", str(tmp_path / "hf"), first.id]) == 0
    from cocoeval.analysis.coverage import _parquet_datasets

    assert _parquet_datasets(tmp_path / "hf" / "eval.parquet") == {"qmsum_product", "qmsum_academic"}
    capsys.readouterr()
    main(["check", str(params)])
    said = capsys.readouterr()
    assert "no benchmark at" not in said.out + said.err


def test_the_datasets_library_loads_the_folder(bench, tmp_path):
    datasets = pytest.importorskip(
        "datasets", reason="the dev extra's `datasets` is not installed (pip install -e '.[dev]')"
    )
    out = tmp_path / "hf"
    assert main(["bench-export", str(bench), "--out", str(out)]) == 0
    want = {s: load_instances(bench, s) for s in ("eval", "train")}
    ds = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))  # the card's configs
    assert {s: ds[s].num_rows for s in ds} == {s: len(v) for s, v in want.items()}
    row = ds["eval"][0]
    inst = want["eval"][0]
    assert row["id"] == inst.id and row["reference"][0]["text"] == inst.reference[0].text
    assert [t["speaker"] for t in row["history"]] == [t.speaker for t in inst.history]
    plain = datasets.load_dataset(
        "parquet", data_files={"eval": str(out / "eval.parquet")}, cache_dir=str(tmp_path / "cache2")
    )
    assert plain["eval"]["id"] == [i.id for i in want["eval"]]
