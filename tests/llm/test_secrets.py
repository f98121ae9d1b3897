"""API keys: redacted from every error text, record, log and stderr line; sent only where they
belong (a provider's own hosts, or a variable the spec names with ?key_env=)."""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import subprocess
import sys

import pytest
import yaml

from cocoeval import ConfigError, build, cli
from cocoeval.core.errors import FatalLLMError
from cocoeval.core.jsonio import write_jsonl
from cocoeval.llm import (
    Call,
    GenerateRequest,
    LLMConfig,
    Message,
    Runner,
    get_provider,
    parse_model_spec,
)
from cocoeval.llm.base import CallError
from cocoeval.llm.secrets import LOOPBACK_OPT_IN, redact, redact_values

from ..conftest import TEST_KEY, qmsum_meeting, write_json

OTHER = "tok_" + "m4" * 14  # a key shaped like no known key, in a variable named by ?key_env=


def calls(model: str, prompts: list[str]) -> list[Call]:
    return [
        Call(model=model, stage="test", tag=p, request=GenerateRequest(messages=[Message(role="user", content=p)]))
        for p in prompts
    ]


def no_key_in(text: str, *keys: str) -> bool:
    return not any(k in text for k in keys or (TEST_KEY,))


# -- redaction ------------------------------------------------------------------------------------


