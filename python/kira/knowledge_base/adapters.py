"""The domain adapters a knowledge base may name, resolved from a fixed registry.

A knowledge base stores its adapter's class as ``module:qualname`` (meta key
``adapter_class``). Opening it imports that class only when the name is registered here:
a database that names any other module (``kira.__main__`` would run the command line on
open) is refused with the names that are allowed, and nothing is imported.
"""

from __future__ import annotations

import importlib
from typing import Any

_REGISTRY: dict[str, tuple[str, str]] = {
    "kira.adapt.io:ProjectionHead": ("kira.adapt.io", "ProjectionHead"),
    "kira.adapt.io:ProtoNetHead": ("kira.adapt.io", "ProtoNetHead"),
}


def adapter_name(cls: type) -> str:
    """The stored name of adapter class `cls` (``module:qualname``)."""
    return f"{cls.__module__}:{cls.__qualname__}"


def register_adapter(cls: type) -> type:
    """Allow knowledge bases to name `cls` as their adapter (usable as a class decorator).

    `cls` needs ``apply(vectors) -> vectors``, ``save(path)`` and a ``load(path)`` classmethod.
    Raises TypeError when it lacks one of them.
    """
    missing = [m for m in ("apply", "save", "load") if not callable(getattr(cls, m, None))]
    if missing:
        raise TypeError(f"{cls.__qualname__} cannot be an adapter: it has no {', '.join(missing)}")
    _REGISTRY[adapter_name(cls)] = (cls.__module__, cls.__qualname__)
    return cls


def registered_adapters() -> list[str]:
    """The adapter names a knowledge base may store, sorted."""
    return sorted(_REGISTRY)


def is_registered(cls: type) -> bool:
    """Whether `cls` is a registered adapter class (the very class, not a namesake)."""
    entry = _REGISTRY.get(adapter_name(cls))
    return entry is not None and resolve_adapter(adapter_name(cls)) is cls


def resolve_adapter(name: str) -> Any:
    """The adapter class registered under `name` (``module:qualname``).

    Raises ValueError, importing nothing, when `name` is not registered.
    """
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(
            f"refusing to load adapter class {name!r}: not a registered adapter (allowed: "
            f"{', '.join(registered_adapters())}; register others with "
            "kira.knowledge_base.adapters.register_adapter)"
        )
    module_name, qualname = entry
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj
