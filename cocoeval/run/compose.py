"""A params file as the settings it stands for, before the schema reads them: the files it
``extends:`` merged under it and the command line's ``--set KEY=VALUE`` overrides on top.

``extends: OTHER.yaml`` (a path relative to the file's folder) makes the file the other file
with its own keys on top, so a variant of an experiment states only what differs from it
(``params/paper-c2.yaml`` is ``paper.yaml`` with four setups replaced). The rules:

- Mappings merge key by key, recursively; the extending file wins. Any other value (a number, a
  string, a list) is replaced whole, ``null`` included.
- ``setups:`` and ``judges:`` merge by name: an item whose ``name`` the extended file already has
  (ignoring case, as names are unique) replaces that item where it stands; an item with
  ``replaces: OLD`` takes the place of the item named ``OLD`` under its own name; an item
  ``{drop: NAME}`` removes one; every other item is appended, in the file's order. Naming an item
  that is not there is an error, never ignored.
- A relative path is read from the folder of the file that wrote it: the paths of an extended
  file in another folder are rewritten relative to the folder of the file named on the command
  line (``PATH_KEYS``), from which ``Experiment`` resolves every path.
- Chains are followed up to ``MAX_DEPTH`` files; a file extending itself, directly or through
  others, is refused naming the chain.

``--set KEY=VALUE`` overrides one key after the files are merged: ``KEY`` is a dotted path
(``llm.concurrency``), a list item addressed by its position from 0 (``setups.0.temperature``)
or, in brackets, by its name (``setups[gpt41-vanilla-30].temperature``); ``VALUE`` is read as
YAML (``8``, ``true``, ``null``, ``[a, b]``, ``{k: v}``). Relative paths given so are read from
the folder of the file named on the command line, like the file's own.

Every key remembers where it was written (``Composed.origin``), so that an error of the schema
names the file or the ``--set`` that wrote the key."""

from __future__ import annotations

import copy
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cocoeval.core import yamlio
from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import read_text

__all__ = ["MAX_DEPTH", "NAMED_LISTS", "PATH_KEYS", "SET_HINT", "Composed", "ParamsSource", "compose", "parse_set_key"]

MAX_DEPTH = 16
"""Most files in one ``extends:`` chain, the file named on the command line included."""

NAMED_LISTS = ("setups", "judges")
"""Top-level lists merged by their items' ``name`` rather than replaced."""

Loc = tuple[str | int, ...]
"""A key path in the params (``("setups", 0, "model")``)."""

PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("out",),
    ("bench",),
    ("taxonomy",),
    ("llm", "cache"),
    ("llm", "prices"),
    ("setups", "*", "continuations"),
    ("build", "sources", "*"),
)
"""The keys holding paths read from the params file's folder (``*``: every item of a list); a
``build.sources`` item is ``KIND:PATH[#DATASET]``, only its ``PATH`` is one."""

_KEY_RE = re.compile(r"(?:[^.\[\]=]+|\[[^\[\]]+\])(?:\.[^.\[\]=]+|\[[^\[\]]+\])*")
SET_HINT = (
    "KEY is a dotted path of the params file's keys: llm.concurrency, setups.0.temperature (items "
    "from 0) or setups[NAME].temperature; VALUE is YAML (8, true, null, [a, b]); see docs/experiments.md"
)
"""How to write ``--set KEY=VALUE``, the fix of an error of one."""


@dataclass(frozen=True)
class ParamsSource:
    """A file read to make the params: its path (as named, or as reached through ``extends:``)
    and the SHA-256 of its text, for the run's manifest."""

    path: Path
    sha256: str


@dataclass(frozen=True)
class Composed:
    """The settings of a params file before validation: ``data``, the merged mapping; ``files``,
    every file read (the one named first, then each it extends); ``sets``, the ``--set``
    overrides applied; ``origins``, where each key was written (``origin``)."""

    data: dict[str, Any]
    files: tuple[ParamsSource, ...]
    sets: tuple[str, ...] = ()
    origins: dict[Loc, str] = field(default_factory=dict)

    def origin(self, loc: Loc) -> str:
        """The file or ``--set`` flag that wrote the key at ``loc`` (or the nearest key above it);
        the file named on the command line where none did (a key left out, a whole-file check)."""
        for n in range(len(loc), 0, -1):
            if (src := self.origins.get(loc[:n])) is not None:
                return src
        return str(self.files[0].path)


