from __future__ import annotations

import logging
import os

import pytest

from cocoeval import ConfigError
from cocoeval.llm import (
    GenerateRequest,
    Ledger,
    Message,
    PriceTable,
    Usage,
    count_tokens,
    estimate,
    get_provider,
    install_log_redaction,
    parse_model_spec,
    redact,
    request_key,
)


def req(**kw) -> GenerateRequest:
    return GenerateRequest(messages=[Message(role="system", content="sys"), Message(role="user", content="hi")], **kw)


def test_model_specs():
    s = parse_model_spec("openai-compatible/qwen2.5-7b@http://127.0.0.1:8000/v1")
    assert (s.provider, s.model, s.base_url) == ("openai-compatible", "qwen2.5-7b", "http://127.0.0.1:8000/v1")
    assert str(s) == "openai-compatible/qwen2.5-7b@http://127.0.0.1:8000/v1"
    s = parse_model_spec("openai/ft:gpt-4.1-2025-04-14:org::abc")
    assert s.model == "ft:gpt-4.1-2025-04-14:org::abc" and s.base_url is None
    assert parse_model_spec("local//data/m.gguf").model == "/data/m.gguf"
    with pytest.raises(ConfigError, match="unknown provider"):
        parse_model_spec("bard/x")
    with pytest.raises(ConfigError, match="PROVIDER/MODEL"):
        parse_model_spec("gpt-4.1")


@pytest.mark.parametrize(
    "spec,dropped",
    [
        ("openai/gpt-4.1", []),
        ("openai/o4-mini", ["temperature", "presence_penalty"]),
        ("openai/gpt-5.1", ["temperature", "presence_penalty"]),
        ("anthropic/claude-opus-4-20250514", ["presence_penalty"]),
        ("openai-compatible/m@http://127.0.0.1:1/v1", []),
    ],
)
def test_unsupported_parameters_are_dropped_and_named(spec, dropped):
    p = get_provider(spec)
    prepared, names = p.prepare(req(temperature=0.7, presence_penalty=2.0))
    assert names == dropped
    for n in dropped:
        assert getattr(prepared, n) is None
    if "temperature" not in dropped:
        assert prepared.temperature == 0.7


def test_reasoning_effort_only_for_reasoning_models():
    assert get_provider("openai/gpt-4.1").prepare(req(reasoning_effort="low"))[1] == ["reasoning_effort"]
    assert get_provider("openai/o4-mini").prepare(req(reasoning_effort="low"))[1] == []
    kw = get_provider("openai/o4-mini").kwargs(req(max_tokens=50))
    assert kw["max_completion_tokens"] == 50 and "max_tokens" not in kw


def test_structured_output_shapes():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    kw = get_provider("openai/gpt-4.1").kwargs(req(json_schema=schema))
    assert kw["response_format"]["type"] == "json_schema" and kw["response_format"]["json_schema"]["strict"]
    kw = get_provider("llama-cpp-server/m@http://x/v1").kwargs(req(json_schema=schema))
    assert kw["response_format"] == {"type": "json_object", "schema": schema}
    kw = get_provider("anthropic/claude-x").kwargs(req(json_schema=schema, cache_prefix_messages=1))
    assert kw["tools"][0]["input_schema"] == schema and kw["tool_choice"]["name"] == "answer"
    assert "cache_control" not in kw["system"][0]  # under Anthropic's minimum cacheable length
    assert kw["messages"] == [{"role": "user", "content": "hi"}]