def test_redact_replaces_key_values_and_credential_shapes(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("SOME_PROXY_API_KEY", "plainvalue123")
    text = (
        f"bad key {TEST_KEY}; proxy plainvalue123; Authorization: Bearer abc.DEF-123456789; "
        '{"x-api-key": "sk-ant-api03-AAAAAAAAAAAAAAAAAAAA"} api-key: 0123456789abcdef '
        "https://h/v1?key=AIzaSyZZZZZZZZ&x=1 OPENAI_API_KEY=zzzzzzzzzz sk-proj-ABCDEFGHIJKLMNOP"
    )
    out = redact(text)
    for secret in (
        TEST_KEY,
        "plainvalue123",
        "abc.DEF-123456789",
        "sk-ant-api03",
        "0123456789abcdef",
        "AIzaSy",
        "zzzzzzzzzz",
        "sk-proj-ABC",
    ):
        assert secret not in out, secret
    assert out.count("[REDACTED]") == 8
    assert "Authorization: [REDACTED]" in out and "api-key: [REDACTED]" in out and "&x=1" in out
    assert redact(out) == out == redact(redact_values(text))  # redacting twice changes nothing
    # ordinary text is left alone
    plain = (
        "Incorrect API key provided: sk-abc****wxyz. A risk-assessment-framework-item; "
        "write openai/m@http://h/v1?key_env=MY_SERVER_KEY; export OPENAI_API_KEY=..."
    )
    assert redact(plain) == plain
    # records: only the exact values, no pattern touches a model's words
    assert redact_values(f"api-key: 0123456789abcdef and {TEST_KEY}") == "api-key: 0123456789abcdef and [REDACTED]"


def test_call_errors_and_batch_results_are_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    assert TEST_KEY not in str(CallError("bad_request", f"HTTP 400: key {TEST_KEY}"))
    assert "[REDACTED]" in CallError("x", f"Bearer {TEST_KEY}").detail
    line = json.dumps(
        {
            "custom_id": "k1",
            "response": {
                "status_code": 400,
                "body": {
                    "error": {"message": f"Invalid API key provided: {TEST_KEY}", "type": "invalid_request_error"}
                },
            },
        }
    )
    key, err = get_provider("openai/gpt-4.1")._batch_line(line)
    assert key == "k1" and isinstance(err, CallError) and err.reason == "bad_request"
    assert TEST_KEY not in str(err) and "[REDACTED]" in err.detail
    res = get_provider("anthropic/claude-opus-4")._batch_result(
        {
            "type": "errored",
            "error": {
                "type": "error",
                "error": {"type": "authentication_error", "message": f"bad x-api-key {TEST_KEY}"},
            },
        }
    )
    assert TEST_KEY not in str(res) and "[REDACTED]" in str(res)


def test_records_written_to_disk_lose_key_values(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    write_jsonl(tmp_path / "r.jsonl", [{"reason": f"echoed {TEST_KEY}", "text": "api-key: 0123456789"}])
    text = (tmp_path / "r.jsonl").read_text()
    assert TEST_KEY not in text and "[REDACTED]" in text and "api-key: 0123456789" in text


# -- where a key may go ---------------------------------------------------------------------------


def test_key_env_spec_syntax_round_trips():
    s = parse_model_spec("openai-compatible/m@https://h.example/v1?key_env=MY_SERVER_KEY")
    assert (s.model, s.base_url, s.key_env) == ("m", "https://h.example/v1", "MY_SERVER_KEY")
    assert str(s) == "openai-compatible/m@https://h.example/v1?key_env=MY_SERVER_KEY"
    assert parse_model_spec("openai/gpt-4.1?key_env=PROJECT2_KEY").key_env == "PROJECT2_KEY"
    assert parse_model_spec("openai/gpt-4.1").key_env is None
    with pytest.raises(ConfigError, match="key_env"):
        parse_model_spec("openai/m@http://h/v1?key_env=")
    with pytest.raises(ConfigError, match="key_env"):
        parse_model_spec("openai/m@http://h/v1?key_env=A B")
    # the variable's name is not part of the cache address: the same model answers alike
    assert (
        get_provider("openai/gpt-4.1?key_env=PROJECT2_KEY").cache_identity()
        == get_provider("openai/gpt-4.1").cache_identity()
    )


@pytest.fixture
def strict(monkeypatch):
    """Production settings: no loopback opt-in; every provider's key set."""
    monkeypatch.delenv(LOOPBACK_OPT_IN, raising=False)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.setenv(var, TEST_KEY)
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)


@pytest.mark.parametrize(
    ("spec", "var"),
    [
        ("openai/gpt-4.1", "OPENAI_API_KEY"),
        ("openai/gpt-4.1@https://api.openai.com/v1", "OPENAI_API_KEY"),
        ("anthropic/claude-opus-4", "ANTHROPIC_API_KEY"),
        ("anthropic/claude-opus-4@https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        ("azure/dep@https://myres.openai.azure.com", "AZURE_OPENAI_API_KEY"),
        ("openai-compatible/m@http://gpu-box:8000/v1", "OPENAI_COMPATIBLE_API_KEY"),
        ("openai/gpt-4.1@http://proxy.example/v1?key_env=PROXY_TOKEN", "PROXY_TOKEN"),
        ("anthropic/claude-opus-4@https://gw.example?key_env=PROXY_TOKEN", "PROXY_TOKEN"),
    ],
)
def test_keys_go_to_their_own_hosts_or_a_named_variable(strict, spec, var):
    assert get_provider(spec).key_var() == var


@pytest.mark.parametrize(
    ("spec", "fix"),
    [
        ("openai/gpt-4.1@http://evil.example/v1", "openai-compatible/gpt-4.1@http://evil.example/v1"),
        ("openai/gpt-4.1@http://api.openai.com/v1", "key_env="),  # not https
        ("openai/gpt-4.1@https://api.openai.com.evil.example/v1", "key_env="),
        ("anthropic/claude-opus-4@http://127.0.0.1:9", LOOPBACK_OPT_IN),  # loopback needs the opt-in
        ("azure/dep@https://evil.example", "key_env="),
        ("openai/gpt-4.1@https://evil.example/v1?key_env=OPENAI_API_KEY", "variable of its own"),
        ("openai-compatible/m@https://evil.example/v1?key_env=ANTHROPIC_API_KEY", "variable of its own"),
    ],
)
def test_a_provider_key_is_refused_elsewhere_with_the_fix(strict, spec, fix):
    with pytest.raises(ConfigError) as err:
        get_provider(spec).check_ready()
    assert fix in str(err.value)
    assert TEST_KEY not in str(err.value)


def test_azure_key_goes_to_the_configured_endpoint(strict, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "http://10.0.0.5:8080")
    assert get_provider("azure/dep").key_var() == "AZURE_OPENAI_API_KEY"
    assert get_provider("azure/dep@http://10.0.0.5:8080").key_var() == "AZURE_OPENAI_API_KEY"
    with pytest.raises(ConfigError):
        get_provider("azure/dep@http://10.0.0.6:8080").key_var()


def test_a_named_variable_must_be_set(strict, monkeypatch):
    monkeypatch.delenv("PROXY_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="PROXY_TOKEN is not set"):
        get_provider("openai-compatible/m@http://h/v1?key_env=PROXY_TOKEN").check_ready()


def test_a_refused_key_sends_nothing(srv, tmp_path, monkeypatch):
    monkeypatch.delenv(LOOPBACK_OPT_IN)
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is sent only to openai's own hosts"):
        r.run(calls(f"openai/gpt-4.1@{srv.openai_base}", ["hello"]))
    assert srv.stats()["requests"] == 0 and srv.stats()["by_path"] == {}
    monkeypatch.setenv("FAKE_SERVER_KEY", OTHER)  # the documented fix: a variable of its own
    [res] = r.run(calls(f"openai/gpt-4.1@{srv.openai_base}?key_env=FAKE_SERVER_KEY", ["hello"]))
    assert res.status == "ok" and res.response.text == "echo: hello"
    assert get_provider(f"openai/gpt-4.1@{srv.openai_base}?key_env=FAKE_SERVER_KEY").api_key() == OTHER


# -- end to end: a provider that echoes the key -----------------------------------------------------


@pytest.mark.parametrize("processes", [1, 2])
def test_an_echoed_key_reaches_no_result_cache_or_log(srv, tmp_path, monkeypatch, caplog, processes):
    monkeypatch.setenv("FAKE_SERVER_KEY", OTHER)
    srv.configure(faults=[{"match": "echo", "kind": "echo_key", "times": -1}])
    specs = [
        f"openai/gpt-4.1@{srv.openai_base}",
        f"anthropic/claude-opus-4@{srv.anthropic_base}",
        f"openai-compatible/m@{srv.openai_base}?key_env=FAKE_SERVER_KEY",
    ]
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, processes=processes, max_retries=0))
    try:
        with caplog.at_level(logging.DEBUG):
            out = r.run([c for s in specs for c in calls(s, ["echo this", "fine"])])
    finally:
        r.close()
    failed = [x for x in out if x.status == "failed"]
    assert [x.reason for x in failed] == ["bad_request"] * 3 and sum(x.status == "ok" for x in out) == 3
    for x in failed:
        assert "Invalid API key provided: [REDACTED]" in x.detail and no_key_in(x.detail, TEST_KEY, OTHER)
    assert no_key_in(caplog.text, TEST_KEY, OTHER)
    for f in tmp_path.iterdir():
        assert no_key_in(f.read_bytes().decode("utf-8", "replace"), TEST_KEY, OTHER), f


def test_a_fatal_echoed_key_is_redacted(srv, tmp_path):
    srv.configure(faults=[{"match": "", "kind": "echo_key", "status": 401, "times": -1}])
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    with pytest.raises(Exception) as err:
        r.run(calls(f"anthropic/claude-opus-4@{srv.anthropic_base}", ["hi"]))
    assert "HTTP 401" in str(err.value) and "[REDACTED]" in str(err.value) and no_key_in(str(err.value))


def _bench(tmp_path):
    for i in range(2):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(70 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")


def _params(tmp_path, srv, name):
    p = tmp_path / f"{name}.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "out": f"runs/{name}",
                "bench": "bench",
                "setups": [{"name": "k30", "model": f"openai/gpt-4.1@{srv.openai_base}"}],
                "judges": [{"name": "j", "model": f"openai/gpt-4.1@{srv.openai_base}"}],
                "llm": {"cache": f"cache-{name}.sqlite", "max_retries": 0},
            }
        )
    )
    return p