def _fail(problem: str, file: Path | str, hint: str) -> InputError:
    return InputError(problem, file=str(file), hint=hint)


def _read(path: Path, text: str | None, by: Path | None) -> tuple[dict[str, Any], str]:
    """The mapping of the params file at ``path`` (``text``: its text, when given) and the
    SHA-256 of its text; errors name the file (and the file extending it)."""
    if text is None:
        if by is not None and not path.is_file():
            raise _fail(
                f"extends: {path} is no file", by, "give the path of a params file, relative to this file's folder"
            )
        text = read_text(path)  # missing, a folder, empty or not UTF-8: an InputError naming the file
    try:
        data = yamlio.load(text, path)  # a key given twice: an InputError naming the line and the key
    except yaml.YAMLError as e:
        raise _fail(f"not valid YAML: {e}", path, "fix the YAML syntax; see params/demo.yaml") from None
    except RecursionError:
        raise _fail("YAML nested too deeply to read", path, "see params/demo.yaml") from None
    if not isinstance(data, dict):
        raise _fail("expected a mapping of settings", path, "see params/demo.yaml")
    return data, hashlib.sha256(text.encode("utf-8")).hexdigest()


def _chain(path: Path, text: str | None) -> list[tuple[Path, dict[str, Any], str]]:
    """(path, its own mapping without ``extends:``, sha256) of the file and of each file it extends,
    the named file first."""
    out: list[tuple[Path, dict[str, Any], str]] = []
    seen: list[Path] = []
    p, by = path, None
    while True:
        data, sha = _read(p, text if by is None else None, by)
        out.append((p, data, sha))
        seen.append(p.resolve())
        if "extends" not in data:
            return out
        ext = data.pop("extends")
        if not isinstance(ext, str) or not ext.strip():
            raise _fail(
                f"extends: expected the path of one params file, got {ext!r}",
                p,
                "write extends: OTHER.yaml (relative to this file's folder), or leave it out",
            )
        q = Path(os.path.normpath(p.parent / Path(ext).expanduser()))
        if q.resolve() in seen:
            names = " -> ".join(str(x) for x in [*(f for f, _, _ in out), q])
            raise _fail(
                f"extends: makes a cycle: {names}", p, "remove the extends: that leads back to a file of the chain"
            )
        if len(out) >= MAX_DEPTH:
            raise _fail(
                f"extends: chain longer than {MAX_DEPTH} files: " + " -> ".join(str(f) for f, _, _ in out) + " -> ...",
                path,
                "extend a file that extends fewer others",
            )
        p, by = q, p


def _rebase(path: str, src: Path, dest: Path) -> str:
    """A relative ``path`` written in a file of folder ``src`` as read from folder ``dest``."""
    if not path or Path(path).is_absolute() or path.startswith("~"):
        return path
    try:
        return Path(os.path.relpath(src / path, dest)).as_posix()
    except ValueError:  # another drive
        return str(src / path)


def _rebase_source(spec: str, src: Path, dest: Path) -> str:
    if ":" not in spec:
        return spec
    kind, _, rest = spec.partition(":")
    p, sep, ds = rest.partition("#")
    return f"{kind}:{_rebase(p, src, dest)}{sep}{ds}"


def _rebased(data: dict[str, Any], src: Path, dest: Path) -> dict[str, Any]:
    """``data`` with the relative paths of ``PATH_KEYS`` rewritten from folder ``src`` to ``dest``."""
    if src == dest:
        return data
    out = copy.deepcopy(data)

    def visit(node: Any, key: tuple[str, ...], source: bool) -> Any:
        if not key:
            if isinstance(node, str):
                return _rebase_source(node, src, dest) if source else _rebase(node, src, dest)
            return node
        head, rest = key[0], key[1:]
        if head == "*" and isinstance(node, list):
            return [visit(x, rest, source) for x in node]
        if head != "*" and isinstance(node, dict) and head in node:
            node[head] = visit(node[head], rest, source)
        return node

    for key in PATH_KEYS:
        visit(out, key, key[0] == "build")
    return out


