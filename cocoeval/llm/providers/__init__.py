"""Built-in providers; importing this package registers them (their SDKs load lazily).

Every public module of this package is imported, so a new provider is one new module here."""

import importlib
import pkgutil

for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_m.name}")
