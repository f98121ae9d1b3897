"""cocoeval: measure how human LLM-simulated multi-party conversations are (CoCoEval)."""

__version__ = "0.1.0"

from .bench import BuildConfig, build, build_instances, find_instance, load_instances
from .errors import CocoevalError, ConfigError, InputError, NotFoundError
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
from .sources import SourceReport, load_conversations, parse_source_spec
from .taxonomy import Behaviour, Taxonomy, load_taxonomy

__all__ = [
    "Behaviour", "BuildConfig", "CallRecord", "CocoevalError", "ConfigError", "Continuation",
    "Conversation", "InputError", "Instance", "Judgment", "Metadata", "NotFoundError",
    "Participant", "Provenance", "SourceReport", "Summary", "Taxonomy", "Turn", "TurnLabel",
    "__version__", "build", "build_instances", "find_instance", "load_conversations",
    "load_instances", "load_taxonomy", "parse_source_spec",
]
