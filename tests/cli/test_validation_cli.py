"""``cocoeval check`` and ``run`` on a params file that is invalid (issue #24): exit status 2 and
the message, never 1 (a bug) or a traceback."""

from __future__ import annotations

import pytest

from cocoeval.cli import main


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("{name: a, model: nosuchprovider/x}", "unknown provider 'nosuchprovider'"),
        ("{name: a, model: openai}", "model spec 'openai' is not PROVIDER/MODEL"),
    ],
)
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_bad_model_spec_exits_2_with_the_message(tmp_path, capsys, command, setup, needle):
    p = tmp_path / "p.yaml"
    p.write_text(f"name: t\nbuild: {{demo_data: true}}\nsetups:\n  - {setup}\n")
    assert main([command, str(p)]) == 2
    err = capsys.readouterr().err
    assert "p.yaml" in err and needle in err and "internal error" not in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # refused when read, before any stage


@pytest.mark.parametrize(
    "text",
    [
        "name: t\nbuild: {demo_data: true}\nname: u\n",
        "name: t\nbuild: {demo_data: true}\njudges:\n  - {name: j, model: openai/o4-mini, kind: [overall, overall]}\n",
        "name: t\nbuild: {demo_data: true}\njudges:\n  - {name: j, model: openai/o4-mini, kind: []}\n",
        "name: t\nbuild: {demo_data: true}\nllm: {concurrency: 100000000000000000000000}\n",
        "name: t\nbuild: {demo_data: true}\nsetups:\n  - {name: a, model: openai/gpt-4.1, turns_per_call: true}\n",
    ],
    ids=["duplicate-key", "kind-twice", "kind-empty", "absurd-concurrency", "bool-turns"],
)
def test_check_exits_2_on_invalid_params(tmp_path, capsys, text):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    assert main(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "p.yaml" in err
