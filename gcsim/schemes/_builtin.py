"""Registers the built-in schemes, in the order ``gcsim schemes`` lists them."""

from gcsim.schemes.registry import register
from gcsim.schemes.uncoded import Uncoded
from gcsim.schemes.gc_fr import GcFr

for _cls in (Uncoded, GcFr):
    register(_cls)