def test_cocoeval_run_writes_and_prints_no_echoed_key(srv, tmp_path):
    _bench(tmp_path)
    srv.configure(faults=[{"match": "", "kind": "echo_key", "times": -1}])  # every call: 400
    cmd = [sys.executable, "-m", "cocoeval", "run", str(_params(tmp_path, srv, "e400")), "--no-progress"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 3 and "exit status 3" in out.stderr, out.stderr  # failed calls: exit 3
    records = "".join(f.read_text() for f in (tmp_path / "runs" / "e400").rglob("*.jsonl"))
    assert "Invalid API key provided: [REDACTED]" in records  # the failures are recorded, redacted
    srv.reset()
    srv.configure(faults=[{"match": "", "kind": "echo_key", "status": 401, "times": -1}])
    cmd[4] = str(_params(tmp_path, srv, "e401"))
    fatal = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert fatal.returncode == 2 and "HTTP 401" in fatal.stderr and "[REDACTED]" in fatal.stderr
    for text in (out.stdout, out.stderr, fatal.stdout, fatal.stderr):
        assert no_key_in(text)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert no_key_in(f.read_bytes().decode("utf-8", "replace")), f


@pytest.mark.parametrize(("error", "rc"), [(RuntimeError, 1), (FatalLLMError, 2)])
def test_cli_prints_errors_redacted(monkeypatch, capsys, error, rc):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)

    def boom(_):
        raise error(f"proxy said: Authorization: Bearer {TEST_KEY}")

    class Parser:
        def parse_args(self, argv):
            return argparse.Namespace(func=boom)

    monkeypatch.setattr(cli, "build_parser", Parser)
    assert cli.main([]) == rc
    err = capsys.readouterr().err
    assert "proxy said: Authorization: [REDACTED]" in err and no_key_in(err)


