"""Params files: duplicate keys, bools or absurd numbers as integers, bad model specs are errors
of the file, found when it is read (issue #24)."""

from __future__ import annotations

import pytest

from cocoeval.core.errors import InputError
from cocoeval.run.params import read_params

HEAD = "name: x\nbench: b\n"
SETUP = "setups:\n  - {name: a, model: openai/gpt-4.1}\n"


def _read(tmp_path, text):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return read_params(p)


def test_setups_given_twice_is_refused_naming_the_line_and_key(tmp_path):
    with pytest.raises(InputError) as e:
        _read(tmp_path, HEAD + SETUP + "setups:\n  - {name: b, model: openai/gpt-4.1}\n")
    msg = str(e.value)
    assert "bad.yaml" in msg and "line 5" in msg and "'setups' given twice" in msg and "first at line 3" in msg


@pytest.mark.parametrize(
    "setup",
    [
        "  - {name: a, model: openai/gpt-4.1, turns_per_call: 1, turns_per_call: 30}\n",
        "  - name: a\n    model: openai/gpt-4.1\n    turns_per_call: 1\n    turns_per_call: 30\n",
    ],
)
def test_a_key_repeated_inside_a_setup_is_refused(tmp_path, setup):
    with pytest.raises(InputError, match="'turns_per_call' given twice") as e:
        _read(tmp_path, HEAD + "setups:\n" + setup)
    assert "bad.yaml" in str(e.value) and "record line" in str(e.value)


def test_yaml_merge_keys_may_still_override(tmp_path):
    text = (
        HEAD + "setups:\n  - &base {name: a, model: openai/gpt-4.1, turns_per_call: 1}\n"
        "  - {<<: *base, name: b, turns_per_call: 5}\n"
    )
    assert [s.turns_per_call for s in _read(tmp_path, text).setups] == [1, 5]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("setups:\n  - {name: a, model: openai/gpt-4.1, turns_per_call: true}\n", "turns_per_call"),
        ("setups:\n  - {name: a, model: openai/gpt-4.1, turns_per_call: 100000000000000000000}\n", "turns_per_call"),
        ("llm: {concurrency: 100000000000000000000000}\n", "concurrency"),
        ("llm: {concurrency: true}\n", "concurrency"),
        ("llm: {rpm: true}\n", "rpm"),
        ("llm: {tpm: 100000000000000000000000}\n", "tpm"),
        ("llm: {max_retries: 100000000000000000000000}\n", "max_retries"),
        ("llm: {batch_max_requests: true}\n", "batch_max_requests"),
        ("llm: {processes: true}\n", "processes"),
        ("instances: {per_dataset: true}\n", "per_dataset"),
        ("judges:\n  - {name: j, model: openai/o4-mini, max_attempts: true}\n", "max_attempts"),
    ],
)
def test_bools_and_absurd_integers_are_refused(tmp_path, text, needle):
    with pytest.raises(InputError, match=needle) as e:
        _read(tmp_path, HEAD + text)
    assert "bad.yaml" in str(e.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("build: {options: {per_dataset: true}}\n", "per_dataset"),
        ("build: {options: {history_turns: 100000000000000000000}}\n", "history_turns"),
        ("build: {options: {seed: false}}\n", "seed"),
        ("build: {options: {chat: {conversations: true}}}\n", "conversations"),
    ],
)
def test_build_options_refuse_bools_and_absurd_integers(tmp_path, text, needle):
    with pytest.raises(InputError, match=needle):
        _read(tmp_path, "name: x\n" + text)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("setups:\n  - {name: a, model: nosuchprovider/x}\n", "setups[0].model: unknown provider 'nosuchprovider'"),
        ("setups:\n  - {name: a, model: openai}\n", "setups[0].model: model spec 'openai' is not PROVIDER/MODEL"),
        ("setups:\n  - {name: a, model: openai/gpt-4.1, kind: human_ai, chatbot: nope}\n", "setups[0].chatbot"),
        ("judges:\n  - {name: j, model: nosuchprovider/x}\n", "judges[0].model"),
    ],
)
def test_bad_model_specs_are_errors_of_the_params_file(tmp_path, text, needle):
    with pytest.raises(InputError) as e:
        _read(tmp_path, HEAD + text)
    assert "bad.yaml" in str(e.value) and needle in str(e.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("setups:\n  - {name: a, simulator: nope}\n", "setups.0: unknown simulator 'nope'; known: agents"),
        (
            "setups:\n  - {name: a, simulator: agents, model: openai/gpt-4.1, options: {policy: loud}}\n",
            "setups.0: simulator 'agents': options.policy",
        ),
        ("setups:\n  - {name: a, simulator: agents}\n", "setups.0: simulator 'agents' calls a model"),
        (
            "setups:\n  - {name: a, simulator: agents, model: nosuchprovider/x}\n",
            "setups[0].model: unknown provider 'nosuchprovider'",
        ),
    ],
)
def test_a_plugin_setup_the_plugin_refuses_is_an_error_of_the_params_file(tmp_path, text, needle):
    with pytest.raises(InputError) as e:
        _read(tmp_path, HEAD + text)
    assert "bad.yaml" in str(e.value) and needle in str(e.value) and "fix these keys" in str(e.value)


