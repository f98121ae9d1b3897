"""The in-process scripted model (``mock/...``) through the real runner: cache, usage, resume."""

from __future__ import annotations

import json

import pytest

from cocoeval.core.errors import ConfigError
from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
from cocoeval.llm.base import get_provider, provider_class
from cocoeval.llm.providers.mock import MockProvider
from cocoeval.llm.usage import PriceTable


@pytest.fixture(autouse=True)
def _fresh_counts():
    MockProvider.reset()
    yield
    MockProvider.reset()


def script(tmp_path, answers, name="script.yaml"):
    p = tmp_path / name
    p.write_text(json.dumps({"answers": answers}))
    return f"mock/{p}"


def calls(model, prompts, **kw):
    return [
        Call(
            model=model,
            stage="test",
            tag=p,
            request=GenerateRequest(
                messages=[Message(role="system", content="Be brief."), Message(role="user", content=p)], **kw
            ),
        )
        for p in prompts
    ]


def runner(tmp_path, **kw):
    return Runner(LLMConfig(**{"cache": str(tmp_path / "cache.sqlite"), "progress": False, **kw}))


def test_the_mock_is_a_free_in_process_provider_needing_no_key():
    cls = provider_class("mock")
    assert cls is MockProvider and (cls.billing, cls.in_process, cls.batch, cls.prompt_caching) == (
        "free",
        True,
        False,
        None,
    )
    get_provider("mock/echo").check_ready()  # no key, no file


def test_echo_answers_the_last_message_and_counts_tokens_as_the_fake_server_does(tmp_path):
    [res] = runner(tmp_path).run(calls("mock/echo", ["hello there"]))
    assert res.status == "ok" and res.response.text == "echo: hello there"
    assert res.response.finish_reason == "stop" and res.cost_usd == 0
    # "Be brief." + "hello there" = 20 characters -> 5 tokens; the answer's 17 -> 5
    assert (res.response.usage.input_tokens, res.response.usage.output_tokens) == (5, 5)


def test_the_first_matching_answer_with_times_left_answers(tmp_path):
    model = script(
        tmp_path,
        [
            {"match": "budget", "context": "Be brief", "text": "first", "times": 1},
            {"match": "budget", "text": "then this"},
            {"match": "", "context": "not in the request", "text": "never"},
        ],
    )
    out = runner(tmp_path).run(calls(model, ["the budget", "the budget again", "other"]))
    assert [r.response.text for r in out] == ["first", "then this", "echo: other"]


def test_times_are_counted_across_runs_of_the_same_script_until_reset(tmp_path):
    """A simulation asks the runner once per step: an answer's times span them."""
    model = script(tmp_path, [{"match": "", "text": "once", "times": 1}])
    assert runner(tmp_path, cache=None).run(calls(model, ["a"]))[0].response.text == "once"
    assert runner(tmp_path, cache=None).run(calls(model, ["b"]))[0].response.text == "echo: b"
    MockProvider.reset()
    assert runner(tmp_path, cache=None).run(calls(model, ["c"]))[0].response.text == "once"


def test_answers_are_cached_and_a_rerun_is_served_from_the_cache(tmp_path):
    model = script(tmp_path, [{"match": "", "text": "once", "times": 1}])
    first = runner(tmp_path).run(calls(model, ["a"]))
    again = runner(tmp_path).run(calls(model, ["a"]))  # the script's one answer is used up
    assert first[0].response.text == again[0].response.text == "once"
    assert (first[0].cache_hit, again[0].cache_hit) == (False, True)


def test_an_edited_script_is_another_model_for_the_cache(tmp_path):
    model = script(tmp_path, [{"match": "", "text": "old"}])
    assert runner(tmp_path).run(calls(model, ["a"]))[0].response.text == "old"
    script(tmp_path, [{"match": "", "text": "new"}])
    res = runner(tmp_path).run(calls(model, ["a"]))[0]
    assert res.response.text == "new" and not res.cache_hit


def test_a_scripted_error_fails_the_call_with_its_reason_and_is_not_cached(tmp_path):
    model = script(tmp_path, [{"match": "long", "error": "context_length", "times": 1}])
    r = runner(tmp_path)
    [res] = r.run(calls(model, ["too long"]))
    assert (res.status, res.reason) == ("failed", "context_length") and res.cost_usd == 0
    [res] = r.run(calls(model, ["too long"]))  # tried again, not served a cached failure
    assert res.status == "ok" and res.response.text == "echo: too long"


def test_an_answer_longer_than_max_tokens_is_cut_with_finish_reason_length(tmp_path):
    model = script(tmp_path, [{"match": "", "text": "word " * 100}])
    [res] = runner(tmp_path).run(calls(model, ["go"], max_tokens=5))
    assert res.response.text == ("word " * 4) and res.response.finish_reason == "length"


def test_the_usage_ledger_counts_the_mocks_tokens_at_no_cost(tmp_path):
    r = runner(tmp_path)
    r.run(calls("mock/echo", ["a", "b"]))
    t = r.ledger.totals()
    assert t["calls"] == 2 and t["input_tokens"] > 0 and t["cost_usd"] == 0
    assert PriceTable.load().cost("mock/echo", r.run(calls("mock/echo", ["a"]))[0].usage) == 0


def test_a_yaml_script_works_and_a_bad_one_is_refused_before_any_call(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("answers:\n  - match: hi\n    text: 'Alice: hello'\n")
    assert runner(tmp_path).run(calls(f"mock/{p}", ["hi"]))[0].response.text == "Alice: hello"
    for text, needle in [
        ("answers:\n  - match: hi\n    txt: x\n", "txt"),
        ("answers: [\n", "not a valid script"),
        ("answers:\n  - times: -1\n", "times"),
    ]:
        p.write_text(text)
        with pytest.raises(ConfigError, match=needle):
            get_provider(f"mock/{p}").check_ready()
    with pytest.raises(ConfigError, match="not found"):
        get_provider(f"mock/{tmp_path / 'missing.yaml'}").check_ready()
