"""Making data text safe to show: on a terminal (no control or bidi characters) and in Markdown
(no markup taken from the data)."""

from __future__ import annotations

import re
import unicodedata

_HIDDEN_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")
"""Control, format (bidi overrides such as U+202E, zero-width), lone surrogates, line/paragraph
separators: they move the cursor, recolour or reorder what a terminal shows."""


_SUSPECT = re.compile(r"[^\x20-\x7e\n\t]")


def _hidden(c: str) -> bool:
    return unicodedata.category(c) in _HIDDEN_CATEGORIES


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if not _hidden(c):
        return c
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def _json_escape(m: re.Match[str]) -> str:
    c = m.group()
    if not _hidden(c):
        return c
    o = ord(c)
    if o < 0x10000:
        return f"\\u{o:04x}"
    o -= 0x10000
    return f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}"


def visible(text: str, *, json: bool = False) -> str:
    """``text`` with control, bidi and other invisible format characters (all but newline and
    tab) replaced by visible escapes such as ``\\x1b`` or ``\\u202e``. ``json``: the text is a
    JSON document and gets JSON's own ``\\uXXXX`` escapes, so it stays the same JSON."""
    return _SUSPECT.sub(_json_escape if json else _escape, text)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~&$])")
"""What Markdown, HTML or MathJax could act on mid-line (``(`` and ``!`` are inert once ``[`` is)."""


def md_escape(text: object) -> str:
    """Data text (an id, a speaker or setup name) for inline Markdown: every Markdown or HTML
    character backslash-escaped, line breaks folded to spaces and invisible characters made
    visible, so that the data can neither add markup nor break the line it is put in."""
    s = visible(str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " "))
    return _MD_SPECIAL.sub(r"\\\1", s)


_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Characters that are letters or symbols by their category but show as nothing (the Hangul
fillers, the blank Braille pattern): used to pass off an empty text as one."""


def has_text(text: object) -> bool:
    """Whether ``text`` is a string that shows something: a character other than whitespace,
    control, format (zero-width spaces and joiners, bidi marks, the BOM), separator and the blank
    letters (``_BLANK_LETTERS``). A turn of only such characters says nothing and counts as empty."""
    if not isinstance(text, str):
        return False
    return any(
        not c.isspace() and c not in _BLANK_LETTERS and unicodedata.category(c) not in (*_HIDDEN_CATEGORIES, "Zs")
        for c in text
    )
