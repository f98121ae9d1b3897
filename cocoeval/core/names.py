"""Names that become file names: run, setup and judge names.

A setup's continuations go to ``<run>/continuations/<setup>.jsonl``, a judge's judgments to
``<run>/judgments/<judge>.jsonl`` and a run without ``out:`` to ``runs/<name>``; a name is
therefore one safe file-name component. ``check_name`` says what is wrong with a name (the params
schema uses it); ``child_path`` builds the file path and refuses any path outside its folder, so a
name that bypassed the schema (e.g. a setup appended in a notebook) cannot write elsewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import ConfigError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
NAME_RULE = "1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit (no '/', '\\', '..' or spaces)"
RESERVED: dict[str, dict[str, str]] = {
    "setup": {"reference": "for the human reference, judged under this name"},
    "judge": {"human": "for human annotations (judgments/human/<annotator>.jsonl, judge ids human:<annotator>)"},
}
"""Names refused per kind, with the reason; compared case-insensitively (a case-insensitive file
system would put 'Human' and 'human' in one file). 'human:<x>' is refused by the character rule."""


def check_name(name: object, kind: str) -> str | None:
    """None when ``name`` is a valid ``kind`` name ('setup', 'judge', 'run'), else the problem."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:
        return f"{name!r} cannot be a file name: use {NAME_RULE}"
    why = RESERVED.get(kind, {}).get(name.lower())
    if why:
        return f"{name!r} is reserved {why}; name the {kind} otherwise"
    return None


def child_path(
    folder: Path, name: str, suffix: str = ".jsonl", *, kind: str = "setup", source: str | None = None
) -> Path:
    """``folder/<name><suffix>``, refused (ConfigError) unless ``name`` is a valid ``kind`` name and
    the path stays directly inside ``folder``; ``source`` (the params file) is named in the error."""
    problem = check_name(name, kind)
    path = folder / f"{name}{suffix}"
    if problem is None and path.resolve().parent != folder.resolve():
        problem = f"{name!r} would write outside {folder}"
    if problem is not None:
        where = f"{source}: " if source else ""
        raise ConfigError(
            f"{where}{kind} name {problem}", hint=f"rename the {kind} in the params file ({kind}s: - name: ...)"
        )
    return path
