"""Gradient-coding schemes: assignment, messages and decoder (pure numpy; no time, no I/O).

Use :func:`make_scheme` to build one by CLI name; see :mod:`gcsim.schemes.base` for the interface.
"""

from gcsim.schemes.base import Decoding, Message, Scheme, join_chunks, split_chunks
from gcsim.schemes.registry import make_scheme, register, scheme_class, scheme_names

__all__ = ["Decoding", "Message", "Scheme", "make_scheme", "register", "scheme_class", "scheme_names",
           "split_chunks", "join_chunks"]
