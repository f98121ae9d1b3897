"""The one ``Registry`` behind providers, sources, simulators and analyses: entries registered by
a decorator, built-ins imported at the first look-up, an installed package's entry point loaded
once and checked to be of the kind, names listed without loading, unknown names refused with the
known ones."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from cocoeval.core.errors import ConfigError
from cocoeval.core.registry import NotOfKind, Registry

GROUP = "cocoeval.test_registry"


def _number(name: str, obj: object) -> int:
    if not isinstance(obj, int):
        raise NotOfKind("is not a number", "the entry point must name an int")
    return obj


@pytest.fixture
def offered(tmp_path, monkeypatch):
    """An installed package offering three entry points of ``GROUP``: a number, a text and one that
    cannot be imported; ``loads`` counts the imports of its module."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "reg_offers.py").write_text(
        textwrap.dedent("""\
        import builtins
        builtins.reg_offers_loads = getattr(builtins, "reg_offers_loads", 0) + 1
        SEVEN = 7
        TEXT = "seven"
        """)
    )
    info = site / "reg_offers-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reg-offers\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{GROUP}]\nseven = reg_offers:SEVEN\ntext = reg_offers:TEXT\ngone = no_such_module_here:X\n"
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    import builtins

    monkeypatch.setattr(builtins, "reg_offers_loads", 0, raising=False)
    yield
    sys.modules.pop("reg_offers", None)


def test_an_entry_registered_by_the_decorator_is_found_and_an_unknown_name_names_the_known_ones():
    reg: Registry[int] = Registry("number", make=_number)
    reg.register("one")(1)
    reg.add("two", 2)
    assert reg.get("one") == 1 and reg.find("three") is None and "two" in reg
    assert reg.names() == ["one", "two"] and reg.entries() == {"one": 1, "two": 2}
    with pytest.raises(ConfigError, match=r"unknown number 'three'; known: one, two"):
        reg.get("three")
    with pytest.raises(NotOfKind):
        reg.add("bad", "not a number")
    reg.forget("one")
    assert reg.names() == ["two"]


def test_the_built_in_entries_register_when_first_looked_up():
    from cocoeval.llm.base import PROVIDERS
    from cocoeval.sources import SOURCES

    assert {"openai", "anthropic", "local"} <= set(PROVIDERS.names())
    assert {"qmsum", "chat"} <= set(SOURCES.names())


def test_an_entry_point_is_listed_without_loading_and_loaded_once(offered):
    import builtins

    reg: Registry[int] = Registry("number", group=GROUP, make=_number)
    assert reg.names() == ["gone", "seven", "text"] and builtins.reg_offers_loads == 0  # listed, none loaded
    assert reg.get("seven") == 7 and reg.get("seven") == 7
    assert builtins.reg_offers_loads == 1 and reg.entries() == {"seven": 7}
    assert reg.find("nobody") is None and reg.find("nobody") is None  # asked of the packages once


def test_an_entry_point_of_the_wrong_kind_or_that_cannot_be_imported_is_named(offered):
    reg: Registry[int] = Registry("number", group=GROUP, make=_number)
    with pytest.raises(ConfigError, match=r"number plugin 'text' \(reg_offers:TEXT\) is not a number") as e:
        reg.get("text")
    assert e.value.hint == "the entry point must name an int"
    with pytest.raises(
        ConfigError,
        match=r"number plugin 'gone' \(no_such_module_here:X\) cannot be loaded: "
        r"ModuleNotFoundError",
    ):
        reg.get("gone")


def test_the_check_runs_on_every_look_up_wherever_the_entry_came_from():
    def odd_only(name: str, n: int) -> None:
        if n % 2 == 0:
            raise ConfigError(f"number {name!r} is even", hint="register an odd one")

    reg: Registry[int] = Registry(
        "number", make=_number, check=odd_only, unknown=("no number named {name!r}", "use one of: {known}")
    )
    reg.add("three", 3)
    reg.add("four", 4)
    assert reg.get("three") == 3
    with pytest.raises(ConfigError, match="'four' is even"):
        reg.get("four")
    with pytest.raises(ConfigError, match="no number named 'five'") as e:
        reg.get("five")
    assert e.value.hint == "use one of: four, three"
