"""Lazy attributes for packages: import a module only when one of its names is used."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(
    package: str, names: Mapping[str, str], namespace: dict[str, Any], submodules: Iterable[str] = ()
) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``.

    ``names`` maps an attribute to the module that defines it; ``submodules`` are
    attributes that are the submodules ``package.<name>`` themselves. Each value is cached
    in ``namespace`` (the package's ``globals()``) on first use.
    """
    subs = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in subs:
            value = import_module(f"{package}.{name}")
        elif name in names:
            value = getattr(import_module(names[name]), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return __getattr__
