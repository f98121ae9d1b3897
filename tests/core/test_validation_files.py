"""Duplicate keys in user YAML files and in the JSON/JSONL files cocoeval reads are errors naming
the file, the line or record and the key, never a silent last-value-wins (issue #24)."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from cocoeval.core import yamlio
from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import iter_jsonl, parse_json_text, read_json, read_models
from cocoeval.core.schema import Judgment
from cocoeval.core.taxonomy import default_taxonomy_path, load_taxonomy
from cocoeval.llm.usage import PriceTable
from cocoeval.prompts.files import load_prompt


def test_yaml_safe_load_refuses_duplicate_keys_at_any_depth():
    for text in ("a: 1\nb: 2\na: 3\n", "x: {a: 1, a: 2}\n", "- {n: 1}\n- m: 1\n  m: 2\n"):
        with pytest.raises(yamlio.DuplicateKeyError):
            yamlio.safe_load(text)
    assert issubclass(yamlio.DuplicateKeyError, yaml.YAMLError)  # reported where YAML errors are


def test_yaml_load_names_the_file_line_and_key():
    with pytest.raises(InputError) as e:
        yamlio.load("a: 1\nb: 2\na: 3\n", "f.yaml")
    assert str(e.value).startswith("f.yaml, record line 3: key 'a' given twice") and "first at line 1" in str(e.value)


def test_yaml_without_duplicates_loads_as_safe_load():
    text = "a: 1\nb: &x {p: 1, q: [1, 2]}\nc: {<<: *x, p: 2}\nd: [{a: 1}, {a: 2}]\n'1': x\n1: y\n"
    assert yamlio.safe_load(text) == yaml.safe_load(text)


def test_a_taxonomy_with_a_key_twice_is_refused(tmp_path):
    p = tmp_path / "tax.yaml"
    p.write_text(default_taxonomy_path().read_text() + "\nname: other\n")
    with pytest.raises(InputError, match="'name' given twice") as e:
        load_taxonomy(p)
    assert "tax.yaml" in str(e.value)


def test_a_prompt_file_with_a_key_twice_is_refused(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nversion: 1\nsystem: a\nuser: b\nsystem: c\n")
    with pytest.raises(InputError, match="'system' given twice") as e:
        load_prompt(str(p))
    assert "p.yaml" in str(e.value) and "line 5" in str(e.value)


def test_a_price_table_with_a_model_twice_is_refused(tmp_path):
    p = tmp_path / "prices.yaml"
    p.write_text(
        "models:\n  gpt-4.1: {input: 2, cached_input: 0.5, output: 8}\n"
        "  gpt-4.1: {input: 1, cached_input: 0.5, output: 8}\n"
    )
    with pytest.raises(InputError, match=r"duplicate key 'gpt-4\.1' at line 3"):
        PriceTable.load(p)
    assert PriceTable.load().models  # the shipped one still loads


def test_read_json_refuses_duplicate_keys(tmp_path):
    p = tmp_path / "manifest.json"
    p.write_text('{"status": "complete", "setups": {}, "status": "running"}')
    with pytest.raises(InputError, match="key 'status' given twice") as e:
        read_json(p)
    assert "manifest.json" in str(e.value)


def test_parse_json_text_refuses_what_read_json_refuses_with_the_hint_it_is_given():
    hint = "export it again from the other tool"
    for text, needle in [
        ('{"a": 1, "a": 2}', "key 'a' given twice"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": ' + "9" * 5000 + "}", "not readable as JSON"),
        ('{"a": ', "invalid JSON at line 1"),
    ]:
        with pytest.raises(InputError, match=needle) as e:
            parse_json_text(text, "export.json", hint=hint)
        assert e.value.file == "export.json" and hint in (e.value.hint or "")
    assert parse_json_text('{"a": [1, {"b": null}]}', "x.json") == {"a": [1, {"b": None}]}


def test_iter_jsonl_refuses_duplicate_keys_naming_the_line(tmp_path):
    p = tmp_path / "judgments.jsonl"
    p.write_text('{"a": 1}\n\n{"b": {"c": 1, "c": 2}}\n')
    with pytest.raises(InputError) as e:
        list(iter_jsonl(p))
    assert "judgments.jsonl, record line 3: key 'c' given twice" in str(e.value)
    p.write_text('{"instance_id": "i", "instance_id": "j"}\n')
    with pytest.raises(InputError, match="record line 1: key 'instance_id' given twice"):
        read_models(p, Judgment)


def test_json_without_duplicates_reads_as_before(tmp_path):
    obj = {"a": [1, {"b": None, "c": "\u2028"}], "d": {"e": 1.5}}
    (tmp_path / "x.json").write_text(json.dumps(obj))
    (tmp_path / "x.jsonl").write_text(json.dumps(obj) + "\n" + json.dumps([obj]) + "\n")
    assert read_json(tmp_path / "x.json") == obj
    assert [o for _, o in iter_jsonl(tmp_path / "x.jsonl")] == [obj, [obj]]


def test_duplicate_checking_keeps_large_jsonl_fast(tmp_path):
    rec = {"id": "i", "turns": [{"speaker": "A", "text": "hello " * 20, "i": i} for i in range(30)]}
    p = tmp_path / "big.jsonl"
    p.write_text((json.dumps(rec) + "\n") * 3000)
    t = time.perf_counter()
    assert sum(1 for _ in iter_jsonl(p)) == 3000
    checked = time.perf_counter() - t
    t = time.perf_counter()
    for line in p.read_text().splitlines():
        json.loads(line)
    plain = time.perf_counter() - t
    assert checked < 5 * plain + 0.5, (checked, plain)
