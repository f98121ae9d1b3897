"""The rules of the house (DESIGN.md, docs/architecture.md): one subpackage per stage, data flowing
down, checked on every import of every module, lazy imports inside functions and ``TYPE_CHECKING``
ones included.

``ALLOWED`` is the table: which subpackages each one may import. It must itself be a layering
(no circle), so an import that keeps to it can never close a circle between subpackages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "cocoeval"

ALLOWED: dict[str, set[str]] = {
    "llm": set(),  # knows nothing of cocoeval
    "core": {"llm"},  # and of it only ``llm.errors`` and ``llm.secrets`` (CORE_LLM)
    "prompts": {"core", "llm"},
    "sources": {"core"},
    "bench": {"core", "prompts", "sources", "llm"},
    "simulate": {"core", "prompts", "llm"},  # never judge
    "judge": {"core", "prompts", "llm"},  # never simulate
    "run": {"core", "prompts", "sources", "bench", "simulate", "judge", "llm"},
    "annotate": {"core", "prompts", "judge", "run"},
    "analysis": {"core", "run"},  # reads runs; never the engines, bench or llm
    "notebooks": {"core", "prompts", "judge", "run", "annotate", "analysis", "llm"},
    "cli": {
        "core",
        "prompts",
        "sources",
        "bench",
        "simulate",
        "judge",
        "run",
        "annotate",
        "analysis",
        "notebooks",
        "llm",
    },
}
"""{subpackage: the subpackages it may import}. Every module may also import the root package
``cocoeval`` for ``ROOT_NAMES``."""
CORE_LLM = {"cocoeval.llm.errors", "cocoeval.llm.registry", "cocoeval.llm.secrets", "cocoeval.llm.yamlfile"}
"""What of the LLM layer ``core`` may import: its errors (the package's error classes are the
LLM layer's), its registry (``core.registry``: providers, sources, simulators and analyses are
looked up by one ``Registry``), its secret redaction (``core.jsonio`` redacts keys before writing a
file) and its YAML reader that refuses duplicate keys (``core.yamlio``: one rule for price tables
and user files)."""
ROOT_NAMES = {"__version__", "lazy_exports"}
FLAT = {"__init__.py", "__main__.py", "py.typed"}
"""All that may lie flat in ``cocoeval/`` beside the subpackages."""


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in ``path``, relative imports resolved; ``names``
    is what a ``from`` import takes (empty for ``import x``)."""
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    package = parts[:-1]  # a module's package, or for an __init__ its own package
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.append((node.lineno, mod, [a.name for a in node.names]))
    return found


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every cocoeval module ``path`` imports, submodules named in a ``from``
    import included."""
    return [(line, t) for line, mod, names in imports(path) for t in targets(mod, names)]


def subpackage(path: Path, root: Path = ROOT) -> str | None:
    parts = path.relative_to(root / "cocoeval").parts
    return parts[0] if len(parts) > 1 else None


def targets(mod: str, names: list[str], root: Path = ROOT) -> list[str]:
    """The cocoeval modules an import reaches: ``mod`` and, where a name is a submodule, it."""
    out = [mod]
    for n in names:
        p = root / Path(*f"{mod}.{n}".split("."))
        if p.with_suffix(".py").is_file() or (p / "__init__.py").is_file():
            out.append(f"{mod}.{n}")
    return out


def violations(root: Path = ROOT) -> list[str]:
    """Every import in ``root``'s cocoeval/ that breaks a rule, as ``file:line: what``."""
    bad = []
    for path in sorted((root / "cocoeval").rglob("*.py")):
        me = subpackage(path, root)
        where = path.relative_to(root).as_posix()
        for line, mod, names in imports(path, root):
            if mod != "cocoeval" and not mod.startswith("cocoeval."):
                continue
            if mod == "cocoeval":
                extra = [n for n in names if n not in ROOT_NAMES and not (root / "cocoeval" / n).is_dir()]
                if extra and me is not None:
                    bad.append(f"{where}:{line}: imports {extra} from the root package (only {sorted(ROOT_NAMES)})")
                reached = [f"cocoeval.{n}" for n in names if (root / "cocoeval" / n).is_dir()]
            else:
                reached = targets(mod, names, root)
            for target in reached:
                parts = target.split(".")
                other = parts[1]
                if me is None or other == me:
                    continue
                if other not in ALLOWED[me]:
                    bad.append(f"{where}:{line}: {me} imports {other} ({target})")
                elif me == "core" and not any(target == m or target.startswith(m + ".") for m in CORE_LLM):
                    bad.append(f"{where}:{line}: core imports {target} (only {sorted(CORE_LLM)})")
                if any(p.startswith("_") and not p.startswith("__") for p in parts[2:]):
                    bad.append(f"{where}:{line}: {target} is a private module of {other}")
            if mod.startswith("cocoeval.") and mod.split(".")[1] != me and me is not None:
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                if private:
                    bad.append(f"{where}:{line}: private names {private} from another subpackage ({mod})")
    return bad


def test_every_import_keeps_to_the_table():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 80
    assert violations() == []


