"""One place per concept: provider capabilities on the provider class, the conversation kind set
by the loader, and providers/sources added by other packages through entry points."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import textwrap

import pytest

from cocoeval import ConfigError
from cocoeval.core.schema import Instance, is_human_ai
from cocoeval.llm.base import (
    PROVIDERS,
    GenerateRequest,
    Message,
    available_providers,
    get_provider,
    provider_class,
)
from cocoeval.llm.usage import PriceTable, Usage
from cocoeval.sources import SOURCES, available_sources, load_conversations

PLUGIN = '''
from pathlib import Path

from cocoeval.llm.base import GenerateResponse, Provider, Usage
from cocoeval.core.schema import Conversation, Turn


class EchoProvider(Provider):
    """Answers with the last message, reversed; runs in this process and bills nothing."""

    billing = "free"
    in_process = True

    async def generate(self, request):
        text = request.messages[-1].content[::-1]
        return GenerateResponse(text=text, usage=Usage(input_tokens=3, output_tokens=3))


class LinesLoader:
    """One conversation per .lines file: ``speaker: text`` per line; a human-AI chat."""

    def files(self, path):
        return sorted(Path(path).glob("*.lines"))

    def load_file(self, path, dataset, report):
        turns = []
        for i, line in enumerate(path.read_text().splitlines()):
            speaker, _, text = line.partition(": ")
            turns.append(Turn(speaker=speaker, text=text, source_index=i))
        yield Conversation(id=path.stem, dataset=dataset or "lines", source_format="lines",
                           source_file=str(path), turns=turns, kind="human_ai")


class NotAProvider:
    pass
'''


@pytest.fixture
def plugin_dist(tmp_path, monkeypatch):
    """An installed package offering entry points: a module and its dist-info on sys.path."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "cocoeval_testplugin.py").write_text(PLUGIN)
    info = site / "cocoeval_testplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cocoeval-testplugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""\
        [cocoeval.providers]
        echo-plugin = cocoeval_testplugin:EchoProvider
        broken-plugin = cocoeval_testplugin:NotAProvider

        [cocoeval.sources]
        lines = cocoeval_testplugin:LinesLoader
        """)
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    forget = [(PROVIDERS, "echo-plugin"), (PROVIDERS, "broken-plugin"), (PROVIDERS, "nope-plugin"), (SOURCES, "lines")]
    for registry, name in forget:  # asked of the installed packages again, now that this one is
        registry.forget(name)
    yield site
    for registry, name in forget:
        registry.forget(name)
    sys.modules.pop("cocoeval_testplugin", None)


def test_builtin_provider_capabilities_live_on_the_class():
    caps = {
        n: (c.prompt_caching, c.billing, c.batch, c.in_process)
        for n in ("openai", "azure", "anthropic", "openai-compatible", "llama-cpp-server", "local")
        if (c := provider_class(n)) is not None
    }
    assert caps == {
        "openai": ("openai_prefix", "per_token", True, False),
        "azure": ("openai_prefix", "per_token", True, False),
        "anthropic": ("anthropic_breakpoints", "per_token", True, False),
        "openai-compatible": (None, "per_token", False, False),
        "llama-cpp-server": (None, "free", False, False),
        "local": (None, "free", False, True),
    }
    for n, (_, _, batch, _) in caps.items():
        assert (provider_class(n).batch_limits is not None) == batch, n


def test_price_table_bills_by_the_provider_class():
    prices = PriceTable.load()
    use = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert prices.cost("local/smollm2", use) == 0
    assert prices.cost("llama-cpp-server/gpt-4.1@http://127.0.0.1:1/v1", use) == 0
    # the same model name behind a paid provider is priced by prices.yaml
    assert prices.cost("openai/gpt-4.1", use) > 0
    assert prices.cost("openai-compatible/gpt-4.1@http://127.0.0.1:1/v1", use) > 0
    # an old price table with free_providers still loads (the key is ignored)
    old = PriceTable.model_validate(
        {"free_providers": ["openai"], "models": {"gpt-4.1": {"input": 1, "cached_input": 1, "output": 1}}}
    )
    assert old.cost("openai/gpt-4.1", use) == 2


def test_provider_from_an_entry_point(plugin_dist):
    assert "echo-plugin" in available_providers()
    prov = get_provider("echo-plugin/any-model")
    assert type(prov).__name__ == "EchoProvider" and prov.name == "echo-plugin"
    out = asyncio.run(prov.generate(GenerateRequest(messages=[Message(role="user", content="abc")])))
    assert out.text == "cba"
    assert PriceTable.load().cost("echo-plugin/any-model", out.usage) == 0  # billing = "free"
    from cocoeval.llm.workers import worker_module

    assert worker_module(prov) is None  # in_process: never sent from a worker process


def test_bad_or_missing_provider_plugin_is_a_clear_error(plugin_dist):
    with pytest.raises(ConfigError, match="not a Provider subclass"):
        get_provider("broken-plugin/m")
    with pytest.raises(ConfigError, match="unknown provider 'nope-plugin'"):
        get_provider("nope-plugin/m")


def test_source_from_an_entry_point_sets_the_kind(plugin_dist, tmp_path):
    data = tmp_path / "chats"
    data.mkdir()
    (data / "c1.lines").write_text("user: hi there\nbot: hello\nuser: bye\n")
    assert "lines" in available_sources()
    (conv,) = load_conversations(f"lines:{data}")
    assert conv.id == "c1" and conv.kind == "human_ai" and is_human_ai(conv)
    assert [t.speaker for t in conv.turns] == ["user", "bot", "user"]


def test_the_loaders_set_the_kind_and_old_files_fall_back(tmp_path):
    from .conftest import qmsum_meeting, write_json

    write_json(tmp_path / "q" / "m1.json", qmsum_meeting(6))
    (conv,) = load_conversations(f"qmsum:{tmp_path / 'q'}")
    assert conv.kind == "multiparty" and not is_human_ai(conv)

    inst = {
        "id": "d/c/0",
        "dataset": "d",
        "split": "eval",
        "metadata": {"goals": [], "participants": []},
        "summary": {"text": ""},
        "history": [{"speaker": "u", "text": "a", "source_index": 0}],
        "reference": [{"speaker": "b", "text": "b", "source_index": 1}],
        "provenance": {
            "source_file": "f",
            "source_format": "chat",
            "conversation_id": "c",
            "start_index": 0,
            "seed": 0,
            "builder_version": "0",
        },
    }
    old = Instance.model_validate(inst)  # written before ``kind``: read from the loader's name
    assert old.kind is None and is_human_ai(old)
    explicit = Instance.model_validate({**inst, "kind": "multiparty"})
    assert not is_human_ai(explicit) and json.loads(explicit.to_json())["kind"] == "multiparty"