def test_executed_notebook_outputs_are_redacted(tmp_path, monkeypatch):
    from cocoeval.notebooks.execute import redact_outputs

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {
                "cell_type": "code",
                "source": ["spec = 'openai/m@http://h/v1?key_env=MY_KEY'  # api_key: not-a-key"],
                "metadata": {},
                "execution_count": 1,
                "outputs": [
                    {
                        "output_type": "error",
                        "ename": "FatalLLMError",
                        "evalue": f"HTTP 401: bad key {TEST_KEY}",
                        "traceback": [f"Authorization: Bearer {TEST_KEY}"],
                    },
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {"text/plain": [f"x-api-key: {TEST_KEY}"], "image/png": png},
                    },
                ],
            }
        ],
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    redact_outputs(path)
    out = json.loads(path.read_text())
    cell = out["cells"][0]
    assert no_key_in(path.read_text()) and cell["source"] == nb["cells"][0]["source"]
    assert cell["outputs"][0]["evalue"] == "HTTP 401: bad key [REDACTED]"
    assert cell["outputs"][1]["data"] == {"text/plain": ["x-api-key: [REDACTED]"], "image/png": png}


def test_execute_notebooks_redacts_a_failed_notebook(tmp_path, monkeypatch):
    pytest.importorskip("papermill")
    from cocoeval.notebooks.execute import execute_notebooks

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    code = [
        "import os\n",
        "print('key', os.environ['OPENAI_API_KEY'])\n",
        "raise RuntimeError('proxy said ' + os.environ['OPENAI_API_KEY'])",
    ]
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
        "cells": [
            {
                "id": "params",
                "cell_type": "code",
                "source": ["params_file = ''\nfigures_dir = ''\nresamples = 1"],
                "metadata": {"tags": ["parameters"]},
                "execution_count": None,
                "outputs": [],
            },
            {"id": "leak", "cell_type": "code", "source": code, "metadata": {}, "execution_count": None, "outputs": []},
        ],
    }
    (tmp_path / "nbs").mkdir()
    (tmp_path / "nbs" / "leak.ipynb").write_text(json.dumps(nb))
    with pytest.raises(Exception, match="RuntimeError"):
        execute_notebooks(
            tmp_path / "p.yaml", tmp_path / "out", figures_dir=tmp_path / "fig", notebooks_dir=tmp_path / "nbs"
        )
    text = (tmp_path / "out" / "leak.ipynb").read_text()
    assert "key [REDACTED]" in text and "proxy said [REDACTED]" in text and no_key_in(text)


