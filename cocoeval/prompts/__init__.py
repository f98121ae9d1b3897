"""Prompts: the prompt files beside this module (``*.yaml``, versioned, loaded by name or path:
``files``), the one renderer of what a model is sent (``render``), and the one reader of what it
answers (``parse``: turns and speakers; ``answer_json``: the JSON value in an answer)."""

from .answer_json import DuplicateKey, extract_json
from .files import Prompt, load_prompt
from .parse import match_speaker, parse_turns, strip_copied

__all__ = ["DuplicateKey", "Prompt", "extract_json", "load_prompt", "match_speaker", "parse_turns", "strip_copied"]