def test_cache_key_covers_what_changes_the_output_and_nothing_else(monkeypatch):
    ident = get_provider("openai/gpt-4.1").cache_identity()
    base = request_key(ident, req())
    assert base == request_key(ident, req())
    assert base != request_key(ident, req(sample=1))
    assert base != request_key(ident, req(temperature=0.5))
    assert base == request_key(ident, req(cache_prefix_messages=1))  # layout hint, not output
    other = get_provider("openai/gpt-4.1@http://127.0.0.1:9/v1").cache_identity()
    assert base != request_key(other, req())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-a-very-secret-key-0001")
    assert "sk-a-very" not in str(get_provider("openai/gpt-4.1").cache_identity())
    assert request_key(get_provider("openai/gpt-4.1").cache_identity(), req()) == base
    # the documented address, unchanged since the first caches were written: sha256 of the
    # canonical JSON of {"identity", "request"} (caches from earlier versions keep their hits)
    import hashlib

    from cocoeval.llm.base import canonical_json

    payload = {
        "identity": ident,
        "request": req().model_dump(mode="json", exclude={"cache_prefix_messages", "cache_points", "cache_group"}),
    }
    assert base == hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def test_missing_keys_are_config_errors(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_provider("openai/gpt-4.1").check_ready()
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        get_provider("anthropic/claude-opus-4").check_ready()
    with pytest.raises(ConfigError, match="@http"):
        get_provider("openai-compatible/m").check_ready()
    with pytest.raises(ConfigError, match="not found"):
        get_provider("local//nope/model.gguf").check_ready()


def test_prices_and_ledger():
    prices = PriceTable.load()
    p = prices.price_for("openai/gpt-4.1-mini-2025-04-14")
    assert p.input == 0.40  # longest prefix wins over gpt-4.1
    assert prices.price_for("openai/my-own-model") is None
    assert prices.price_for("local/smollm2").input == 0
    u = Usage(input_tokens=1_000_000, cached_input_tokens=500_000, output_tokens=100_000)
    assert prices.cost("openai/gpt-4.1", u) == pytest.approx(0.5 * 2.0 + 0.5 * 0.5 + 0.1 * 8.0)
    assert prices.cost("openai/gpt-4.1", u, batch=True) == pytest.approx(0.5 * 2.05)
    led = Ledger(prices)
    led.add("judge", "openai/gpt-4.1", u, cache_hit=False)
    led.add("judge", "openai/gpt-4.1", u, cache_hit=True)
    led.add("judge", "openai/unknown", u, cache_hit=False)
    rows = {r["model"]: r for r in led.rows()}
    assert rows["openai/gpt-4.1"]["calls"] == 2 and rows["openai/gpt-4.1"]["cache_hits"] == 1
    assert rows["openai/gpt-4.1"]["input_tokens"] == 1_000_000
    assert rows["openai/unknown"]["cost_unknown_calls"] == 1
    assert led.totals()["cost_usd"] == pytest.approx(2.05)


def test_a_model_the_table_does_not_name_has_an_unknown_price_not_its_prefixs():
    """A longer name is another model (often at another price): never priced as its prefix."""
    prices = PriceTable.load()
    for spec in ("openai/gpt-5.2", "openai/gpt-4.1-turbo", "anthropic/claude-opus-4-7", "azure/gpt-4.1-prod"):
        assert prices.price_for(spec) is None, spec
    # named ones at their own price, dated snapshots and fine-tuned names at their model's
    assert prices.price_for("openai/gpt-5-nano").input == 0.05  # not gpt-5's 1.25
    assert prices.price_for("anthropic/claude-opus-4-5-20251101").input == 5.0  # not claude-opus-4's 15
    assert prices.price_for("openai/o3-mini-2025-01-31").input == 1.10  # not o3's 2.00
    assert prices.price_for("openai/gpt-4o-2024-05-13").output == 15.0  # not gpt-4o's 10
    assert prices.price_for("openai/gpt-4o-2024-08-06").output == 10.0
    for spec, price in (
        ("openai/gpt-4.1-2025-04-14", 2.0),
        ("openai/gpt-5.1-chat-latest", 1.25),
        ("openai/o4-mini-2025-04-16", 1.10),
        ("anthropic/claude-opus-4-20250514", 15.0),
        ("openai/ft:gpt-4.1-2025-04-14:org:cocoeval-k1:abc", 3.0),
        ("openai/ft:gpt-4.1-mini-2025-04-14:org::abc", 0.80),
        ("anthropic/claude-opus-4-0", 15.0),
        ("anthropic/claude-haiku-4-5-20251001", 1.0),
    ):
        assert prices.price_for(spec).input == price, spec
    led = Ledger(prices)
    assert led.add("judge", "openai/gpt-5.2", Usage(input_tokens=10), cache_hit=False) is None
    assert led.totals()["cost_unknown_calls"] == 1


def test_estimate():
    calls = [("openai/gpt-4.1", req(max_tokens=100))] * 10
    e = estimate(calls)
    assert e.calls == 10 and e.output_tokens == 1000
    assert e.input_tokens == 10 * (count_tokens("sys") + count_tokens("hi") + 8)
    assert e.cost_usd == pytest.approx((e.input_tokens * 2.0 + 1000 * 8.0) / 1e6)
    assert estimate([("openai/mystery", req())]).cost_usd is None
    assert count_tokens("x" * 400) in range(50, 201)


def test_log_redaction(monkeypatch, caplog):
    secret = "sk-test-" + "Z" * 30
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    install_log_redaction()
    with caplog.at_level(logging.INFO):
        logging.getLogger("openai._base_client").info("headers: %s", {"Authorization": f"Bearer {secret}"})
    assert secret not in caplog.text and "[REDACTED]" in caplog.text
    assert redact(f"key={secret}") == "key=[REDACTED]"
    assert os.environ["OPENAI_API_KEY"] == secret


def test_openai_strict_schemas_lose_unsupported_keywords_and_say_so():
    schema = {
        "type": "object",
        "properties": {"e": {"type": "string", "maxLength": 80}},
        "required": ["e"],
        "additionalProperties": False,
    }
    prepared, dropped = get_provider("openai/gpt-4.1").prepare(req(json_schema=schema))
    assert dropped == ["json_schema.maxLength"] and "maxLength" not in str(prepared.json_schema)
    _, dropped = get_provider("openai/gpt-4.1").prepare(req(json_schema={**schema, "minItems": 2}))
    assert dropped == ["json_schema.maxLength", "json_schema.minItems"]
    prepared, dropped = get_provider("llama-cpp-server/m@http://x/v1").prepare(req(json_schema=schema))
    assert dropped == [] and prepared.json_schema == schema
