"""What a run or a benchmark shares names no absolute path of the machine that wrote it
(``core.files.portable_record``, issue #47 item 4): checked here on each form a recorded string
takes; the runs and exports that use it are checked through the CLI in
tests/cli/test_no_absolute_paths.py."""

from __future__ import annotations

from cocoeval.core.files import portable_record, portable_spec, portable_text


def test_an_absolute_path_inside_the_base_is_relative_and_one_outside_is_its_name(tmp_path):
    assert portable_text(str(tmp_path / "bench" / "a"), tmp_path) == "bench/a"
    assert portable_text("/data/runs/x", tmp_path) == "x"
    assert portable_text("C:\\data\\bench", tmp_path) == "bench"


def test_a_local_model_spec_with_an_absolute_or_home_path_keeps_only_the_file_name():
    assert portable_spec("local//home/me/models/tiny.gguf") == "local/tiny.gguf"
    assert portable_spec("local/~/models/tiny.gguf") == "local/tiny.gguf"
    assert portable_spec("local/C:\\models\\tiny.gguf") == "local/tiny.gguf"
    assert (
        portable_spec("llm (local//m/tiny.gguf) and llm (local/smollm2)")
        == "llm (local/tiny.gguf) and llm (local/smollm2)"
    )


def test_specs_urls_and_relative_paths_are_kept_as_written(tmp_path):
    kept = [
        "local/smollm2",
        "local/models/tiny.gguf",
        "openai-compatible/fake@http://127.0.0.1:8000/v1",
        "openai/gpt-4.1",
        "runs/exp",
        "qmsum:data/qmsum#qmsum_product",
        "a sentence / with a slash",
        "/",
    ]
    assert [portable_text(s, tmp_path) for s in kept] == kept


def test_a_source_with_an_absolute_path_keeps_its_kind_and_dataset(tmp_path):
    assert portable_text(f"qmsum:{tmp_path}/src#qmsum_product", tmp_path) == "qmsum:src#qmsum_product"
    assert portable_text("ami:/elsewhere/ami", tmp_path) == "ami:ami"


def test_only_the_strings_of_a_record_change(tmp_path):
    rec = {
        "out": "/data/runs/x",
        "n": 3,
        "ok": True,
        "none": None,
        "setups": [{"name": "s", "model": "local//m/tiny.gguf", "temperature": 0.5}],
        "/keys/stay": "as they are",
    }
    assert portable_record(rec, tmp_path) == {
        "out": "x",
        "n": 3,
        "ok": True,
        "none": None,
        "setups": [{"name": "s", "model": "local/tiny.gguf", "temperature": 0.5}],
        "/keys/stay": "as they are",
    }
