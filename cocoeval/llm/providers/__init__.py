"""Built-in providers; importing this package registers them (their SDKs load lazily)."""

from . import anthropic, local, openai  # noqa: F401