def test_the_table_is_a_layering_with_no_circle():
    assert set(ALLOWED) == {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    order: list[str] = []
    todo = dict(ALLOWED)
    while todo:
        ready = sorted(s for s, deps in todo.items() if deps <= set(order))
        assert ready, f"the table has a circle among {sorted(todo)}"
        order += ready
        for s in ready:
            del todo[s]
    assert order[0] == "llm" and order[-1] == "cli"
    assert "simulate" not in ALLOWED["judge"] and "judge" not in ALLOWED["simulate"]
    assert not {"simulate", "judge", "bench", "llm"} & ALLOWED["analysis"]


def test_nothing_lies_flat_in_the_package_and_every_subpackage_has_a_public_face():
    flat = {p.name for p in PACKAGE.iterdir() if p.is_file()}
    assert flat <= FLAT, sorted(flat - FLAT)
    for sub in ALLOWED:
        init = PACKAGE / sub / "__init__.py"
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{sub}/__init__.py says nothing of what it holds"
        assert any(
            isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets) for n in tree.body
        ), f"{sub}/__init__.py has no __all__"


@pytest.mark.parametrize(
    ("file", "source", "expected"),
    [
        ("cocoeval/analysis/x.py", "def f():\n    from cocoeval.simulate import engine\n", "analysis imports simulate"),
        ("cocoeval/analysis/x.py", "from ..judge.config import JudgeConfig\n", "analysis imports judge"),
        (
            "cocoeval/analysis/x.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cocoeval.llm import Runner\n",
            "analysis imports llm",
        ),
        ("cocoeval/simulate/x.py", "from cocoeval import judge\n", "simulate imports judge"),
        ("cocoeval/core/x.py", "from ..llm.base import Provider\n", "core imports cocoeval.llm.base"),
        ("cocoeval/llm/x.py", "from ..core import schema\n", "llm imports core"),
        ("cocoeval/run/x.py", "from cocoeval.llm._promptcache import X\n", "private module of llm"),
        ("cocoeval/run/x.py", "from cocoeval.llm.base import _hidden\n", "private names ['_hidden']"),
        ("cocoeval/bench/x.py", "from cocoeval import Instance\n", "from the root package"),
    ],
)
def test_the_checker_sees_each_kind_of_breach(tmp_path, file, source, expected):
    for sub in ALLOWED:
        (tmp_path / "cocoeval" / sub).mkdir(parents=True)
        (tmp_path / "cocoeval" / sub / "__init__.py").write_text("")
    (tmp_path / file).write_text(source)
    found = violations(tmp_path)
    assert len(found) == 1 and expected in found[0], found


def test_the_checker_lets_what_the_table_allows_through(tmp_path):
    for sub in ALLOWED:
        (tmp_path / "cocoeval" / sub).mkdir(parents=True)
        (tmp_path / "cocoeval" / sub / "__init__.py").write_text("")
    (tmp_path / "cocoeval" / "core" / "ok.py").write_text(
        "from ..llm.errors import ConfigError\nfrom cocoeval import __version__\n"
    )
    (tmp_path / "cocoeval" / "analysis" / "ok.py").write_text("from cocoeval.run import Run\nfrom . import _mine\n")
    (tmp_path / "cocoeval" / "llm" / "providers").mkdir()
    (tmp_path / "cocoeval" / "llm" / "providers" / "ok.py").write_text("from .._private import x\n")
    assert violations(tmp_path) == []


def test_package_errors_are_the_llm_layers():
    from cocoeval.core import errors
    from cocoeval.llm import errors as llm_errors

    assert errors.CocoevalError is llm_errors.LLMError
    assert issubclass(llm_errors.CacheError, errors.ConfigError)
    assert issubclass(errors.NotFoundError, errors.CocoevalError)
    for cls in (errors.ConfigError, errors.InputError, errors.FatalLLMError):
        assert issubclass(cls, errors.CocoevalError)


def test_docs_architecture_shows_the_same_table():
    """docs/architecture.md's table of what each subpackage may import is this test's ``ALLOWED``."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## The import rules") :]
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \|$", section, re.M)
    shown = {sub: {n for n in re.findall(r"`([\w.]+)`", deps) if "." not in n} for sub, deps in rows}
    shown["cli"] = (
        set(ALLOWED) - {"cli"} if "every other subpackage" in dict(rows).get("cli", "") else shown.get("cli", set())
    )
    assert shown == ALLOWED


def test_the_linter_sees_every_python_file_of_the_house():
    """``make test`` lints ``cocoeval tests benchmarks notebooks``: no exclude may hide a module
    (an exclude of "notebooks" once hid the whole ``cocoeval/notebooks`` package)."""
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (the dev extra)")
    out = subprocess.run(
        [ruff, "check", "--show-files", "cocoeval", "tests", "benchmarks", "notebooks"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    seen = {Path(line.strip()).resolve() for line in out.stdout.splitlines() if line.strip().endswith(".py")}
    every = {
        p.resolve()
        for d in ("cocoeval", "tests", "benchmarks", "notebooks")
        for p in (ROOT / d).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert sorted(str(p.relative_to(ROOT.resolve())) for p in every - seen) == []


def test_no_two_modules_import_each_other_round_inside_a_subpackage():
    """The table keeps subpackages from closing a circle; this keeps modules from closing one
    inside a subpackage too (an import inside a function counts: it is an edge all the same).
    ``python benchmarks/import_graph.py`` prints the graph."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "benchmarks" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    ig = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ig)
    circles = [c for c in ig.sccs(ig.graph(ROOT)) if len(c) > 1]
    assert circles == [], "modules importing each other round: " + "; ".join(" <-> ".join(c) for c in circles)
