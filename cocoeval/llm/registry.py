"""One registry of named things other code looks up: providers, source formats, simulators and
analyses each hold one ``Registry``.

A registry knows the entries registered in this process (``register``, a decorator; the
built-in ones register when their module, ``builtins``, is imported on the first look-up) and,
when it has an entry-point ``group``, those installed packages offer: an entry point is loaded on
its first look-up, once, and checked to be of the registry's kind (``make``). A name no one offers
is looked up in the installed packages once, not per call. ``check`` runs on every look-up: what
breaks the contract of the kind (a simulator plugin's) is refused wherever it was registered.

It lives in the LLM layer, which imports nothing of the package, so that every layer may use it
(``cocoeval.core.registry`` re-exports it)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import ConfigError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

T = TypeVar("T")

__all__ = ["NotOfKind", "Registry", "Unloadable"]


class NotOfKind(TypeError):
    """Raised by a registry's ``make`` for an object that is not of its kind: ``problem`` completes
    "<kind> plugin NAME (module:attr) ..." (e.g. "is not a Provider subclass"), ``hint`` says what
    the entry point must name."""

    def __init__(self, problem: str, hint: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.hint = hint


class Unloadable(Exception):
    """Raised by a registry's ``load`` when an entry point cannot be loaded, its text the whole
    reason (the default loader describes the exception importing raised)."""


def _load(ep: EntryPoint) -> Any:
    try:
        return ep.load()
    except Exception as e:
        raise Unloadable(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from None


def _same(name: str, obj: Any) -> Any:
    return obj


class Registry(Generic[T]):
    """Entries of one kind by name, in the order registered.

    ``kind``: how messages name an entry ("provider", "simulator"); ``group``: the entry-point
    group installed packages offer entries under (None: only entries registered in this process);
    ``builtins``: the module whose import registers the built-in entries, imported at the first
    look-up (so that importing the registry alone stays cheap); ``make(name, obj)``: the entry
    stored for what a decorator or an entry point gives (e.g. a loader class instantiated, a class
    given its name), raising ``NotOfKind`` when it is not of this kind; ``check(name, entry)``:
    raises a ConfigError when the entry cannot be used, on every ``get``; ``load(ep)``: how an entry
    point is imported (raising ``Unloadable``; the simulators bound it in time); ``unknown``: the
    message and hint of an unknown name, formatted with ``kind``, ``name``, ``known`` (the names,
    comma-separated) and ``group``."""

    def __init__(
        self,
        kind: str,
        *,
        group: str | None = None,
        builtins: str | None = None,
        make: Callable[[str, Any], T] = _same,
        check: Callable[[str, T], None] | None = None,
        load: Callable[[EntryPoint], Any] = _load,
        unknown: tuple[str, str] = ("unknown {kind} {name!r}; known: {known}", "use one of the names known"),
    ) -> None:
        self.kind, self.group, self.builtins = kind, group, builtins
        self._make, self._check, self._load, self._unknown = make, check, load, unknown
        self._entries: dict[str, T] = {}
        self._absent: set[str] = set()
        """Names looked up in the installed packages and offered by none."""

    # -- registering ---------------------------------------------------------------------------

    def register(self, name: str) -> Callable[[Any], Any]:
        """Decorator registering what it decorates under ``name`` (as ``make`` turns it into an
        entry); returns it unchanged."""

        def register(obj: Any) -> Any:
            self.add(name, obj)
            return obj

        return register

    def add(self, name: str, obj: Any) -> T:
        """Register ``obj`` under ``name`` (replacing an entry of that name) and return the entry."""
        entry = self._make(name, obj)
        self._entries[name] = entry
        self._absent.discard(name)
        return entry

    def forget(self, name: str) -> None:
        """Drop the entry ``name`` and what was learnt of the installed packages about it: the next
        look-up asks them again (tests register and drop entries of their own)."""
        self._entries.pop(name, None)
        self._absent.discard(name)

    # -- looking up ----------------------------------------------------------------------------

    def _ready(self) -> None:
        if self.builtins is not None:
            importlib.import_module(self.builtins)  # a no-op once imported

    def _entry_points(self, name: str | None = None) -> list[EntryPoint]:
        if self.group is None:
            return []
        from importlib.metadata import entry_points

        eps = entry_points(group=self.group) if name is None else entry_points(group=self.group, name=name)
        return list(eps)

    def find(self, name: str) -> T | None:
        """The entry ``name``: registered here, or an installed package's entry point (loaded at
        its first look-up); None when no one offers it. A ConfigError naming the entry point when
        it cannot be loaded or is not of this kind, or when ``check`` refuses the entry."""
        self._ready()
        if name not in self._entries and name not in self._absent:
            for ep in self._entry_points(name):
                where = f"{self.kind} plugin {name!r} ({ep.value})"
                try:
                    obj = self._load(ep)
                except Unloadable as e:
                    raise ConfigError(
                        f"{where} cannot be loaded: {e}", hint="reinstall or uninstall the package that offers it"
                    ) from None
                try:
                    self.add(name, obj)
                except NotOfKind as e:
                    raise ConfigError(f"{where} {e.problem}", hint=e.hint) from None
                except Exception as e:  # making the entry (e.g. instantiating a loader class) failed
                    raise ConfigError(
                        f"{where} cannot be loaded: {type(e).__name__}: {e}",
                        hint="reinstall or uninstall the package that offers it",
                    ) from None
                break
            else:
                self._absent.add(name)
        entry = self._entries.get(name)
        if entry is not None and self._check is not None:
            self._check(name, entry)
        return entry

    def get(self, name: str) -> T:
        """The entry ``name`` (as ``find``); a ConfigError naming the known ones when there is none."""
        entry = self.find(name)
        if entry is None:
            fields = {
                "kind": self.kind,
                "name": name,
                "known": ", ".join(sorted(self.names())) or "(none)",
                "group": self.group,
            }
            message, hint = self._unknown
            raise ConfigError(message.format(**fields), hint=hint.format(**fields))
        return entry

    def names(self) -> list[str]:
        """Every name: the entries registered here, in the order registered, then those the
        installed packages offer that are not loaded yet (by name, none is loaded)."""
        self._ready()
        offered = sorted({ep.name for ep in self._entry_points()} - set(self._entries))
        return [*self._entries, *offered]

    def entries(self) -> dict[str, T]:
        """The entries registered in this process (the built-in ones and the entry points loaded so
        far), by name in the order registered: a copy."""
        self._ready()
        return dict(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, group={self.group!r}, {len(self._entries)} registered)"
