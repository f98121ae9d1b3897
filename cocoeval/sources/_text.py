"""Rule-based transcript cleaning."""

from __future__ import annotations

import re

# QMSum/AMI/ICSI artefacts: {disfmarker} {vocalsound} {gap} {pause} {comment} {nonvocalsound} ...
_ARTEFACT = re.compile(r"\{\s*[A-Za-z_]+\s*\}")
# AMI spells acronyms letter by letter: L_C_D_ -> LCD
_SPELLED = re.compile(r"\b((?:[A-Za-z]_){2,})")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:?!%])(?=\s|$)")
_REPEATED_PUNCT = re.compile(r"([,;:])(?:\s*[,;:])+")
_WS = re.compile(r"\s+")


def clean_transcript(text: str) -> str:
    """Remove transcription artefacts and tokenisation spaces; keep every spoken word."""
    t = _ARTEFACT.sub(" ", text)
    t = _SPELLED.sub(lambda m: m.group(1).replace("_", ""), t)
    t = _WS.sub(" ", t)
    t = _SPACE_BEFORE_PUNCT.sub(r"\1", t)
    t = _REPEATED_PUNCT.sub(r"\1", t)
    t = t.strip()
    # a turn left as bare punctuation carried no words
    return "" if not re.search(r"\w", t) else t


def normalise_space(text: str) -> str:
    return _WS.sub(" ", text).strip()
