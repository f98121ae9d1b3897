"""The runner's cost cap (``LLMConfig.max_usd``) and a model's own price (``LLMConfig.price``),
against the loopback OpenAI-wire fake server, which reports usage."""

from __future__ import annotations

import pydantic
import pytest

from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
from cocoeval.llm.errors import ConfigError, CostCapReached

PRICE = {"input": 1000.0, "cached_input": 1000.0, "output": 1000.0}


def calls(model: str, n: int, twice: bool = False) -> list[Call]:
    prompts = [f"question {i} " + "x" * 200 for i in range(n)]
    if twice:
        prompts += prompts
    return [
        Call(
            model=model,
            stage="test",
            tag=p[:12],
            request=GenerateRequest(messages=[Message(role="user", content=p)], max_tokens=10),
        )
        for p in prompts
    ]


def runner(tmp_path, cap: float | None, concurrency: int = 1, price: bool = True, processes: int = 1) -> Runner:
    return Runner(
        LLMConfig(
            cache=str(tmp_path / "c.sqlite"),
            progress=False,
            concurrency=concurrency,
            processes=processes,
            max_usd=cap,
            price={"openai-compatible/fake": PRICE} if price else {},
        )
    )


@pytest.mark.parametrize(("concurrency", "processes"), [(1, 1), (4, 1), (4, 2)])
def test_the_runner_stops_sending_at_the_cap_and_a_larger_cap_sends_only_the_rest(
    srv, tmp_path, concurrency, processes
):
    model = f"openai-compatible/fake@{srv.openai_base}"
    r = runner(tmp_path, 0.3, concurrency, processes=processes)
    with pytest.raises(CostCapReached) as e:
        r.run(calls(model, 20, twice=True))
    t = r.ledger.totals()
    sent = srv.stats()["requests"]
    r.close()
    per_call = t["cost_usd"] / sent
    assert 0 < sent < 20 and r.sent == sent and e.value.not_sent > 0
    assert t["cost_usd"] >= 0.3 and t["cost_usd"] - 0.3 < concurrency * per_call * 1.5
    assert e.value.reason == f"cost cap reached: ${t['cost_usd']:.4f} of $0.3000"
    r = runner(tmp_path, 100.0, concurrency, processes=processes)
    res = r.run(calls(model, 20, twice=True))
    r.close()
    assert all(x.status == "ok" for x in res) and srv.stats()["requests"] == 20  # none sent twice


def test_a_cap_with_a_model_of_unknown_price_is_refused_by_the_runner_before_sending(srv, tmp_path):
    r = runner(tmp_path, 1.0, price=False)
    with pytest.raises(ConfigError, match=r"price of openai-compatible/fake@.* is unknown"):
        r.run(calls(f"openai-compatible/fake@{srv.openai_base}", 3))
    r.close()
    assert srv.stats()["requests"] == 0


def test_an_answer_without_usage_under_a_cap_stops_the_run_saying_its_cost_is_unknown(srv, tmp_path):
    srv.configure(faults=[{"match": "question", "kind": "usage", "times": -1}])
    r = runner(tmp_path, 100.0)
    with pytest.raises(CostCapReached, match="cost of 1 call"):
        r.run(calls(f"openai-compatible/fake@{srv.openai_base}", 5))
    r.close()
    assert srv.stats()["requests"] == 1


def test_a_cap_is_refused_with_batch_and_a_price_key_must_be_a_model_spec():
    with pytest.raises(pydantic.ValidationError, match="cannot be stopped part-way"):
        LLMConfig(max_usd=1.0, batch=True)
    with pytest.raises(pydantic.ValidationError, match="not PROVIDER/MODEL"):
        LLMConfig(price={"gpt-4.1": PRICE})
    with pytest.raises(pydantic.ValidationError):
        LLMConfig(price={"openai/x": {**PRICE, "input": -1}})


def test_a_price_given_for_a_spec_prices_it_at_any_url_and_before_the_table():
    table = LLMConfig(
        price={"openai-compatible/fake": PRICE, "openai/gpt-4.1@http://127.0.0.1:9/v1?key_env=K": PRICE}
    ).price_table()
    assert table.price_for("openai-compatible/fake@http://a:1/v1").input == 1000.0
    assert table.price_for("openai-compatible/other@http://a:1/v1") is None
    assert table.price_for("openai/gpt-4.1@http://127.0.0.1:9/v1").input == 1000.0
    assert table.price_for("openai/gpt-4.1").input == 2.0  # the table's, elsewhere
