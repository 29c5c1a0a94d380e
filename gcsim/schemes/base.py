"""The common description of a gradient-coding scheme, shared by the simulator and the real executor.

Notation (Tandon et al., ICML 2017, §2; Ye & Abbe, ICML 2018, §2): ``n`` workers, ``k`` data
partitions (``k = n`` unless a scheme says otherwise), ``s`` stragglers tolerated, ``m``
communication reduction (each message carries ``1/m`` of the gradient's length), ``g_j`` the
gradient of partition ``j`` (a flat vector of length ``l``). The master needs ``sum_j g_j``.

A scheme says three things:

* **assignment** – :meth:`Scheme.assignment` ``(iteration) -> list[list[int]]``: for each worker,
  the ordered partitions it computes in that iteration (computation load = their count);
* **messages** – :meth:`Scheme.messages` ``(iteration) -> list[Message]``: what each worker sends
  once it has computed all its assigned partitions (both executors send then). A message is a linear combination of the 1/m chunks of the
  partition gradients with coefficients ``coeffs`` of shape ``(k, m)``:
  ``payload = sum_j sum_u coeffs[j, u] * chunk_u(g_j)`` (length ``ceil(l/m)``). A worker uses the
  latest gradient it holds of every partition with a non-zero coefficient (the fresh one if it just
  computed it; a stale one otherwise – only pipelined schemes do that);
* **decoder** – :meth:`Scheme.decode` ``(arrived) -> Decoding | None``: given the message ids that
  have arrived (in arrival order), either ``None`` (the master must keep waiting) or a
  :class:`Decoding` whose ``weights`` (``(len(used), m)``) combine the used payloads into the ``m``
  output chunks: ``out_u = sum_r weights[r, u] * payload[used[r]]``. For an exact scheme ``out`` is
  exactly ``sum_j g_j``; an approximate scheme returns its estimate (``exact = False``).

Message ids are global integers ``0 .. len(messages)-1``; in all built-in schemes every worker
sends exactly one message, so message id == worker index.

Decodings are cached by arrival pattern, so a decode is cheap enough to call on every arrival.

Never a wrong sum marked exact: every exact decoding is checked by :meth:`Scheme.decode` before it is
returned – its coefficient residual ``max |E - I|`` (:meth:`Scheme.residual`) must be at most
``residual_tolerance`` and its error bound in the payload precision (:meth:`Scheme.decode_error`) at
most :data:`ERROR_TOLERANCE` of the scheme's ``payload_dtype``; otherwise the decoder *refuses* the
arrived set (returns None, so the master waits for one more arrival) and records why in
``Scheme.last_refusal`` (a :class:`Refusal`), which the executors count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from gcsim.errors import NotDecodableError, SchemeError

#: unit roundoff ``u`` of each payload precision a scheme can be built for (IEEE 754 binary64 / binary32).
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24}
#: largest relative decode error (:meth:`Scheme.decode_error`) accepted per payload precision: 1e-6 in
#: float64 (the coefficient-residual tolerance), 1e-4 in float32 (~1700 u: what float32 payloads of a
#: well-conditioned code reach with room to spare, e.g. uncoded n = 1024 is ~2e-6).
ERROR_TOLERANCE = {"float64": 1e-6, "float32": 1e-4}


@dataclass(frozen=True)
class Message:
    """One message a worker sends in an iteration.

    Attributes:
        id: global message id (index into ``Scheme.messages(it)``).
        worker: sending worker, ``0 <= worker < n``.
        coeffs: float64 array ``(k, m)``; ``payload = sum_{j,u} coeffs[j,u] * chunk_u(g_j)``.
        payload_fraction: payload length as a fraction of the full gradient length (``1/m``).
    """

    id: int
    worker: int
    coeffs: np.ndarray
    payload_fraction: float

    @property
    def partitions(self) -> tuple[int, ...]:
        """Partitions whose gradients enter this message (non-zero coefficient rows)."""
        return tuple(int(j) for j in np.flatnonzero(np.any(self.coeffs != 0, axis=1)))


@dataclass(frozen=True)
class SparseMessage:
    """A :class:`Message` stored by its support: what a scheme whose messages each touch few of the k
    partitions (the pipelined schemes: s + 1 of them) keeps, so n messages cost ``O(n s)`` memory
    instead of ``O(n k)`` (issue 13: dense tables of the pipelined schemes held 114 MB at n = 1024,
    s = 3). Same attributes as :class:`Message`; ``coeffs`` is built on demand.

    Attributes:
        id, worker, payload_fraction: as in :class:`Message`.
        support: the partitions with a non-zero coefficient, increasing, shape ``(d,)``.
        values: float64 ``(d, m)``: their coefficients.
        k: number of partitions (``coeffs`` is ``(k, m)``).
    """

    id: int
    worker: int
    support: tuple[int, ...]
    values: np.ndarray
    k: int
    payload_fraction: float

    @property
    def partitions(self) -> tuple[int, ...]:
        """Partitions whose gradients enter this message (the support)."""
        return self.support

    @property
    def coeffs(self) -> np.ndarray:
        """float64 ``(k, m)``: the dense coefficients (zeros off the support)."""
        out = np.zeros((self.k, self.values.shape[1]))
        out[list(self.support)] = self.values
        return out


class _LazyFloat:
    """A float dataclass field that may be given as a zero-argument callable: evaluated (and kept) on
    first read. ``Decoding.cond`` uses it: a decoder whose solve does not yield cond(B_S) as a by-product
    (the cyclic schemes' null-space solve, :mod:`gcsim.schemes.cyclic`) defers the SVD that gives it –
    which would cost what the fast solve saved – to whoever reads it (``gcsim schemes check``, the real
    master's per-step record, a refusal's reason); the simulators never do (issue 13)."""

    def __init__(self, *default: float):
        self.default = default  # () or (value,)

    def __set_name__(self, owner, name: str) -> None:
        self.slot = "_lazy_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:  # the dataclass asks for the default: AttributeError means a required field
            if not self.default:
                raise AttributeError(self.slot)
            return self.default[0]
        value = obj.__dict__[self.slot]
        if callable(value):
            value = float(value())
            obj.__dict__[self.slot] = value
        return value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.slot] = value


def _lazy_fields(obj) -> dict:
    """``obj``'s dataclass fields as constructor keywords, a deferred ``_LazyFloat`` value left
    unevaluated (what :func:`dataclasses.replace` would force)."""
    return {f.name: obj.__dict__.get("_lazy_" + f.name, obj.__dict__.get(f.name)) for f in fields(obj)}


@dataclass(frozen=True)
class Decoding:
    """How the master combines arrived payloads into the gradient (sum over partitions).

    Attributes:
        used: message ids that enter the combination, shape ``(r,)``.
        weights: float64 array ``(r, m)``: ``out_u = sum_r weights[r, u] * payload[used[r]]``.
        exact: whether ``out`` equals ``sum_j g_j`` (False for approximate schemes).
        cond: condition number of the linear system solved (1.0 when none was solved). A decoder may
            pass a zero-argument callable instead: it is called on the first read of ``cond`` (a float
            from then on), so only readers pay for it.
        staleness: for pipelined schemes, int array ``(r, k)``: how many iterations old the
            gradient of partition ``j`` inside message ``used[r]`` is (-1 where absent); else None.
        residual: coefficient residual ``max |E - I|`` (:meth:`Scheme.residual`) of an exact decoding,
            filled in by :meth:`Scheme.decode` (NaN for approximate ones).
        error_bound: relative error bound in the payload precision (:meth:`Scheme.decode_error`),
            filled in by :meth:`Scheme.decode` (NaN for approximate ones).
    """

    used: tuple[int, ...]
    weights: np.ndarray
    exact: bool
    cond: float = _LazyFloat(1.0)  # type: ignore[assignment]
    staleness: np.ndarray | None = None
    residual: float = float("nan")
    error_bound: float = float("nan")

    def __getstate__(self):  # pickled (and copied) with cond evaluated: a deferred one may hold the scheme
        state = dict(self.__dict__)
        state["_lazy_cond"] = self.cond
        return state


@dataclass(frozen=True)
class Quorum:
    """A decodability rule in counts (:meth:`Scheme.quorum`): the arrived set decodes once every group
    holds ``need`` arrived messages.

    Attributes:
        group: int ``(n_messages,)``: group of each message id (``0 .. G-1``).
        need: arrivals needed in every group (``n - s`` in one group for cyclic/MDS codes, 1 per
            fractional-repetition group, ``m`` per CCE block group).
        pick: which arrivals the decoding uses: ``"first"`` – the first ``need`` of each group in arrival
            order; ``"lowest"`` – the ``need`` lowest ids of each group among those arrived by then.
        guaranteed: True when :meth:`Scheme.decode` accepts every set meeting the quorum (and uses the
            ``pick`` arrivals); False when the quorum is only necessary (an exact decode may refuse a set).
    """

    group: np.ndarray
    need: int
    pick: str = "first"
    guaranteed: bool = False


@dataclass(frozen=True)
class Refusal:
    """An arrived set an exact scheme could solve for but refused: its decode would not be exact
    within tolerance in the payload precision (see :meth:`Scheme.decode`).

    Attributes:
        arrived: the arrived message ids, sorted (the pattern).
        residual: coefficient residual ``max |E - I|`` of the refused decoding (inf if the solve failed).
        error_bound: its relative error bound in the payload precision.
        cond: condition number of the linear system solved (read lazily, as ``Decoding.cond``).
        reason: one line, e.g. ``"coefficient residual 3.1e-06 > 1e-06"``.
    """

    arrived: tuple[int, ...]
    residual: float
    error_bound: float
    cond: float = _LazyFloat()  # type: ignore[assignment]  (required, may be deferred)
    reason: str

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_lazy_cond"] = self.cond
        return state


class Loads(NamedTuple):
    """Loads a scheme's construction promises for ``(n, s, m)`` (:meth:`Scheme.declared_loads`).

    Attributes:
        computation: partitions each worker computes per iteration.
        held: partitions each worker holds (computes over one assignment period).
        messages_per_worker: messages each worker sends per iteration.
    """

    computation: int
    held: int
    messages_per_worker: int = 1


def split_chunks(gradient: np.ndarray, m: int) -> np.ndarray:
    """Split a flat gradient ``(l,)`` into ``m`` equal chunks ``(m, ceil(l/m))``, zero-padded at the end."""
    g = np.asarray(gradient).ravel()
    L = math.ceil(g.size / m)
    out = np.zeros((m, L), dtype=g.dtype)
    out.reshape(-1)[: g.size] = g
    return out


def join_chunks(chunks: np.ndarray, length: int) -> np.ndarray:
    """Inverse of :func:`split_chunks`: ``(m, L)`` -> flat ``(length,)``."""
    return np.asarray(chunks).reshape(-1)[:length]


class Scheme:
    """Base class of every gradient-coding scheme. Subclasses set the class attributes and
    implement :meth:`_build` (static assignment/messages) and :meth:`_decode`.

    Class attributes:
        name: CLI name, e.g. ``"gc-fr"``.
        exact: True when the decoder returns exactly ``sum_j g_j``.
        uses_m: True when the parameter ``m`` means something for this scheme.
        constraints: one-line human statement of the parameter constraints.
        reference: paper and section the construction follows.
        examples: parameter sets (constructor keyword arguments, e.g. ``dict(n=6, s=1)``) the scheme
            must build and pass :func:`gcsim.schemes.conformance.check_scheme` with.

    What the conformance kit expects is also declared by :meth:`declared_loads` and
    :meth:`undecodable_arrivals` (defaults fit the cyclic gradient codes; override where they do not).

    Args:
        n: workers (integer >= 1); s: stragglers tolerated (integer, ``0 <= s < n``); m: communication
            reduction (integer >= 1; must be 1 unless ``uses_m``); seed: construction seed (integer >= 0,
            used by randomized constructions such as ``gc-cr``); payload_dtype: precision of the coded
            messages the decode must be exact in, ``"float64"`` (the simulator) or ``"float32"`` (what
            the real executor sends); sets the error tolerance (:data:`ERROR_TOLERANCE`).

    Raises:
        SchemeError: on parameters the scheme refuses (message names the parameter, the allowed
            values and the given value).
    """

    name: ClassVar[str] = "base"
    exact: ClassVar[bool] = True
    uses_m: ClassVar[bool] = False
    constraints: ClassVar[str] = "0 <= s < n"
    reference: ClassVar[str] = ""
    #: largest coefficient residual ``max |E - I|`` (see :meth:`residual`) an exact decoding built by
    #: a linear solve may have; beyond it the decoder answers "not decodable" rather than a wrong sum.
    #: 1e-6 relative is ~16x below float32 rounding of a gradient, yet lets the rare ill-conditioned
    #: straggler sets of random gc-cr (cond(B_S) up to 1e8 at n=20, s=5) still decode in float64.
    residual_tolerance: ClassVar[float] = 1e-6
    #: most decodings kept in the per-scheme cache (oldest dropped first), bounding memory in long runs.
    cache_size: ClassVar[int] = 65536
    #: most bytes of arrays the cached decodings may hold (oldest dropped first): a pipelined decoding
    #: carries an ``(n - s, k)`` staleness table, 8 MB at n = 1024 (issue 13)
    cache_bytes: ClassVar[int] = 256 * 2**20
    #: parameter sets the conformance kit checks (class docstring); every registered scheme declares some
    examples: ClassVar[tuple[dict, ...]] = ()

    def __init__(self, n: int, s: int, m: int = 1, seed: int = 0, payload_dtype: str = "float64"):
        self.payload_dtype = self._check_dtype(payload_dtype)
        self._check_int("n", n, 1)
        self._check_int("s", s, 0)
        self._check_int("m", m, 1)
        self._check_int("seed", seed, 0)
        if s >= n:
            raise SchemeError.param(self.name, "s", f"0 <= s < n={n}", s)
        if m != 1 and not self.uses_m:
            raise SchemeError.param(self.name, "m", "1 (this scheme has no communication reduction)", m)
        self.n, self.s, self.m, self.seed = int(n), int(s), int(m), int(seed)
        self.k = self.n
        self._cache: dict = {}
        self._cache_nbytes = 0
        self._coeff_tensor: np.ndarray | None = None
        self._coeff_sparse: tuple | None = None
        #: why the last :meth:`decode` call returned None when it refused an arrived set, else None
        self.last_refusal: Refusal | None = None
        self._validate()
        self._assignment, self._messages = self._build()
        self._check_construction()

    # ----------------------------------------------------------------- to implement
    def _validate(self) -> None:
        """Raise SchemeError for parameters this scheme refuses (n, s, m already basic-checked)."""

    def _check_construction(self) -> None:
        """Raise SchemeError when the built scheme's known worst cases do not decode within
        tolerance in the payload precision (see :meth:`worst_case`); default: nothing to check."""

    def _build(self) -> tuple[list[list[int]], list[Message]]:
        """Return the (static) assignment and messages."""
        raise NotImplementedError

    def _decode(self, arrived: tuple[int, ...]) -> Decoding | None:
        """Decode from the arrived message ids (arrival order, no duplicates)."""
        raise NotImplementedError

    def _decode_at(self, arrived: tuple[int, ...], iteration: int) -> Decoding | None:
        """Decode at a given iteration; static schemes ignore it and call :meth:`_decode`.
        Pipelined schemes (whose messages change with the iteration) override this instead."""
        return self._decode(arrived)

    def _cache_key(self, arrived: tuple[int, ...], iteration: int):
        """Key under which a decoding is cached. Exact schemes: the arrived *set*."""
        return frozenset(arrived)

    # ----------------------------------------------------------------- declarations (conformance kit)
    @classmethod
    def declared_loads(cls, n: int, s: int, m: int) -> Loads:
        """The loads the construction promises for ``(n, s, m)``. Default: compute and hold ``s + 1``
        partitions (the lower bound ``d >= s + 1`` met with equality: Tandon et al., ICML 2017, §2 and
        Thm. 1), one message per worker."""
        return Loads(computation=s + 1, held=s + 1)

    def undecodable_arrivals(self, iteration: int = 0) -> list[int] | None:
        """Message ids, in arrival order, from which theory says the scheme cannot decode (None: none
        declared). Default: every message except those of workers ``0..s`` – s + 1 stragglers, one more
        than tolerated: ``n - s - 1`` arrivals, and with cyclic supports (worker i holds ``i..i+s``)
        partition ``s`` has no arrived holder."""
        return [msg.id for msg in self.messages(iteration) if msg.worker > self.s]

    # ----------------------------------------------------------------- public API
    def assignment(self, iteration: int = 0) -> list[list[int]]:
        """Per worker, the ordered partitions it computes in ``iteration``: ``n`` lists."""
        return self._assignment

    def messages(self, iteration: int = 0) -> list[Message]:
        """All messages of ``iteration``, indexed by message id."""
        return self._messages

    @property
    def assignment_period(self) -> int:
        """Iterations after which :meth:`assignment` repeats (1 for static schemes; ``s+1`` for the
        pipelined ones, whose messages also repeat with that period once every partition has been
        computed)."""
        return 1

    def held_partitions(self, worker: int) -> list[int]:
        """Sorted partitions ``worker`` ever computes, i.e. the data it must hold (union of its
        assignment over one period). Equals the assignment for static schemes."""
        held: set[int] = set()
        for it in range(self.assignment_period):
            held.update(self.assignment(it)[worker])
        return sorted(held)

    def clear_cache(self) -> None:
        """Forget every cached decoding."""
        self._cache.clear()
        self._cache_nbytes = 0

    @property
    def computation_load(self) -> int:
        """Partitions each worker computes per iteration (Tandon et al. §2: d >= s+1)."""
        return max(len(a) for a in self.assignment(0))

    @property
    def communication_load(self) -> float:
        """Payload of one message as a fraction of the full gradient length (1/m)."""
        return max(msg.payload_fraction for msg in self.messages(0))

    @property
    def messages_per_worker(self) -> int:
        """Messages each worker sends per iteration."""
        return int(np.bincount([msg.worker for msg in self.messages(0)], minlength=self.n).max())

    @property
    def min_arrivals(self) -> int:
        """Fewest messages that can ever decode (``n - s`` for schemes tolerating any s)."""
        return self.n - self.s

    def quorum(self, iteration: int = 0) -> "Quorum":
        """When an arrived set can decode, as arrival counts per group of messages (what the vectorised
        engine, :mod:`gcsim.sim.vector`, computes with order statistics instead of calling :meth:`decode`
        on every arrival). Default: one group of every message, ``min_arrivals`` of them needed, used in
        arrival order; ``guaranteed`` only for approximate schemes (their decoders never refuse), so for an
        exact scheme the engine still asks :meth:`decode` from that point on (a linear solve may refuse)."""
        n_msgs = len(self.messages(iteration))
        return Quorum(group=np.zeros(n_msgs, dtype=np.int64), need=self.min_arrivals, pick="first",
                      guaranteed=not self.exact)

    def message_worker(self, iteration: int = 0) -> np.ndarray:
        """int array ``(n_messages,)``: sending worker of each message id."""
        return np.array([msg.worker for msg in self.messages(iteration)], dtype=int)

    def decode(self, arrived: Iterable[int], iteration: int = 0) -> Decoding | None:
        """Return the :class:`Decoding` of the arrived message ids, or None if not yet decodable.

        Args:
            arrived: message ids in arrival order (duplicates ignored); a list, tuple or int array.
            iteration: iteration index (matters only for pipelined schemes).
        An exact decoding is returned only when its coefficient residual is at most
        ``residual_tolerance`` and its error bound (:meth:`decode_error`) at most the payload
        precision's :data:`ERROR_TOLERANCE`; otherwise the set is *refused*: None is returned and
        ``last_refusal`` holds the :class:`Refusal` (it is None after every other call).

        Raises:
            SchemeError: an id outside ``0 .. n_messages-1`` (checked once at least
                ``min_arrivals`` ids are given; fewer return None at once, cheaply).
        """
        self.last_refusal = None
        if hasattr(arrived, "__len__") and len(arrived) < self.min_arrivals:
            return None  # fast path: too few arrivals whatever they are (ids not validated here)
        seq = arrived.tolist() if isinstance(arrived, np.ndarray) else [int(a) for a in arrived]
        arr = tuple(dict.fromkeys(seq))
        n_msgs = len(self.messages(iteration))
        if arr and (min(arr) < 0 or max(arr) >= n_msgs):
            bad = next(a for a in arr if not 0 <= a < n_msgs)
            raise SchemeError.param(self.name, "arrived message id", f"0..{n_msgs - 1}", bad)
        if len(arr) < self.min_arrivals:
            return None
        key = self._cache_key(arr, iteration)
        try:
            result = self._cache[key]
        except KeyError:
            result = self._checked(self._decode_at(arr, iteration), arr, iteration)
            size = _nbytes(result)
            while self._cache and (len(self._cache) >= self.cache_size
                                   or self._cache_nbytes + size > self.cache_bytes):
                self._cache_nbytes -= _nbytes(self._cache.pop(next(iter(self._cache))))
            self._cache[key] = result
            self._cache_nbytes += size
        if isinstance(result, Refusal):
            self.last_refusal = result
            return None
        return result

    def _checked(self, dec: Decoding | None, arrived: tuple[int, ...], iteration: int) -> Decoding | Refusal | None:
        """The decoding with ``residual`` and ``error_bound`` filled in, or a :class:`Refusal` when an
        exact one is not exact within tolerance (approximate decodings and None pass unchanged)."""
        if dec is None or not dec.exact:
            return dec
        residual, bound = self.decode_error(dec, iteration)
        tol = self.error_tolerance
        if residual <= self.residual_tolerance and bound <= tol:
            return Decoding(**{**_lazy_fields(dec), "residual": residual, "error_bound": bound})
        if not residual <= self.residual_tolerance:
            why = f"coefficient residual {residual:.1e} > {self.residual_tolerance:g}"
        else:
            why = f"{self.payload_dtype} error bound {bound:.1e} > {tol:g} (cond {dec.cond:.1e})"
        return Refusal(arrived=tuple(sorted(arrived)), residual=residual, error_bound=bound,
                       cond=_lazy_fields(dec)["cond"], reason=why)

    @property
    def error_tolerance(self) -> float:
        """Largest accepted relative decode error in this scheme's payload precision (:data:`ERROR_TOLERANCE`)."""
        return ERROR_TOLERANCE[self.payload_dtype]

    def decode_error(self, decoding: Decoding, iteration: int = 0) -> tuple[float, float]:
        """``(residual, error_bound)`` of an exact decoding in the payload precision.

        ``residual`` = :meth:`residual` (the float64 coefficient error ``max |E - I|``). The payloads
        are rounded to ``payload_dtype`` (unit roundoff ``u``, :data:`UNIT_ROUNDOFF`) and combined in
        float64, so the decoded chunk ``u`` carries the rounding errors ``delta p_r`` (``|delta p_r| <=
        u |p_r|``) amplified by the weights. For partition gradients of equal norm G with independent
        directions, ``|p_r| ~ ||C_r||_F G`` and ``|sum_j g_j| ~ sqrt(k) G``, so (triangle inequality,
        the standard forward error of a linear combination, Higham, *Accuracy and Stability of
        Numerical Algorithms*, 2002, §3.1)::

            error_bound = residual + (u + u_64) * max_u sum_r |w[r, u]| ||C_r||_F / sqrt(k)

        which is ``sqrt(n) (u + u_64)`` for ``uncoded`` and grows like cond(B_S) for ill-conditioned
        codes (it is what makes gc-mds at n = 64, s = 7 fail in float32; Raviv et al., ICML 2018).
        Returns float64 scalars (inf when the weights are not finite).
        """
        W = np.asarray(decoding.weights, dtype=np.float64)  # (r, m)
        if not np.all(np.isfinite(W)):
            return math.inf, math.inf
        used = list(decoding.used)
        if self.assignment_period == 1:
            # static schemes: the same sums over the non-zero coefficients only (a cyclic code's B_S has
            # s + 1 per row: the dense (r, k, m) gather and einsum were ~10 ms per decode at n = 1024)
            cols, vals, all_norms = self._sparse_coefficients()
            cols_u, vals_u = cols[used].ravel(), vals[used]  # (r * w,), (r, w)
            km = self.k * self.m
            E = np.stack([np.bincount(cols_u, weights=(vals_u * W[:, u, None]).ravel(), minlength=km)
                          for u in range(self.m)]).reshape(self.m, self.k, self.m)  # (m, k, m)
            norms = all_norms[used]  # (r,)
        else:
            C = self._coefficients(iteration)[used]  # (r, k, m)
            E = np.einsum("ru,rjv->ujv", W, C)  # (m, k, m)
            norms = np.sqrt(np.einsum("rjv,rjv->r", C, C))  # (r,)
        E[np.arange(self.m), :, np.arange(self.m)] -= 1.0
        residual = float(np.max(np.abs(E))) if E.size else 0.0
        amp = float(np.max(np.abs(W).T @ norms)) / math.sqrt(self.k)
        bound = residual + (UNIT_ROUNDOFF[self.payload_dtype] + UNIT_ROUNDOFF["float64"]) * amp
        return residual, (bound if math.isfinite(bound) else math.inf)

    def _coefficients(self, iteration: int) -> np.ndarray:
        """float64 ``(n_messages, k, m)``: every message's coefficients (cached for static schemes)."""
        if self.assignment_period != 1:
            return np.stack([msg.coeffs for msg in self.messages(iteration)])
        if self._coeff_tensor is None:
            self._coeff_tensor = np.stack([msg.coeffs for msg in self.messages(0)])
        return self._coeff_tensor

    def _sparse_coefficients(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Static schemes: every message's non-zero coefficients, built once from :meth:`_coefficients`:
        ``cols`` int ``(n_messages, w)`` (flat indices ``j * m + v`` into the ``(k, m)`` coefficients, w
        the most non-zeros of one message; shorter rows padded with zero values), ``vals`` float64
        ``(n_messages, w)`` and the Frobenius norms ``(n_messages,)``."""
        if self._coeff_sparse is None:
            C = self._coefficients(0)
            flat = C.reshape(C.shape[0], -1)
            w = max(1, int(np.count_nonzero(flat, axis=1).max(initial=0)))
            cols = np.argsort(flat == 0, axis=1, kind="stable")[:, :w]  # the non-zeros first, in order
            vals = np.take_along_axis(flat, cols, axis=1)
            self._coeff_sparse = (cols, vals, np.sqrt(np.einsum("rj,rj->r", flat, flat)))
        return self._coeff_sparse

    def worst_case(self, arrived_sets: Iterable[Sequence[int]], iteration: int = 0) -> tuple[float, float, tuple | None]:
        """Worst ``(residual, error_bound, arrived set)`` of the raw decoder (:meth:`_decode_at`,
        uncached, unchecked) over ``arrived_sets`` (each a sequence of message ids in arrival order).
        A set the decoder cannot solve at all counts as ``inf``. Used by construction-time guards."""
        worst_r, worst_b, worst_set = 0.0, 0.0, None
        for arrived in arrived_sets:
            arr = tuple(int(a) for a in arrived)
            try:
                dec = self._decode_at(arr, iteration)
            except np.linalg.LinAlgError:
                dec = None
            r, b = (math.inf, math.inf) if dec is None else self.decode_error(dec, iteration)
            if worst_set is None or b > worst_b:
                worst_b, worst_set = b, arr
            worst_r = max(worst_r, r)
        return worst_r, worst_b, worst_set

    def is_decodable(self, arrived: Iterable[int], iteration: int = 0) -> bool:
        """True when the master can finish the iteration with these arrivals."""
        return self.decode(arrived, iteration) is not None

    def decode_or_raise(self, arrived: Iterable[int], iteration: int = 0) -> Decoding:
        """Like :meth:`decode` but raises :class:`NotDecodableError` instead of returning None."""
        d = self.decode(arrived, iteration)
        if d is None:
            raise NotDecodableError(f"scheme {self.name}: arrived messages {sorted(arrived)} are not decodable")
        return d

    # ----------------------------------------------------------------- numerics helpers
    def encode(self, message_id: int, gradients: Mapping[int, np.ndarray], iteration: int = 0) -> np.ndarray:
        """Payload of a message from the worker's partition gradients.

        Args:
            message_id: which message.
            gradients: partition index -> flat gradient ``(l,)`` (the latest the worker holds);
                must contain every partition with a non-zero coefficient.
        Returns:
            ``(ceil(l/m),)`` payload, same dtype as the gradients.
        Raises:
            SchemeError: ``gradients`` lacks a partition the message needs.
        """
        msg = self.messages(iteration)[message_id]
        out = None
        for j in msg.partitions:
            if j not in gradients:
                raise SchemeError.param(self.name, f"gradients for message {message_id}", f"partition {j}", sorted(gradients))
            ch = split_chunks(gradients[j], self.m)  # (m, L)
            term = _coeff_row(msg, j) @ ch  # (L,)
            out = term if out is None else out + term
        return out

    def combine(self, decoding: Decoding, payloads: Mapping[int, np.ndarray], length: int) -> np.ndarray:
        """Apply a decoding: ``payloads[id]`` ``(L,)`` -> the decoded gradient ``(length,)``.

        ``out_u = sum_r weights[r, u] * payloads[used[r]]`` for each chunk u, then the m chunks are
        joined and cut to ``length`` (:func:`join_chunks`). Raises KeyError if a used payload is missing.
        """
        W = np.asarray(decoding.weights)  # (r, m)
        first = np.asarray(payloads[decoding.used[0]]) if len(decoding.used) else np.zeros(0)
        out = np.zeros((W.shape[1], first.shape[0]), dtype=np.result_type(W.dtype, first.dtype))  # (m, L)
        # one multiply-add per nonzero weight: a (m, r) @ (r, L) matmul with r, m of a few units spends
        # its time casting and in BLAS set-up (11 ms against 2.7 ms for n = 6, L = 188,810 here), and
        # FR / CCE-FR decodings are mostly zeros
        for row, msg_id in enumerate(decoding.used):
            p = np.asarray(payloads[msg_id])  # (L,)
            for u in np.flatnonzero(W[row]):
                out[u] += W[row, u] * p
        return join_chunks(out, length)

    def residual(self, decoding: Decoding, iteration: int = 0) -> float:
        """Worst coefficient error of an exact decoding: ``max |E - I|`` where ``E[u, j, u']`` is the
        coefficient of ``chunk_u'(g_j)`` in output chunk ``u`` (target: 1 if u == u' else 0).
        For m = 1 this is ``||a^T B_S - 1||_inf`` (Tandon et al. 2017, Thm. 1)."""
        return self.decode_error(decoding, iteration)[0]

    def encoding_matrix(self, iteration: int = 0) -> np.ndarray:
        """B as ``(n_messages, k)`` float64 when m == 1 (the paper's encoding matrix B)."""
        if self.m != 1:
            raise SchemeError.param(self.name, "m", "1 for a (n x k) encoding matrix", self.m)
        return np.stack([msg.coeffs[:, 0] for msg in self.messages(iteration)])

    def describe(self) -> dict:
        """Parameters and loads, for tables and resolved configs."""
        return {
            "scheme": self.name, "n": self.n, "k": self.k, "s": self.s, "m": self.m, "seed": self.seed,
            "payload_dtype": self.payload_dtype,
            "exact": self.exact, "computation_load": self.computation_load,
            "communication_load": self.communication_load, "messages_per_worker": self.messages_per_worker,
        }

    def _check_dtype(self, value) -> str:
        """Normalise ``payload_dtype`` (a name or numpy dtype) to ``"float64"`` / ``"float32"``."""
        try:
            name = np.dtype(value).name
        except TypeError:
            name = None
        if name not in UNIT_ROUNDOFF:
            raise SchemeError.param(self.name, "payload_dtype", " or ".join(UNIT_ROUNDOFF), value)
        return name

    @staticmethod
    def _check_int(field: str, value, lo: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
            raise SchemeError(f"{field}: expected an integer >= {lo}, got {value!r}")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n={self.n}, s={self.s}, m={self.m}, seed={self.seed}, "
                f"payload_dtype={self.payload_dtype!r})")


def _nbytes(result) -> int:
    """Bytes of the arrays a cached decode result holds (a Decoding's weights and staleness; 0 for a
    refusal or None)."""
    return sum(int(getattr(getattr(result, f, None), "nbytes", 0)) for f in ("weights", "staleness"))


def _coeff_row(msg, j: int) -> np.ndarray:
    """Message ``msg``'s coefficients of partition ``j``, ``(m,)``, without building a sparse
    message's dense table."""
    if isinstance(msg, SparseMessage):
        return msg.values[msg.support.index(j)]
    return msg.coeffs[j]


def one_message_per_worker(assignment: Sequence[Sequence[int]], coeff_rows: np.ndarray, m: int = 1) -> list[Message]:
    """Build the usual message list: worker i sends one message (after all its partitions, as every message).

    Args:
        assignment: per worker the partitions it computes.
        coeff_rows: ``(n, k)`` (m == 1) or ``(n, k, m)`` coefficients.
    """
    C = np.asarray(coeff_rows, dtype=np.float64)
    if C.ndim == 2:
        C = C[:, :, None]
    return [Message(id=i, worker=i, coeffs=C[i], payload_fraction=1.0 / m)
            for i in range(len(assignment))]