@pytest.mark.parametrize("userinfo", ["sk-abc123secret", "user:sk-abc123secret"])
def test_a_key_written_into_a_model_url_is_refused_and_never_stored(srv, tmp_path, capsys, monkeypatch, userinfo):
    host = srv.openai_base.split("://", 1)[1]
    spec = f"openai-compatible/m@http://{userinfo}@{host}"
    with pytest.raises(ConfigError, match="user name or key in its URL") as e:
        parse_model_spec(spec)
    assert "sk-abc123secret" not in str(e.value) and "?key_env=" in str(e.value) and "environment" in str(e.value)
    with pytest.raises(ConfigError, match="user name or key"):
        parse_model_spec(spec + "?key_env=MY_KEY")
    _bench(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "setups": [{"name": "k30", "model": spec}],
                "judges": [{"name": "j", "model": f"openai/gpt-4.1@{srv.openai_base}"}],
                "llm": {"cache": "cache.sqlite"},
            }
        )
    )
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(params), "--no-progress"]) != 0
    printed = capsys.readouterr()
    assert "user name or key in its URL" in printed.err and "sk-abc123secret" not in printed.out + printed.err
    assert (
        srv.stats()["requests"] == 0 and not (tmp_path / "runs").exists() and not (tmp_path / "cache.sqlite").exists()
    )
    for f in tmp_path.rglob("*"):  # the params file is the only place the key is
        if f.is_file() and f != params:
            assert "sk-abc123secret" not in f.read_bytes().decode("utf-8", "replace"), f


URL_KEY = "sk-proj-" + "Zq7" * 12  # a key shaped like an OpenAI project key, written into a model URL


@pytest.mark.parametrize("form", ["query", "path"])
@pytest.mark.parametrize("where", ["setup", "moderator_model", "judge"])
def test_a_key_in_a_model_urls_query_or_path_is_refused_before_anything_is_written(
    srv, tmp_path, capsys, monkeypatch, form, where
):
    keyed = (
        f"openai-compatible/fake@{srv.openai_base}?api_key={URL_KEY}"
        if form == "query"
        else f"openai-compatible/fake@{srv.openai_base}/{URL_KEY}"
    )
    plain = f"openai-compatible/fake@{srv.openai_base}"
    setup = {
        "name": "ag",
        "simulator": "agents",
        "model": keyed if where == "setup" else plain,
        "options": {"policy": "moderator", **({"moderator_model": keyed} if where == "moderator_model" else {})},
    }
    _bench(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "setups": [setup],
                "judges": [{"name": "j", "model": keyed if where == "judge" else plain}],
                "probes": {"targets": 1},
                "llm": {"cache": "cache.sqlite"},
            }
        )
    )
    monkeypatch.chdir(tmp_path)
    for command in (
        ["run", str(params), "--no-progress"],
        ["estimate", str(params)],
        ["check", str(params)],
        ["probe", str(params), "--no-progress"],
    ):
        assert cli.main(command) == 2, command
        printed = capsys.readouterr()
        assert "looks like a key" in printed.err and "?key_env=" in printed.err, (command, printed.err)
        assert ("'api_key'" if form == "query" else "path segment") in printed.err
        assert URL_KEY not in printed.out + printed.err and "Traceback" not in printed.err
    assert (
        srv.stats()["requests"] == 0 and not (tmp_path / "runs").exists() and not (tmp_path / "cache.sqlite").exists()
    )
    for f in tmp_path.rglob("*"):  # the params file is the only place the key is
        if f.is_file() and f != params:
            assert URL_KEY not in f.read_bytes().decode("utf-8", "replace"), f


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://host:8080/v1",
        "http://localhost:11434/v1/",
        "https://res.openai.azure.com/openai/deployments/gpt-4/?api-version=2024-06-01",
        "https://gateway.ai.cloudflare.com/v1/0123456789abcdef0123456789abcdef/my-gateway/openai",
        "https://api.runpod.ai/v2/vllm-abc123xyz456/openai/v1",
        "https://api-inference.huggingface.co/models/meta-llama/Meta-Llama-3.1-8B-Instruct/v1",
        "https://h.example/accounts/123e4567-e89b-12d3-a456-426614174000/ai/v1",
    ],
)
def test_model_urls_with_ports_deployments_versions_and_account_ids_are_not_taken_for_keys(url):
    assert parse_model_spec(f"openai-compatible/Qwen2.5-72B-Instruct-AWQ@{url}").base_url == url
    assert parse_model_spec(f"openai-compatible/m@{url}?key_env=MY_SERVER_KEY").key_env == "MY_SERVER_KEY"


