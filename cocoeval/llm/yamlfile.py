"""YAML that refuses a key given twice in one mapping (plain PyYAML keeps the last value
silently: a model listed twice in a price table, or ``setups:`` written twice in a params file,
would drop the first). The LLM layer reads its price tables with it; ``cocoeval.core.yamlio``
reads every user YAML file (params, taxonomy, prompts) with it."""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

_MERGE = "tag:yaml.org,2002:merge"


class DuplicateKeyError(ConstructorError):
    """A mapping gives the same key twice (a ``yaml.YAMLError``; ``load`` makes it an InputError)."""

    def __init__(self, node: MappingNode, key: Any, key_node: Any, first_line: int) -> None:
        self.key, self.line, self.first_line = key, key_node.start_mark.line + 1, first_line
        super().__init__(
            "while constructing a mapping",
            node.start_mark,
            f"found duplicate key {key!r} (first given at line {first_line})",
            key_node.start_mark,
        )


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing duplicate keys. Keys merged in with ``<<:`` may still be
    overridden, as YAML's merge key means."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = key in first
                except TypeError:  # an unhashable key: SafeLoader reports it
                    continue
                if seen:
                    raise DuplicateKeyError(node, key, key_node, first[key])
                first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` refusing duplicate keys (a ``DuplicateKeyError``, a ``yaml.YAMLError``)."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader subclass: safe
