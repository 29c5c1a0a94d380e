"""Registry of schemes by CLI name, and the one factory both executors use."""

from __future__ import annotations

import threading

from gcsim.errors import SchemeError
from gcsim.schemes.base import Scheme

_REGISTRY: dict[str, type[Scheme]] = {}


def register(cls: type[Scheme]) -> type[Scheme]:
    """Class decorator / function: make ``cls`` available under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


def scheme_names() -> list[str]:
    """All registered CLI names, in registration order."""
    _load_builtin()
    return list(_REGISTRY)


def scheme_class(name: str) -> type[Scheme]:
    """The class registered as ``name``. Raises SchemeError naming the allowed names."""
    _load_builtin()
    if name not in _REGISTRY:
        raise SchemeError(f"scheme: expected one of {', '.join(_REGISTRY)}, got {name!r}")
    return _REGISTRY[name]


def make_scheme(name: str, n: int, s: int = 0, m: int = 1, seed: int = 0, payload_dtype: str = "float64") -> Scheme:
    """Build scheme ``name`` for ``n`` workers tolerating ``s`` stragglers with communication
    reduction ``m`` (seed for randomized constructions), exact in ``payload_dtype`` (``"float64"``:
    the simulator; ``"float32"``: the real executor's messages). Raises SchemeError on bad
    name/parameters, including parameters whose known worst case does not decode within tolerance."""
    return scheme_class(name)(n=n, s=s, m=m, seed=seed, payload_dtype=payload_dtype)


_loaded = False
#: the built-ins load once, under this lock: threads of one process (several logical workers per Ray
#: actor, ``gcsim real --workers-per-process``) may look a scheme up at the same time
_LOAD_LOCK = threading.RLock()
_loading = False


def _load_builtin() -> None:
    global _loaded, _loading
    if _loaded:
        return
    with _LOAD_LOCK:
        if _loaded or _loading:  # another thread loaded them while this one waited; or this thread is
            return               # loading them and an import inside looked a scheme up (re-entry)
        _loading = True
        try:
            from gcsim.schemes._builtin import BUILTIN_SCHEMES
        finally:
            _loading = False

        registered = dict(_REGISTRY)  # schemes a user registered before the first lookup come after the built-ins
        _REGISTRY.clear()
        for cls in BUILTIN_SCHEMES:
            register(cls)
        _REGISTRY.update({k: v for k, v in registered.items() if k not in _REGISTRY})
        _loaded = True  # only now: a thread that sees True finds every built-in registered
