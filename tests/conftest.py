from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "qmsum").is_dir() or not (SHARED_DATA / "iq2-corpus").is_dir():
        pytest.skip(f"real human data not present at {SHARED_DATA} (only in the project's "
                    "development checkout; see its README)")
    return SHARED_DATA


def write_json(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def qmsum_meeting(n: int, speakers=("Project Manager", "Marketing", "User Interface")) -> dict:
    return {
        "topic_list": [{"topic": "Budget", "relevant_text_span": [["0", str(n - 1)]]}],
        "meeting_transcripts": [
            {"speaker": speakers[i % len(speakers)], "content": f"Turn number {i} about the budget {{vocalsound}} ."}
            for i in range(n)
        ],
    }


TEST_KEY = "sk-cocoeval-test-" + "Q7" * 16
"""A fake API key: tests check it never reaches caches, logs or outputs."""


@pytest.fixture(autouse=True, scope="session")
def _keys_may_go_to_loopback():
    """Tests point ``openai/...@http://127.0.0.1:PORT`` and ``anthropic/...`` specs at the
    loopback fake server with fake keys in the environment: the documented opt-in lets a
    provider's key go to a loopback URL (without it, a provider's key goes to its own hosts only;
    tests/llm/test_secrets.py checks that rule with this variable removed). Subprocesses the tests
    start (``python -m cocoeval run``, worker processes) inherit it. Session-wide, so that
    module-scoped fixtures that run the pipeline have it too; a test that removes it with
    monkeypatch gets it back afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COCOEVAL_ALLOW_KEY_TO_LOOPBACK", "1")
        yield


@pytest.fixture(autouse=True, scope="session")
def _cache_dir_of_the_session(tmp_path_factory):
    """The linked chart's JavaScript bundle (``notebooks.context.enable_offline``) is kept in a
    folder of this test session, never in the user's ``~/.cache``; kernels the tests start share it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COCOEVAL_CACHE_DIR", str(tmp_path_factory.mktemp("cocoeval-cache")))
        yield


@pytest.fixture(scope="module")
def server():
    """One fake provider server (OpenAI and Anthropic wire formats) per test module."""
    from tests.fakes.server import FakeServer

    with FakeServer() as srv:
        yield srv


@pytest.fixture
def srv(server, monkeypatch):
    """The module's fake server, reset (stats and script), with fake keys in the environment."""
    server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    return server


def cached_keys(path: Path) -> set[str]:
    """The keys of the calls a call cache holds (empty while it does not exist or is being
    created): how the kill and interrupt tests see which calls completed."""
    if not path.exists():
        return set()
    try:
        db = sqlite3.connect(path, timeout=30)
        try:
            return {r[0] for r in db.execute("SELECT key FROM calls")}
        finally:
            db.close()
    except sqlite3.OperationalError:
        return set()
