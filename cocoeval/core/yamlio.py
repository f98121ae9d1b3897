"""Reading the YAML files a user writes (params, taxonomy, prompts): ``safe_load``, PyYAML's safe
loader that refuses a key given twice in one mapping (plain PyYAML keeps the last value
silently: ``setups:`` written twice would drop the first list)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cocoeval.llm.yamlfile import DuplicateKeyError, UniqueKeyLoader, safe_load

from .errors import InputError

__all__ = ["DuplicateKeyError", "UniqueKeyLoader", "load", "safe_load"]


def load(text: str, file: str | Path) -> Any:
    """``safe_load`` for the YAML file ``file``: a duplicate key is an InputError naming the file,
    the line and the key; other YAML errors (``yaml.YAMLError``) are the caller's to report."""
    try:
        return safe_load(text)
    except DuplicateKeyError as e:
        raise InputError(
            f"key {e.key!r} given twice in one mapping (first at line {e.first_line}); "
            "YAML would silently keep only the last value",
            file=str(file),
            record=f"line {e.line}",
            hint="give each key once: remove one of them or merge their values",
        ) from None