def _drop_under(origins: dict[Loc, str], loc: Loc) -> None:
    for k in [k for k in origins if k[: len(loc)] == loc]:
        del origins[k]


def _mark(origins: dict[Loc, str], node: Any, loc: Loc, src: str) -> None:
    """Record ``src`` as the origin of ``loc`` and of every key of the mapping ``node`` below it."""
    origins[loc] = src
    if isinstance(node, dict):
        for k, v in node.items():
            _mark(origins, v, (*loc, k), src)


def _merge_named(
    key: str, base: list[Any], over: list[Any], origins: dict[Loc, str], src: str, file: Path
) -> list[Any]:
    """``over``'s items merged into ``base`` by name (the rules in this module's docstring)."""
    kind = key[:-1]
    items: list[tuple[Any, dict[Loc, str]]] = []  # each item with its origins below (relative)
    for i, x in enumerate(base):
        items.append(
            (
                x,
                {k[2:]: v for k, v in origins.items() if k[:2] == (key, i) and len(k) > 2}
                | {(): origins.get((key, i), src)},
            )
        )
    inherited = [True] * len(items)  # only the extended files' items are matched: a name twice in
    # one file stays twice, for the schema to refuse

    def where(name: str) -> int | None:
        low = name.lower()
        return next(
            (
                j
                for j, (x, _) in enumerate(items)
                if inherited[j] and isinstance(x, dict) and isinstance(x.get("name"), str) and x["name"].lower() == low
            ),
            None,
        )

    def names() -> str:
        return (
            ", ".join(str(x.get("name")) for j, (x, _) in enumerate(items) if inherited[j] and isinstance(x, dict))
            or "none"
        )

    for i, x in enumerate(over):
        mine: dict[Loc, str] = {}
        _mark(mine, x, (), src)
        if isinstance(x, dict) and set(x) == {"drop"}:
            if not isinstance(x["drop"], str) or (j := where(x["drop"])) is None:
                raise _fail(
                    f"{key}[{i}].drop: no {kind} named {x['drop']!r} in the files this one extends "
                    f"(their {key}: {names()})",
                    file,
                    "name one of them, or remove the item",
                )
            del items[j], inherited[j]
            continue
        if isinstance(x, dict) and "replaces" in x:
            old = x["replaces"]
            if not isinstance(old, str) or (j := where(old)) is None:
                raise _fail(
                    f"{key}[{i}].replaces: no {kind} named {old!r} in the files this one extends "
                    f"(their {key}: {names()})",
                    file,
                    f"name one of them, or leave replaces: out to add the {kind}",
                )
            x = {k: v for k, v in x.items() if k != "replaces"}
            mine = {k: v for k, v in mine.items() if k[:1] != ("replaces",)}
            items[j], inherited[j] = (x, mine), False
            continue
        if isinstance(x, dict) and isinstance(x.get("name"), str) and (j := where(x["name"])) is not None:
            items[j], inherited[j] = (x, mine), False
            continue
        items.append((x, mine))
        inherited.append(False)
    _drop_under(origins, (key,))
    origins[(key,)] = src
    for j, (_, mine) in enumerate(items):
        for k, v in mine.items():
            origins[(key, j, *k)] = v
    return [x for x, _ in items]


def _merge(
    base: dict[str, Any], over: dict[str, Any], origins: dict[Loc, str], src: str, file: Path, loc: Loc = ()
) -> None:
    """Merge ``over`` (written in ``src``) into ``base`` in place; the origins follow."""
    for k, v in over.items():
        here = (*loc, k)
        if not loc and k in NAMED_LISTS and isinstance(v, list):
            old = base.get(k)
            base[k] = _merge_named(k, old if isinstance(old, list) else [], v, origins, src, file)
        elif isinstance(v, dict) and isinstance(base.get(k), dict):
            origins[here] = src
            _merge(base[k], v, origins, src, file, here)
        else:
            base[k] = v
            _drop_under(origins, here)
            _mark(origins, v, here, src)