def test_the_params_schema_looks_up_no_plugin_and_reading_fills_in_its_defaults(tmp_path):
    from cocoeval.run.params import ExperimentParams

    data = {"name": "x", "bench": "b", "setups": [{"name": "a", "simulator": "nope"}]}
    assert ExperimentParams.model_validate(data).setups[0].options == {}  # the schema alone: no plugin code
    p = _read(tmp_path, HEAD + "setups:\n  - {name: a, simulator: agents, model: openai/gpt-4.1}\n")
    assert p.setups[0].options["policy"] == "oracle"  # the plugin's defaults, as they enter the setup id


def test_a_bad_build_context_model_spec_is_an_error_of_the_params_file(tmp_path):
    with pytest.raises(InputError, match=r"build\.context\.summary"):
        _read(tmp_path, "name: x\nbuild: {demo_data: true, context: {summary: o4-mini}}\n")


def test_judge_kinds_twice_or_none_are_refused_in_a_params_file(tmp_path):
    with pytest.raises(InputError, match="more than once"):
        _read(tmp_path, HEAD + "judges:\n  - {name: j, model: openai/o4-mini, kind: [overall, overall]}\n")
    with pytest.raises(InputError, match="kind is empty"):
        _read(tmp_path, HEAD + "judges:\n  - {name: j, model: openai/o4-mini, kind: []}\n")


def test_large_but_sane_values_are_accepted(tmp_path):
    p = _read(
        tmp_path,
        HEAD + "setups:\n  - {name: a, model: openai/gpt-4.1, turns_per_call: 30, sample: 2}\n"
        "llm: {concurrency: 256, rpm: 5000, tpm: 2000000, max_retries: 10}\n",
    )
    assert p.llm.concurrency == 256 and p.llm.tpm == 2_000_000


@pytest.mark.parametrize(
    "block",
    [
        "setups:\n- name: a\n  simulator: agents\n  model: openai/gpt-4.1\n  options:\n    policy: oracle\n",  # PyYAML's layout
        "setups:\n  - name: a\n    model: openai/gpt-4.1\n",
        "setups:\n    - {name: a, model: openai/gpt-4.1}\n",
    ],
    ids=["flush", "indented", "flow-items"],
)
def test_add_setup_follows_the_indentation_of_the_setups_list(tmp_path, block):
    from cocoeval.run.params import add_setup

    p = tmp_path / "p.yaml"
    p.write_text("# mine\n" + HEAD + block + "llm: {concurrency: 2}\n")
    add_setup(p, {"name": "mine", "continuations": "mine.jsonl"})
    assert [s.name for s in read_params(p).setups] == ["a", "mine"]
    indent = block.splitlines()[1].split("-")[0]
    assert f"\n{indent}- {{name: mine, continuations: mine.jsonl}}\nllm:" in p.read_text()
