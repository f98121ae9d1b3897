"""The ground of cocoeval: the data model (``schema``), the behaviour taxonomy (``taxonomy``, its
YAML beside it), what a judge judges (``targets``), the package's errors, JSON/JSONL files
(``jsonio``), user YAML files (``yamlio``; both refuse a key given twice), names that become
file names (``names``) and text made safe to show (``text``).

Imports nothing of cocoeval but the LLM layer's errors and secret redaction."""

from cocoeval import lazy_exports

from .errors import CocoevalError, ConfigError, FatalLLMError, InputError, NotFoundError

_WHERE = {  # loaded on first use: the errors alone (what every command imports) need no pydantic
    **dict.fromkeys(
        [
            "CallRecord",
            "Continuation",
            "Conversation",
            "Instance",
            "Judgment",
            "Metadata",
            "Participant",
            "Provenance",
            "Summary",
            "Turn",
            "TurnLabel",
        ],
        "cocoeval.core.schema",
    ),
    **dict.fromkeys(
        ["NO_TURNS", "REFERENCE", "Target", "behaviour_counts", "judged_turns", "targets_for"], "cocoeval.core.targets"
    ),
    **dict.fromkeys(["Behaviour", "Taxonomy", "load_taxonomy"], "cocoeval.core.taxonomy"),
}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

__all__ = [
    "NO_TURNS",
    "REFERENCE",
    "Behaviour",
    "CallRecord",
    "CocoevalError",
    "ConfigError",
    "Continuation",
    "Conversation",
    "FatalLLMError",
    "InputError",
    "Instance",
    "Judgment",
    "Metadata",
    "NotFoundError",
    "Participant",
    "Provenance",
    "Summary",
    "Target",
    "Taxonomy",
    "Turn",
    "TurnLabel",
    "behaviour_counts",
    "judged_turns",
    "load_taxonomy",
    "targets_for",
]