def parse_set_key(key: str) -> list[str | int | tuple[str]] | None:
    """The steps of a ``--set`` key: a mapping key (str), a list position (int) or a list item by
    name (a 1-tuple); None when ``key`` is not of that shape."""
    if not _KEY_RE.fullmatch(key.strip()):
        return None
    steps: list[str | int | tuple[str]] = []
    for tok in re.findall(r"\[[^\[\]]+\]|[^.\[\]]+", key.strip()):
        if tok.startswith("["):
            steps.append((tok[1:-1],))
        elif tok.isdigit():
            steps.append(int(tok))
        else:
            steps.append(tok)
    return steps


def _apply_set(data: dict[str, Any], item: str, origins: dict[Loc, str]) -> None:
    """Apply one ``--set KEY=VALUE`` to ``data`` in place."""
    flag = f"--set {item}"
    key, sep, raw = item.partition("=")
    steps = parse_set_key(key) if sep else None
    if not steps:
        raise _fail("expected KEY=VALUE, e.g. --set llm.concurrency=8", flag, SET_HINT)
    if steps[0] == "extends":
        raise _fail(
            "extends: is read from the file, not set on the command line",
            flag,
            "write extends: in the params file, or name the other file on the command line",
        )
    try:
        value = yamlio.load(raw, flag)
    except yaml.YAMLError as e:
        raise _fail(f"the value is not valid YAML: {e}", flag, SET_HINT) from None
    node: Any = data
    loc: list[str | int] = []
    for n, step in enumerate(steps):
        last = n == len(steps) - 1
        where = ".".join(map(str, loc)) or "(top)"
        if isinstance(node, dict) and not isinstance(step, tuple):
            k = str(step)
            if last:
                node[k] = value
            else:
                if not isinstance(node.get(k), (dict, list)):
                    node[k] = {}
                node = node[k]
            loc.append(k)
        elif isinstance(node, list) and not isinstance(step, str):
            if isinstance(step, int):
                if step >= len(node):
                    raise _fail(f"{where}[{step}]: the list has {len(node)} item(s) (positions from 0)", flag, SET_HINT)
                j = step
            else:
                found = [i for i, x in enumerate(node) if isinstance(x, dict) and x.get("name") == step[0]]
                if not found:
                    have = ", ".join(str(x.get("name")) for x in node if isinstance(x, dict)) or "none"
                    raise _fail(f"{where}: no item named {step[0]!r} (names: {have})", flag, SET_HINT)
                j = found[0]
            if last:
                node[j] = value
            else:
                node = node[j]
            loc.append(j)
        else:
            what = "a list" if isinstance(node, list) else "a mapping" if isinstance(node, dict) else "a single value"
            step_s = f"[{step[0]}]" if isinstance(step, tuple) else str(step)
            raise _fail(f"{where} is {what}: it has no {step_s}", flag, SET_HINT)
    _drop_under(origins, tuple(loc))
    _mark(origins, value, tuple(loc), flag)


def compose(path: str | Path, sets: tuple[str, ...] | list[str] = (), *, text: str | None = None) -> Composed:
    """The settings of the params file at ``path`` (``text``: its text, when given, e.g. an edit
    not yet written): the files it extends merged under it, then ``sets`` applied in order.
    Errors (InputError) name the file or the ``--set`` flag and the key."""
    p = Path(path)
    chain = _chain(p, text)
    top = p.resolve().parent
    data: dict[str, Any] = {}
    origins: dict[Loc, str] = {}
    for f, own, _ in reversed(chain):  # the farthest file first: each nearer one on top
        _merge(data, _rebased(own, f.resolve().parent, top), origins, str(f), f)
    for item in sets:
        _apply_set(data, item, origins)
    return Composed(
        data=data, files=tuple(ParamsSource(f, sha) for f, _, sha in chain), sets=tuple(sets), origins=origins
    )
