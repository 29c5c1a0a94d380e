"""The built-in schemes, in the order ``gcsim schemes`` lists them (:mod:`gcsim.schemes.registry`
registers them on first use; this module imports no registry, so the two form no import cycle)."""

from gcsim.schemes.uncoded import Uncoded
from gcsim.schemes.ignore_stragglers import IgnoreStragglers
from gcsim.schemes.gc_fr import GcFr
from gcsim.schemes.gc_cr import GcCr
from gcsim.schemes.gc_mds import GcMds
from gcsim.schemes.cce_fr import CceFr
from gcsim.schemes.cce_cr import CceCr
from gcsim.schemes.pgc_fr import PgcFr
from gcsim.schemes.pgc_cr import PgcCr

BUILTIN_SCHEMES = (Uncoded, IgnoreStragglers, GcFr, GcCr, GcMds, CceFr, CceCr, PgcFr, PgcCr)
