"""Which environment variable a provider's calls take their key from (``secrets.key_env_for``)."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..secrets import key_env_for


class KeyRule:
    """Mixin for providers that send an API key: ``key_env`` is the provider's own variable,
    sent only to ``own_hosts()`` (or where the user's environment points the SDK)."""

    spec: Any
    name: str
    key_env: str = ""
    key_hosts: tuple[str, ...] = ()
    """The provider's own hosts (``.example.com``: any host ending so), https only."""
    key_any_host: bool = False
    """The provider is made for other servers: its own ``key_env`` goes to any ``@URL``."""
    key_required: bool = True
    key_other: str | None = None
    """The provider to suggest for another server of the same wire format."""

    def own_hosts(self) -> tuple[str, ...]:
        return self.key_hosts

    def key_base_url(self) -> str | None:
        """The ``@URL`` the key would go to; None: the SDK's endpoint or one the environment sets."""
        return self.spec.base_url

    def key_var(self) -> str:
        """The variable to read the key from; a ConfigError where the key may not go."""
        return key_env_for(
            str(self.spec),
            default_env=self.key_env,
            base_url=self.key_base_url(),
            hosts=self.own_hosts(),
            key_env=self.spec.key_env,
            any_host=self.key_any_host,
            other=self.key_other,
        )

    def api_key(self) -> str | None:
        return os.environ.get(self.key_var())

    def check_key(self) -> None:
        """A ConfigError when the key may not go to this endpoint, or is needed and not set."""
        var = self.key_var()
        if (self.key_required or self.spec.key_env) and not os.environ.get(var):
            raise ConfigError(
                f"{self.spec} needs an API key: {var} is not set",
                hint=f"export {var}=... (keys are read from the environment only)",
            )


def key_name(provider: Any) -> str:
    """The key variable to name in an error's hint (the provider's own when it cannot be told)."""
    try:
        return provider.key_var()
    except (ConfigError, AttributeError):
        return getattr(provider, "key_env", "") or "the key variable"
