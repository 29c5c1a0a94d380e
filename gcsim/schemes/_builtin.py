"""Registers the built-in schemes, in the order ``gcsim schemes`` lists them."""

from gcsim.schemes.registry import register
from gcsim.schemes.uncoded import Uncoded
from gcsim.schemes.ignore_stragglers import IgnoreStragglers
from gcsim.schemes.gc_fr import GcFr
from gcsim.schemes.gc_cr import GcCr
from gcsim.schemes.gc_mds import GcMds
from gcsim.schemes.cce_fr import CceFr
from gcsim.schemes.cce_cr import CceCr
from gcsim.schemes.pgc_fr import PgcFr
from gcsim.schemes.pgc_cr import PgcCr

for _cls in (Uncoded, IgnoreStragglers, GcFr, GcCr, GcMds, CceFr, CceCr, PgcFr, PgcCr):
    register(_cls)
