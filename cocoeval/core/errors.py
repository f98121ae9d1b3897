"""Errors raised by cocoeval. Every message says what went wrong and how to fix it.

The generic classes live in the LLM layer (``cocoeval.llm.errors``, which imports nothing of the
package) and are re-exported here: ``CocoevalError`` is the LLM layer's base ``LLMError``, so
``except CocoevalError`` catches the errors of both layers.
"""

from __future__ import annotations

from cocoeval.llm.errors import ConfigError, FatalLLMError, InputError
from cocoeval.llm.errors import LLMError as CocoevalError


class NotFoundError(CocoevalError):
    """Something asked for by name or id does not exist."""


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C that stopped a command which keeps what it finished: its text says what was kept
    and how to go on. The command line prints it as one line and exits 130 (128 + SIGINT)."""


__all__ = ["CocoevalError", "ConfigError", "FatalLLMError", "InputError", "Interrupted", "NotFoundError"]