@pytest.mark.parametrize(
    "url",
    [
        "http://h/v1?api_key=x",
        "http://h/v1?apiKey=abc",
        "http://h/v1?access_token=abc",
        "http://h/v1?token=abc",
        "http://h/v1?x-api-key=abc",
        "http://h/v1?client_secret=abc",
        "https://f.azurewebsites.net/api/chat?code=abc",
        "http://h/v1?subscription-key=abc",
        f"http://h/v1?anything={URL_KEY}",
        f"http://h/{URL_KEY}/v1",
        "http://h/v1/sk-ant-api03-abcdefghijklmnop",
        "http://h/v1/Xy7Qm2LpR9vT4wZ8nB3kD6fH",
        "http://h/v1/" + "0f" * 32,
        f"http://h/v1#{URL_KEY}",
    ],
)
def test_each_documented_shape_of_a_key_in_a_model_url_is_refused_without_echoing_it(url):
    with pytest.raises(ConfigError, match="looks like a key") as e:
        parse_model_spec(f"openai-compatible/m@{url}")
    secret = url.split("/v1", 1)[-1].lstrip("/?#").partition("=")[2] or url.rsplit("/", 1)[-1].lstrip("#")
    assert "[REDACTED]" in str(e.value) and (len(secret) < 12 or secret not in str(e.value))


def test_a_key_in_a_model_url_that_gets_past_the_check_is_redacted_in_the_journal_cache_usage_and_manifest(tmp_path):
    from cocoeval.llm.cache import CallCache
    from cocoeval.llm.usage import Ledger
    from cocoeval.run.rundir import Manifest, write_manifest

    spec = f"openai-compatible/m@http://127.0.0.1:9/v1/{URL_KEY}?token=abc"
    ledger = Ledger(journal=tmp_path / "usage.journal.jsonl")
    ledger.add("simulate", spec, None, cache_hit=False, failed=True)  # (its price lookup refuses the spec)
    cache = CallCache(tmp_path / "cache.sqlite")
    cache.put(
        "k" * 64,
        {"provider": "openai-compatible", "model": "m", "base_url": spec.split("@", 1)[1]},
        {"messages": []},
        {"text": "hi"},
    )
    cache.close()
    write_manifest(tmp_path, Manifest(params={"setups": [{"name": "s", "model": spec}]}, status="running"))
    journal = (tmp_path / "usage.journal.jsonl").read_text()
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    [ident] = [r[0] for r in db.execute("SELECT identity FROM calls")]
    db.close()
    manifest = (tmp_path / "manifest.json").read_text()
    rows = json.dumps(ledger.rows())
    for text in (journal, ident, manifest, rows):
        assert URL_KEY not in text and "token=abc" not in text and "[REDACTED]" in text, text
    assert "v1/[REDACTED]?token=[REDACTED]" in manifest
