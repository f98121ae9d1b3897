"""Prompts are files (``cocoeval/prompts/*.yaml``), loaded by name; each has a version that
enters the id of every setup or judge that uses it. A user's own prompt file can be given by
path wherever a prompt name is accepted."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path
from string import Template

from pydantic import BaseModel, ConfigDict

from cocoeval.core import yamlio
from cocoeval.core.errors import ConfigError, InputError


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: int | str
    description: str = ""
    system: str
    user: str = ""

    @property
    def ref(self) -> str:
        """name@version#content-hash: what enters setup and judge ids."""
        digest = hashlib.sha256(f"{self.system}\x00{self.user}".encode()).hexdigest()[:8]
        return f"{self.name}@{self.version}#{digest}"

    def render(self, **values: object) -> tuple[str, str]:
        """(system, user) with every ``${name}`` filled; a missing value is an error."""
        try:
            return (Template(self.system).substitute(values).strip(), Template(self.user).substitute(values).strip())
        except KeyError as e:
            raise ConfigError(
                f"prompt {self.name!r} needs a value for ${{{e.args[0]}}}",
                hint="pass it to render(), or remove it from the prompt file",
            ) from None


def available_prompts() -> list[str]:
    return sorted(p.stem for p in _folder().glob("*.yaml"))


def _folder() -> Path:
    return Path(str(resources.files("cocoeval.prompts")))


def load_prompt(name_or_path: str) -> Prompt:
    """A built-in prompt by name (``vanilla``) or a prompt YAML file by path. The file is read on
    every call (only its parsing is cached, by content): a prompt file edited in a running session
    (a notebook) gives the new prompt and so a new setup or judge id, never the old text."""
    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml"):
        p = _folder() / f"{name_or_path}.yaml"
        if not p.exists():
            raise ConfigError(
                f"unknown prompt {name_or_path!r}",
                hint=f"use one of {', '.join(available_prompts())} or a path to a .yaml prompt file",
            )
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("prompt file not found", file=str(p)) from None
    return _parse(str(p), text)


@lru_cache(maxsize=64)
def _parse(path: str, text: str) -> Prompt:
    try:
        return Prompt.model_validate(yamlio.load(text, path))
    except InputError:  # a key given twice
        raise
    except Exception as e:
        raise InputError(
            f"not a valid prompt file ({e})",
            file=path,
            hint="a prompt file has name, version, system and user (see cocoeval/prompts/)",
        ) from None
