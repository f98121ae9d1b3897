"""DESIGN.md's rule: ``cocoeval/llm`` imports nothing of the package outside ``cocoeval.llm``."""

from __future__ import annotations

import ast

from .conftest import ROOT

LLM = ROOT / "cocoeval" / "llm"


def _imports(path) -> list[tuple[int, str]]:
    """Every module a file imports, as an absolute dotted name (relative imports resolved)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    if package and package[-1] == "__init__":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.append((node.lineno, mod))
            if not node.module:  # ``from .. import x``: x may be a module of that package
                found += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
    return found


def test_llm_layer_imports_nothing_of_the_package():
    files = sorted(LLM.rglob("*.py"))
    assert len(files) > 10 and LLM / "errors.py" in files
    bad = [f"{p.relative_to(ROOT)}:{line}: {mod}" for p in files for line, mod in _imports(p)
           if (mod == "cocoeval" or mod.startswith("cocoeval.")) and not mod.startswith("cocoeval.llm")]
    assert bad == []


def test_the_checker_sees_a_relative_import_out_of_the_layer(tmp_path, monkeypatch):
    import tests.test_llm_layering as me

    fake_root = tmp_path
    (fake_root / "cocoeval" / "llm" / "providers").mkdir(parents=True)
    f = fake_root / "cocoeval" / "llm" / "providers" / "x.py"
    f.write_text("from ...errors import ConfigError\nfrom .. import base\nfrom ..errors import E\n")
    monkeypatch.setattr(me, "ROOT", fake_root)
    mods = [m for _, m in _imports(f)]
    assert mods == ["cocoeval.core.errors", "cocoeval.llm", "cocoeval.llm.base", "cocoeval.llm.errors"]


def test_package_errors_are_the_llm_layers():
    from cocoeval.core import errors
    from cocoeval.llm import errors as llm_errors

    assert errors.CocoevalError is llm_errors.LLMError
    assert issubclass(llm_errors.CacheError, errors.ConfigError)
    assert issubclass(errors.NotFoundError, errors.CocoevalError)
    for cls in (errors.ConfigError, errors.InputError, errors.FatalLLMError):
        assert issubclass(cls, errors.CocoevalError)
