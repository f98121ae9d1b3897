"""The ground of cocoeval: the data model (``schema``), the behaviour taxonomy (``taxonomy``, its
YAML beside it), what a judge judges (``targets``), the package's errors, JSON/JSONL files
(``jsonio``), user YAML files (``yamlio``; both refuse a key given twice), names that become
file names (``names``) and text made safe to show (``text``).

Imports nothing of cocoeval but the LLM layer's errors and secret redaction."""

from .errors import CocoevalError, ConfigError, FatalLLMError, InputError, NotFoundError
from .schema import (
    CallRecord,
    Continuation,
    Conversation,
    Instance,
    Judgment,
    Metadata,
    Participant,
    Provenance,
    Summary,
    Turn,
    TurnLabel,
)
from .targets import NO_TURNS, REFERENCE, Target, behaviour_counts, judged_turns, targets_for
from .taxonomy import Behaviour, Taxonomy, load_taxonomy

__all__ = [
    "NO_TURNS", "REFERENCE", "Behaviour", "CallRecord", "CocoevalError", "ConfigError", "Continuation",
    "Conversation", "FatalLLMError", "InputError", "Instance", "Judgment", "Metadata", "NotFoundError",
    "Participant", "Provenance", "Summary", "Target", "Taxonomy", "Turn", "TurnLabel", "behaviour_counts",
    "judged_turns", "load_taxonomy", "targets_for",
]
