"""Contexts, solves and devices."""
import enum
import functools
import math
import os
import threading
from typing import (TYPE_CHECKING, Any, Callable, Dict, List, Mapping, NamedTuple, Optional,
                    Tuple, TypeVar, Union, cast)

if TYPE_CHECKING:
    from typing import Unpack

import numpy as np
import numpy.typing as npt

from . import _args, _clnode, _progress
from ._model import MLP

_F = TypeVar("_F", bound=Callable[..., Any])


def ieee(fn: _F) -> _F:
    """fn called in IEEE 754's default floating-point environment (round to nearest, subnormals
    kept) on this thread, and the caller's given back: a front end's conversions and solves give
    the same bits whatever the caller set (torch.set_flush_denormal(True), a callback on a thread
    of XLA's, which flushes subnormals); the library sets it too (lib/core/fpenv.h)."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        saved = _clnode._ieee_begin()
        try:
            return fn(*args, **kwargs)
        finally:
            _clnode._ieee_end(saved)
    return cast(_F, call)


# the library's built-in methods, in its order
METHODS: Tuple[str, ...] = _clnode.method_names()
# the library's solve options (its one table), by name
OPTIONS: Dict[str, Dict[str, Any]] = {o["name"]: o for o in _clnode.solve_options()}
# flags of the table's rows (the library's, clnode/solver.h)
_CONTROLLER, _PROBLEM, _SAVE = (_clnode.OPTION_CONTROLLER, _clnode.OPTION_PROBLEM,
                                _clnode.OPTION_SAVE)
_GEMM = dict(OPTIONS["gemm_precision"]["choices"])
_PRECISIONS = dict(OPTIONS["precision"]["choices"], float32=32, float64=64)


class _ResultEnum(enum.IntEnum):
    """An IntEnum shown by its name: str(Result.success) is "success"."""

    def __str__(self) -> str:
        return self.name

    # A result is its code: compared with a name it would silently be unequal, so that
    # comparison is refused, saying what to write instead.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            raise TypeError(f"a clnode.Result is compared with clnode.Result.{other} (or by "
                            f"name: str(result) == {other!r}), not with the string {other!r}")
        return int(self) == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = int.__hash__


# How a trajectory ended: the library's result codes (clnode_result), each named as the library
# names it (clnode_result_name): Result.success == 0, Result.max_steps_reached, ... Its members are
# the library's, known at run time: to a type checker, Result is the member-less base class.
if TYPE_CHECKING:
    Result = _ResultEnum
else:
    Result = _ResultEnum("Result", [(name, code) for code, name in
                                    enumerate(_clnode.result_names())],
                         module="clnode", qualname="Result")
    Result.__doc__ = ("How a trajectory ended: the library's result codes, named as "
                      "clnode_result_name names them (Result.success == 0).")
_RESULT_ARRAY: np.ndarray = np.array(list(Result), dtype=object)
_SUCCESS = Result.__members__["success"]
# the library's precision_floor warning of the solve running on this thread (clnode._log_sink
# hands it over after the call, on the calling thread)
_FLOOR = threading.local()
# one float, or one value per trajectory
PerTrajectory = Union[float, npt.ArrayLike]


def _precision_code(precision):
    if isinstance(precision, str):
        code = _PRECISIONS.get(precision)
    elif precision is None or isinstance(precision, (bool, int, float, np.generic)):
        code = None  # np.dtype(None) would be float64
    else:
        try:
            code = {np.dtype(np.float32): 32, np.dtype(np.float64): 64}.get(np.dtype(precision))
        except TypeError:
            code = None
    if code is None:
        raise ValueError(f"precision must be 'fp32' or 'fp64' (or numpy.float32, "
                         f"numpy.float64), not {precision!r}")
    return code


def _choice(table, value, what):
    try:
        return table[value]
    except (KeyError, TypeError):
        raise ValueError(f"{what} must be one of {', '.join(map(repr, table))}, not {value!r}") \
            from None


class SaveAt:
    """What a solve saves, as diffrax.SaveAt: the initial point (t0), the final point (t1), the
    times `ts` (inside [t0, t1], monotone in the direction of integration, through the dense
    output: shape (T,), shared by the batch, or (B, T), each trajectory its own row) and the end
    of every accepted step (steps). The saved points come in diffrax's
    order: t0, then ts and steps in time order, then t1 (not repeated when steps=True), padded to
    max_steps with +inf when steps=True. Immutable (its fields are checked once, here); ts is a
    read-only float64 array."""

    __slots__ = ("t0", "t1", "ts", "steps")

    t0: bool
    t1: bool
    ts: Optional[np.ndarray]
    steps: bool

    def __init__(self, *, t0: bool = False, t1: bool = False,
                 ts: Optional[npt.ArrayLike] = None, steps: bool = False) -> None:
        init = object.__setattr__
        init(self, "t0", _args.boolean(t0, "SaveAt t0"))
        init(self, "t1", _args.boolean(t1, "SaveAt t1"))
        init(self, "steps", _args.boolean(steps, "SaveAt steps"))
        init(self, "ts", None if ts is None else _save_times(ts))
        if not (self.t0 or self.t1 or self.steps or self.ts is not None):
            raise ValueError("SaveAt saves nothing: set t0, t1, ts or steps")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"clnode.SaveAt is immutable: make a new one (SaveAt({name}=...))")

    def __reduce__(self):  # copy and pickle through the constructor
        return _saveat, (self.t0, self.t1, self.ts, self.steps)

    def __repr__(self) -> str:
        return f"clnode.SaveAt(t0={self.t0}, t1={self.t1}, ts={self.ts}, steps={self.steps})"


def _saveat(t0, t1, ts, steps):
    return SaveAt(t0=t0, t1=t1, ts=ts, steps=steps)


def _save_times(ts):
    """SaveAt's ts: finite times as float64, (T,) shared by the batch or (B, T), a row per
    trajectory (clnode.solve checks B against the batch)."""
    a = _args.real_array(ts, "SaveAt ts")
    if a.ndim not in (1, 2):
        raise ValueError(f"SaveAt(ts=...) must be an array of shape (T,) (times shared by the "
                         f"batch) or (B, T) (each trajectory its own), not of shape {a.shape}")
    a.flags.writeable = False  # a copy (astype copies): the caller's array stays the caller's
    return a


class Solution:
    """The result of clnode.solve.

    ts: (B, T) times of the saved points, ys: (B, T, N) states (without the batch axis when y0
    was (N,)), in the solve's precision (float32 or float64), padded with +inf as diffrax pads
    (SaveAt(steps=True) has max_steps slots). stats: per trajectory (arrays of B, or ints),
    under diffrax's names "num_steps" (attempts), "num_accepted_steps", "num_rejected_steps",
    "max_steps", plus clnode's "num_rhs_evals" and "first_step" (the first step attempted,
    given or chosen by dt0="auto", after the dtmin/dtmax clip and before the clip to the
    interval, signed as the direction of integration so that it reads back as dt0, a float;
    0.0 when t0 == t1: first-step.md). result: per trajectory a clnode.Result (the
    library's code, an IntEnum named as the library names it: Result.success,
    Result.max_steps_reached, ...); for a batch an array of them (dtype object). t_final: where
    each trajectory stopped (t1 on success). certificate: with solve(certify=True), the run's
    precision certificate (a dict: "certified", "num_sampled", "max_deviation_rtol",
    "max_spread_rtol", "samples", ... as clnode_certify in clnode/precision.h), else None.

    A solve with keep_tape=True keeps what its reverse pass needs (the library's tape), and
    Solution.vjp(ys_bar) computes the gradient of any loss of ys from ys_bar = dloss/dys."""

    __slots__ = ("ts", "ys", "stats", "result", "t_final", "certificate", "_tape", "_model",
                 "_single", "_where", "_floor_message")

    ts: np.ndarray
    ys: np.ndarray
    stats: Dict[str, Any]
    result: Any  # a Result, or an array of B of them (dtype object)
    t_final: Union[float, np.ndarray]
    certificate: Optional[Dict[str, Any]]

    def __init__(self, ts: np.ndarray, ys: np.ndarray, stats: Dict[str, Any], result: Any,
                 t_final: Union[float, np.ndarray],
                 certificate: Optional[Dict[str, Any]] = None) -> None:
        self.ts, self.ys, self.stats, self.result, self.t_final = ts, ys, stats, result, t_final
        self.certificate = certificate
        self._tape: Any = None
        self._model: Optional[MLP] = None
        self._single = ys.ndim == 2
        self._where: Any = None  # the solve's context, or device string (its reverse pass's)
        # the library's precision_floor warning of this solve (None without one)
        self._floor_message: Optional[str] = None

    @ieee
    def vjp(self, ys_bar: npt.ArrayLike, device: Optional[str] = None,
            progress: Any = None) -> "Gradient":
        """The reverse pass of a solve with keep_tape=True: the gradient of a loss of ys given
        ys_bar = dloss/dys, of the shape of ys ((B, T, N), or (T, N) for one y0), float64 or
        exactly convertible to it (the padding slots of ys, +inf, are not read; cotangents there
        may be anything finite). Computed by the library's reverse pass on the device the solve
        ran on (its context), or on `device` (a device string; a solve on "host:openblas" goes
        back on "host", whose reverse pass recomputes the steps on the ordered GEMM), in the
        solve's precision, summed over the batch in the library's fixed order: the same bits on
        every device (host, OpenCL, CUDA), at any batch composition and thread count.
        Returns a clnode.Gradient: y0 (the shape of y0), args ((B, k) or (k,) for a model with
        conditioning inputs, else None) and params, a dict named as in the model's safetensors
        file ("layers.<i>.weight", "layers.<i>.bias", "out_scale"). The time arguments get no
        gradient. Raises ValueError (the library's message naming the trajectory, slot and
        component) for a non-finite cotangent; may be called more than once. progress: as
        clnode.solve's, the fraction of the batch gone back through."""
        if self._tape is None:
            raise ValueError("Solution.vjp needs a solve with keep_tape=True (it keeps what the "
                             "reverse pass needs)")
        cot = _args.real_array(ys_bar, "ys_bar", finite=False)
        if cot.shape != self.ys.shape:
            raise ValueError(f"ys_bar must have the shape of ys, {self.ys.shape}, not "
                             f"{cot.shape}")
        if self._single:
            cot = cot.reshape((1,) + cot.shape)
        cot = np.ascontiguousarray(cot)
        g = self._run_on_context(device, progress, "reverse pass, of the batch",
                             lambda ctx, fn: self._tape.gradient(ctx, cot, fn))
        return _gradient(g, self._model, self._single)

    @ieee
    def jvp(self, dy0: Optional[npt.ArrayLike] = None, dargs: Optional[npt.ArrayLike] = None,
            dparams: Optional[Dict[str, npt.ArrayLike]] = None, device: Optional[str] = None,
            progress: Any = None) -> np.ndarray:
        """The tangent pass (forward mode) of a solve with keep_tape=True: the Jacobian-vector
        products d ys = (d ys / d y0) dy0 + (d ys / d args) dargs + (d ys / d params) dparams,
        with the solve's own accepted steps held (as the reverse pass, and as diffrax, whose
        step size controller stops gradients). Directions (each None for zero, float64 or
        exactly convertible): dy0 of the shape of y0, dargs of the conditioning inputs' ((B, k)
        or (k,)), dparams a dict named as Gradient.params ("layers.<i>.weight",
        "layers.<i>.bias", "out_scale"; a missing name is zero), one direction of the
        parameters for the whole batch. Several directions at once (jax.jacfwd's columns): each
        given direction with one more leading axis of the same size D; they go through one
        pass, the ordered GEMMs batched over the directions, and give the same bits as D
        passes of one. Returns ys's tangent, of the shape of ys ((B, T, N), or (T, N) for one
        y0), with the leading axis D when the directions have it; zero at the padding slots.
        Computed by the library on the device the solve ran on (its context), or on `device`,
        and on the host where that device has no tangent pass (the library's tangent pass
        recomputes the steps from the tape on the host's ordered GEMM), in the solve's
        precision: the same bits on every device, at any batch composition.
        The time arguments get no tangent. Raises ValueError for a non-finite direction
        (naming it); may be called more than once. progress: as clnode.solve's."""
        if self._tape is None:
            raise ValueError("Solution.jvp needs a solve with keep_tape=True (it keeps what the "
                             "tangent pass needs)")
        ndir, dirs = _directions(self, dy0, dargs, dparams)
        out = self._tangent(max(ndir, 1), *dirs, device=device, progress=progress)
        if self._single:
            out = out[:, 0]
        return out if ndir else out[0]

    def _tangent(self, ndir: int, dy0: Optional[np.ndarray], dinputs: Optional[np.ndarray],
                 dparams: Optional[np.ndarray], device: Optional[str] = None,
                 progress: Any = None) -> np.ndarray:
        """The tangent pass of ndir directions in the library's layout (also clnode.jax's): dy0
        (ndir, B, N), dinputs (ndir, B, k), dparams (ndir, P) in the library's flat order, each
        None for zero; (ndir, B, T, N). On the solve's context (or `device`'s), and on the host
        where that device has no tangent pass (the library's UnsupportedError: the same bits)."""
        def run(ctx, fn):
            return self._tape.tangent(ctx, ndir, dy0, dinputs, dparams, fn)

        try:
            return self._run_on_context(device, progress, "tangent pass, of the batch", run)
        except _clnode.UnsupportedError:
            if device == "host" or getattr(self._where, "device", self._where) == "host":
                raise
            return self._run_on_context("host", progress, "tangent pass, of the batch", run)

    def _run_on_context(self, device: Optional[str], progress: Any, what: str, run: Any) -> Any:
        """run(context, progress callback) on the context of the solve (or of `device`): the
        caller's context as its solve used it, else the process's for that device (this
        thread's own while another thread uses it: _on_context)."""
        where = self._where if device is None else _reverse_device(None, device)
        fn, close = _progress.callback(progress, what)
        try:
            return _on_context(where, lambda ctx: run(ctx, fn))
        finally:
            close()

    def tape_bytes(self) -> np.ndarray:
        """What the reverse pass reads of a solve with keep_tape=True, as the library's tape
        bytes (a uint8 array; clnode_solution_tape_export, the layout of doc/gradient.md: its
        statistics, saved points' counts and times, and tape; not the saved values, which are
        ys): clnode.vjp_from_tape gives the gradient Solution.vjp gives from them, bit for bit,
        in this process or another with the same model."""
        if self._tape is None:
            raise ValueError("Solution.tape_bytes needs a solve with keep_tape=True")
        out = np.empty(self._tape.nbytes, dtype=np.uint8)
        self._tape.export_into(out)
        return out

    @property
    def ok(self) -> bool:
        """True when every trajectory succeeded."""
        return bool(np.all(np.asarray(self.result) == _SUCCESS))

    def __repr__(self) -> str:
        return (f"clnode.Solution(ts{tuple(self.ts.shape)}, ys{tuple(self.ys.shape)}, "
                f"stats={self.stats}, result={_result_text(self.result)})")


def _on_context(where: Any, call: Any) -> Any:
    """call(context) on `where`: the caller's Context as it is, else the process's context of
    that device string, or this thread's own where another thread uses the process's."""
    if isinstance(where, _clnode.Context):
        return call(where)
    try:
        return call(_context_for(where))
    except _clnode.ContextBusyError:
        return call(_thread_context_for(where))


@ieee
def vjp_from_tape(model: MLP, tape: Any, ys_bar: npt.ArrayLike, device: Optional[str] = None,
                  progress: Any = None) -> "Gradient":
    """The gradient Solution.vjp gives, from the solution's tape bytes (Solution.tape_bytes,
    any C-contiguous buffer of them: numpy, bytes, a torch uint8 tensor's numpy view) and the
    model it was solved with (the same form and parameters, bit for bit: the library checks the
    model's fingerprint). ys_bar: dloss/dys, (B, T, N), or (T, N) for a solve of one y0, T the
    slots of the solution's ys. Computed on `device` (None: the default device). Raises
    clnode.InvalidArgumentError (a ValueError) naming what is wrong with bytes that are not
    such a tape: short, another version, a checksum that does not match (changed), another
    model, ..."""
    cot = _args.real_array(ys_bar, "ys_bar", finite=False)
    single = cot.ndim == 2
    if single:
        cot = cot.reshape((1,) + cot.shape)
    if cot.ndim != 3:
        raise ValueError(f"ys_bar must be (B, T, N) or (T, N), not of shape {cot.shape}")
    cot = np.ascontiguousarray(cot)
    where = _reverse_device(None, device)
    fn, close = _progress.callback(progress, "reverse pass, of the batch")
    try:
        g = _on_context(where, lambda ctx: _clnode.tape_import(
            ctx, model._m, tape, cot.shape[1]).gradient(ctx, cot, fn))
    finally:
        close()
    return _gradient(g, model, single)


class Gradient(NamedTuple):
    """Solution.vjp's gradient: y0 (the shape of y0), args (the conditioning inputs' shape,
    (B, k) or (k,); None for a model without) and params, a dict of the model's parameters'
    gradients named as in its safetensors file: "layers.<i>.weight" (out, in),
    "layers.<i>.bias" (out,) and "out_scale" (shape () for one value, (N,) for one per
    component) where the model has them."""

    y0: np.ndarray
    args: Optional[np.ndarray]
    params: Dict[str, np.ndarray]


def _gradient(g: Dict[str, Any], model: Any, single: bool) -> Gradient:
    """The Gradient of the extension's dict of Tape.gradient."""
    params: Dict[str, np.ndarray] = {}
    for i, (w, b) in enumerate(zip(g["weights"], g["biases"])):
        params[f"layers.{i}.weight"] = w
        if b is not None:
            params[f"layers.{i}.bias"] = b
    s = g["out_scale"]
    if s is not None:
        params["out_scale"] = s.reshape(()) if s.size == 1 else s
    y0, c = g["y0"], g["inputs"]
    if single:
        y0 = y0[0]
        c = None if c is None else c[0]
    return Gradient(y0, c, params)


_Dirs = Tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]


def _directions(sol: Solution, dy0: Any, dargs: Any, dparams: Any) -> Tuple[int, _Dirs]:
    """Solution.jvp's directions in the library's layout: (D, (dy0 (D, B, N), dinputs (D, B, k),
    dparams (D, P))), each None for zero; D = 0 when the directions have no leading axis of
    their own (one direction)."""
    m = sol._model
    assert m is not None
    ys = sol.ys if not sol._single else sol.ys[None]
    B, N = ys.shape[0], ys.shape[2]
    k = m.num_inputs
    layers = [(f"layers.{i}.weight", np.shape(w)) for i, w in enumerate(m.weights)]
    layers += [(f"layers.{i}.bias", np.shape(b)) for i, b in enumerate(m.biases) if b is not None]
    s = m.out_scale
    known = dict(layers + ([("out_scale", () if s.size == 1 else (s.size,))] if s is not None
                          else []))
    if dparams is not None and not isinstance(dparams, dict):
        raise TypeError("dparams must be a dict named as Gradient.params, not "
                        f"{type(dparams).__name__}")
    for name in (dparams or {}):
        if name not in known:
            raise ValueError(f"dparams: the model has no parameter {name!r} (it has "
                             f"{', '.join(known)})")
    single = (N,) if sol._single else (B, N)
    given = [("dy0", dy0, single), ("dargs", dargs, (k,) if sol._single else (B, k))]
    given += [(f"dparams[{n!r}]", (dparams or {}).get(n), known[n]) for n in known]
    ndir = None
    arrays = {}
    for name, x, shape in given:
        if x is None:
            continue
        a = _args.real_array(x, name, finite=False)
        if a.shape == shape:
            d = 0
        elif a.ndim == len(shape) + 1 and a.shape[1:] == shape:
            d = a.shape[0]
        else:
            raise ValueError(f"{name} must have the shape {shape} (one direction) or (D,) + "
                             f"{shape} (D directions), not {a.shape}")
        if ndir is not None and d != ndir:
            raise ValueError(f"{name} has {d or 'no'} direction axis, the other directions "
                             f"{ndir or 'none'}")
        ndir = d
        arrays[name] = a.reshape((max(d, 1),) + shape)
    if ndir is None:
        raise ValueError("Solution.jvp needs a direction: dy0, dargs or dparams")
    D = max(ndir, 1)
    dy = arrays.get("dy0")
    dy = None if dy is None else np.ascontiguousarray(dy.reshape(D, B, N), np.float64)
    dc = arrays.get("dargs")
    if dc is not None and k == 0:
        raise ValueError("dargs: the model has no conditioning inputs")
    dc = None if dc is None else np.ascontiguousarray(dc.reshape(D, B, k), np.float64)
    dp = None
    if any(f"dparams[{n!r}]" in arrays for n in known):
        dp = np.concatenate([arrays.get(f"dparams[{n!r}]", np.zeros((D,) + known[n])).reshape(
            D, -1) for n in _flat_names(m)], axis=1)
    return ndir, (dy, dc, None if dp is None else np.ascontiguousarray(dp, np.float64))


def _flat_names(m: Any) -> List[str]:
    """The parameters' names in the library's flat order (clnode_gradient_params)."""
    names = [n for i, b in enumerate(m.biases) for n in
             ([f"layers.{i}.weight"] + ([f"layers.{i}.bias"] if b is not None else []))]
    return names + (["out_scale"] if m.out_scale is not None else [])


def _result_text(result: Any) -> str:
    """A result (or an array of them) by name."""
    if isinstance(result, np.ndarray):
        return np.array2string(result, formatter={"all": str})
    return str(result)


class Context(_clnode.Context):
    """One compute device with its caches (kernels, GEMM probes): "host", "host:openblas",
    "opencl", "opencl:N", "opencl:gpu", "opencl:pocl", "cuda", "cuda:N", "cuda:N:cublas"; None
    means $CLNODE_DEVICE, else "host". Raises clnode.DeviceError (no such device: the message
    lists what exists) or clnode.UnsupportedError (a backend this build lacks).

    A context is used by one thread at a time (another thread gets clnode.ContextBusyError);
    solves in different contexts run in parallel (the GIL is released while solving)."""

    device: str

    def __init__(self, device: Optional[str] = None) -> None:
        super().__init__(_device_arg(device))
        self.device = device if device is not None else _default_device()

    def solve(self, model: MLP, y0: npt.ArrayLike,  # type: ignore[override]
              **kwargs: Any) -> "Solution":
        """clnode.solve on this context (same arguments, without device=)."""
        return solve(model, y0, context=self, **kwargs)

    def supports(self, precision: Any) -> bool:
        """Whether this device computes in `precision`: "fp32" or "fp64" (or the library's codes
        32 and 64)."""
        code = not isinstance(precision, (bool, np.bool_)) and \
            isinstance(precision, (int, np.integer)) and int(precision) in (32, 64)
        if code:
            return super().supports(int(precision))
        return super().supports(_precision_code(precision))

    def probe(self, precision: Any = "fp32",  # type: ignore[override]
              gemm_precision: str = "strict") -> Dict[str, Any]:
        """What this device's GEMM computes in `precision` and `gemm_precision`: a dict of the
        library's probe (identity/outer exactness, effective bits, class such as "fp32" or
        "tf32-like", unit_roundoff). Cached in the context."""
        return super().probe(_precision_code(precision), _choice(_GEMM, gemm_precision,
                                                                 "gemm_precision"))

    def __repr__(self) -> str:
        return f"clnode.Context({self.device!r}: {self.device_name})"


def _default_device():
    """The device that device=None means (as the library reads it: an empty $CLNODE_DEVICE is
    unset)."""
    return os.environ.get("CLNODE_DEVICE") or "host"


def _device_arg(device):
    """A device string (not empty: the library would read "" as the default), or None."""
    if device is None:
        return None
    if not isinstance(device, str):
        raise TypeError(f"device must be a device string such as 'host' (or None for "
                        f"$CLNODE_DEVICE, else host), not {device!r}")
    if not device:
        raise ValueError("device must be a device string such as 'host' (or None for "
                         "$CLNODE_DEVICE, else host), not ''")
    return device


_cache_lock = threading.Lock()
_contexts: Dict[str, "Context"] = {}
_local = threading.local()


def _context_for(device):
    key = _default_device() if _device_arg(device) is None else device
    ctx = _contexts.get(key)
    if ctx is None:
        with _cache_lock:
            ctx = _contexts.get(key)
            if ctx is None:
                ctx = _contexts[key] = Context(key)
    return ctx


def _thread_context_for(device):
    key = _default_device() if _device_arg(device) is None else device
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    if key not in cache:
        cache[key] = Context(key)
    return cache[key]


_float64_array = _args.real_array
_EXACT_INT = _args.EXACT_INT


def _per_trajectory(value, name, B, single, optional=False):
    """A scalar (returned as a float) or one value per trajectory ((B,) array)."""
    if optional and value is None:
        return None
    # the common case first, without numpy: a finite Python float, or an int float64 holds
    if (type(value) is float and math.isfinite(value)) or (
            type(value) is int and -_EXACT_INT <= value <= _EXACT_INT):
        return float(value)
    a = _float64_array(value, name)
    if a.ndim == 0:
        return float(a)
    if single or a.ndim != 1 or a.shape[0] != B:
        want = "a scalar" if single else f"a scalar or an array of shape ({B},)"
        extra = (" (per-trajectory values need y0 of shape (B, N); np.broadcast_to(y0, (B, N)) "
                 "gives B copies)") if single else ""
        raise ValueError(f"{name} must be {want}, not of shape {a.shape}{extra}")
    return a


def _inputs(args, model, B, single):
    """The (B, k) conditioning inputs of a model with k inputs, or None for a model without."""
    k = model.num_inputs
    if k == 0:
        if args is not None:
            raise ValueError("args given but the model has no conditioning inputs (a model with "
                             "k inputs takes [y, c]: MLP(..., inputs=k), from_equinox(..., "
                             "inputs=k) or the safetensors metadata inputs = \"k\")")
        return None
    if args is None:
        raise ValueError(f"the model takes {k} conditioning inputs: pass args of shape "
                         + (f"({k},)" if single else f"({B}, {k}) or ({k},)"))
    a = _float64_array(args, "args")
    if a.shape == (k,):
        return np.ascontiguousarray(np.broadcast_to(a, (B, k)))
    if single or a.shape != (B, k):
        want = f"({k},)" if single else f"({B}, {k}) or ({k},)"
        raise ValueError(f"args must have shape {want} (the model has {k} conditioning "
                         f"inputs), not {a.shape}")
    return np.ascontiguousarray(a)


@ieee
def solve(model: MLP, y0: npt.ArrayLike, *, t0: PerTrajectory, t1: PerTrajectory,
          dt0: Union[PerTrajectory, str, None] = None, args: Optional[npt.ArrayLike] = None,
          saveat: Optional["SaveAt"] = None, device: Optional[str] = None,
          context: Optional["Context"] = None, certify: bool = False,
          certify_fraction: float = 0.01, certify_seed: int = 1, progress: Any = None,
          **options: "Unpack[_clnode.SolveOptions]") -> "Solution":
    """Solves dy/dt = model(y) from t0 to t1 for one initial state y0 (N,) or a batch (B, N),
    every trajectory with its own steps, as jax.vmap(diffrax.diffeqsolve) does.

    Every trajectory may be its own problem: t0, t1 and dt0 are scalars or arrays of shape (B,)
    (jax.vmap over diffeqsolve's t0, t1, dt0), all of one direction (t1 - t0 of one sign;
    t0 == t1 takes no step). args: the conditioning inputs of a model with k inputs
    (MLP(..., inputs=k): the network takes [y, c] or [y, t, c]), shape (B, k), or (k,) for one
    c shared by the batch; required for such a model, refused for others. Each trajectory is
    solved exactly as it would be alone with its own values (same steps, same bits).
    SaveAt(ts=...) of shape (T,) is one list shared by the batch: each trajectory saves the
    times inside its own interval, in order, and its row of ts/ys holds only those (then the
    other saved points), padded at the end with +inf as diffrax pads. SaveAt(ts=...) of shape
    (B, T) (jax.vmap over SaveAt(ts=...), y0 of shape (B, N)) gives each trajectory its own
    row of times, monotone in the direction of integration and inside that trajectory's own
    [t0, t1]: its row of Solution.ts holds its own times, and each trajectory is solved exactly
    as alone with its row as SaveAt(ts=row). Values are float64 or exactly
    convertible to it (float32, integers up to 2^53); NaN, infinities, strings, complex numbers
    and long doubles are refused. dt0=None: 0.01, what diffrax 0.7.2's dt0=None gives (its
    PIDController would choose a step, but the wrapped terms diffeqsolve passes make it return
    0.01); dt0="auto": each trajectory's first step chosen as torchode and torchdiffeq choose it
    (Hairer, Norsett & Wanner's estimate from two field evaluations; the option dt0_auto, see
    doc/python.md), held in the gradient as every step size. saveat:
    clnode.SaveAt (default: t1 only). device: the device string (one cached Context per device
    per process, another per thread when that one is busy); context: a Context to use instead.
    certify=True: after the solve, re-solve a seeded random sample of the trajectories
    (certify_fraction of them, at least one; certify_seed picks them) on the host in float64 next
    to their rounding-sensitivity baseline, and return the run's precision certificate as
    Solution.certificate (the certificate of clnode-solve --certify). progress: None (default:
    no Python runs for progress), True (a line on stderr, as clnode-solve shows on a terminal) or
    a callable fn(fraction, active, batch, steps): fraction the smallest fraction of [t0, t1]
    covered by an active trajectory, active the trajectories still running of batch, steps the
    groups' steps so far; called between groups of steps (with the GIL, on the solving thread), at
    most once a second and only once the solve has run for about a second; an exception it raises
    stops the solve and is raised.

    The solve options are the library's option table (clnode.OPTIONS), as keywords; one left
    out has its default (dtmin=None, dtmax=None: no bound). The step size follows diffrax's PIDController (rtol, atol,
    pcoeff, icoeff, dcoeff, dtmin, dtmax, force_dtmin, factormin, factormax, safety), or constant
    steps of dt0 with constant_step=True. With SaveAt(steps=True), whose arrays have max_steps
    slots, max_steps lies in [1, 16777216]. precision_guard "warn" issues
    clnode.PrecisionWarning, "refuse" raises clnode.PrecisionError.
{options}
    Every argument is taken as what it says or refused by name: booleans must be bool (or
    numpy.bool_), integers integers, the numbers real (not strings), arrays no more dimensions
    than the argument takes (nothing is flattened).

    Returns a clnode.Solution. Raises TypeError for an argument of the wrong kind or a keyword
    that is not an option, ValueError (clnode.InvalidArgumentError from the library, with its
    message) for bad values; other clnode.Error subclasses for device failures;
    KeyboardInterrupt on Ctrl-C (the solve stops within one group of steps). The GIL is released
    while solving."""
    if not isinstance(model, MLP):
        raise TypeError(f"model must be a clnode.MLP, not {type(model).__name__} (see "
                        "clnode.from_equinox, clnode.from_torch, clnode.MLP.load)")
    y = _float64_array(y0, "y0")
    single = y.ndim == 1
    if single:
        y = y.reshape(1, -1)
    elif y.ndim != 2:
        raise ValueError(f"y0 must have shape (N,) or (B, N), not {y.shape}")
    B = y.shape[0]
    t0v = _per_trajectory(t0, "t0", B, single)
    t1v = _per_trajectory(t1, "t1", B, single)
    auto = isinstance(dt0, str)
    if auto and dt0 != "auto":
        raise ValueError(f'dt0 must be a number, an array, None or "auto", not {dt0!r}')
    dt0v = None if auto else _per_trajectory(dt0, "dt0", B, single, optional=True)
    inputs = _inputs(args, model, B, single)
    opts = _table_options(options)
    if auto:
        opts.update(_table_options({"dt0_auto": True}))
    save = _saveat_options(saveat)
    _check_save_rows(save["save_ts"], B, single)
    opts.update(save_t0=save.pop("save_t0"), save_t1=save.pop("save_t1"),
                save_steps=save.pop("save_steps"))
    # the scalar interval; per-trajectory arrays are passed beside the options
    for key, v in (("t0", t0v), ("t1", t1v), ("dt0", dt0v)):
        if isinstance(v, float):
            opts[key] = v
    extra: Dict[str, Any] = dict(save)
    for key, v in (("t0s", t0v), ("t1s", t1v), ("dt0s", dt0v)):
        if isinstance(v, np.ndarray):
            extra[key] = v
    if inputs is not None:
        extra["inputs"] = inputs
    extra.update(_certify_options(certify, certify_fraction, certify_seed))
    fn, close = _progress.callback(progress, "of [t0, t1]")
    if fn is not None:
        extra["progress"] = fn
    _FLOOR.message = None
    try:
        out = _run(context, device, model, y, opts, extra)
    finally:
        close()
    sol = _solution(out, single, opts.get("max_steps", int(OPTIONS["max_steps"]["default"])))
    sol._floor_message, _FLOOR.message = _FLOOR.message, None
    if out[5] is not None:
        sol._tape, sol._model, sol._where = out[5], model, _reverse_device(context, device)
    return sol


def _reverse_device(context: Optional[_clnode.Context], device: Optional[str]) -> Any:
    """Where the reverse pass of a solve on `context` or `device` runs: that context, or that
    device's string (host:openblas: the host's ordered GEMM, which its reverse pass needs)."""
    spec = getattr(context, "device", None) if context is not None else (
        _default_device() if _device_arg(device) is None else device)
    if isinstance(spec, str) and spec.startswith("host:openblas"):
        return "host"
    return context if context is not None else spec


def _option_value(info: Dict[str, Any], value: object) -> Any:
    """`value` of a table option as the extension takes it, checked for its kind (the library
    checks the range)."""
    name, kind = info["name"], info["type"]
    if kind == "real":
        return _args.real(value, name, finite=True)
    if kind == "integer":
        return _args.integer(value, name, int(info["min"]), int(info["max"]))
    if kind == "boolean":
        return _args.boolean(value, name)
    if name == "precision":  # also numpy.float32, "float64", ...
        return {32: "fp32", 64: "fp64"}[_precision_code(value)]
    names = [c if isinstance(c, str) else c[0] for c in info["choices"]]
    if isinstance(value, str) and value in names:
        return value
    raise ValueError(f"{name} must be one of {', '.join(map(repr, names))}, not {value!r}")


def _table_options(options: Mapping[str, object]) -> Dict[str, Any]:
    """solve's keywords of the option table, checked and converted. None is refused as a value,
    but for a bound whose default 0 means none (dtmin, dtmax): None means none too;
    checkpoint_every without keep_tape=True is refused."""
    out: Dict[str, Any] = {}
    for name, value in options.items():
        info = OPTIONS.get(name)
        if info is None or info["flags"] & (_PROBLEM | _SAVE):
            hint = (" (pass saveat=clnode.SaveAt(...))" if info and info["flags"] & _SAVE
                    else "")
            raise TypeError(f"solve() got an unexpected keyword argument {name!r}{hint}")
        if value is None and info["type"] == "real" and info["min"] == info["default"] == 0.0:
            continue  # a bound that 0 turns off (dtmin, dtmax): None is none
        out[name] = _option_value(info, value)
    if "checkpoint_every" in out and not out.get("keep_tape"):
        raise ValueError("checkpoint_every spaces the states a solve keeps for its reverse pass: "
                         "it needs keep_tape=True (without a tape it would do nothing)")
    return out


def _options_doc() -> str:
    """The options' lines of solve's docstring, from the library's table."""
    lines = []
    for o in OPTIONS.values():
        if o["flags"] & (_PROBLEM | _SAVE):
            continue
        if o["type"] in ("choice", "method"):
            names = [c if isinstance(c, str) else c[0] for c in o["choices"]]
            default = names[int(o["default"])] if o["type"] == "method" else next(
                c[0] for c in o["choices"] if c[1] == o["default"])
            what = f"one of {', '.join(map(repr, names))}; default {default!r}"
        elif o["type"] == "boolean":
            what = f"bool; default {bool(o['default'])}"
        else:
            what = f"default {o['default']:g}" if o["type"] == "real" else \
                f"default {int(o['default'])}, in [{int(o['min'])}, {int(o['max'])}]"
        lines.append(f"    {o['name']}: {o['doc']} ({what}).")
    return "\n".join(lines) + "\n"


solve.__doc__ = (solve.__doc__ or "").replace("{options}\n", _options_doc())


def _saveat_options(saveat: Optional["SaveAt"]) -> Dict[str, Any]:
    """The extension's save_t0, save_t1, save_steps and save_ts of solve's saveat."""
    if saveat is None:
        return dict(save_t0=False, save_t1=True, save_steps=False, save_ts=None)
    if not isinstance(saveat, SaveAt):
        raise TypeError("saveat must be a clnode.SaveAt (for diffrax.SaveAt use "
                        "clnode.jax.diffeqsolve)")
    return dict(save_t0=saveat.t0, save_t1=saveat.t1, save_steps=saveat.steps,
                save_ts=saveat.ts)


def _check_save_rows(ts: Optional[np.ndarray], B: int, single: bool) -> None:
    """SaveAt(ts=...) of shape (B, T) has one row per trajectory of the batch."""
    if ts is None or ts.ndim == 1:
        return
    if single:
        raise ValueError(f"SaveAt(ts=...) of shape {ts.shape} gives each trajectory its own "
                         "times, but y0 of shape (N,) is one trajectory: give ts of shape (T,), "
                         "or y0 of shape (B, N)")
    if ts.shape[0] != B:
        raise ValueError(f"SaveAt(ts=...) of shape {ts.shape} has {ts.shape[0]} rows, but the "
                         f"batch has {B} trajectories: (B, T) holds one row of save times per "
                         "trajectory")


def _certify_options(certify: bool, certify_fraction: float,
                     certify_seed: int) -> Dict[str, Any]:
    """The extension's certify and certify_seed (none without certify)."""
    fraction = _args.real(certify_fraction, "certify_fraction", finite=True)
    seed = _args.integer(certify_seed, "certify_seed", 0, _args.UINT64_MAX)
    if not _args.boolean(certify, "certify"):
        return {}
    assert fraction is not None
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"certify_fraction must be in (0, 1], not {certify_fraction!r}")
    return dict(certify=fraction, certify_seed=seed)


def _run(context: Optional[_clnode.Context], device: Optional[str], model: MLP, y: np.ndarray,
         opts: Dict[str, Any], extra: Dict[str, Any]) -> Tuple[Any, ...]:
    """The extension's solve, on `context` or on the cached context of `device` (this thread's
    own when another thread solves on the process's): the one call of Context.solve of the
    extension, for clnode.solve and clnode.Context.solve alike."""
    if context is not None:
        if not isinstance(context, _clnode.Context):
            raise TypeError(f"context must be a clnode.Context, not {type(context).__name__}")
        if device is not None:
            raise ValueError("pass device= or context=, not both")
        ctx = context
    else:
        ctx = _context_for(device)
    try:
        return _clnode.Context.solve(ctx, model._m, y, opts, **extra)
    except _clnode.ContextBusyError:
        if context is not None:
            raise
    # another thread solves on the shared context: this thread's own
    return _clnode.Context.solve(_thread_context_for(device), model._m, y, opts, **extra)


def _solution(out: Tuple[Any, ...], single: bool, max_steps: int) -> Solution:
    """The Solution of the extension's (ts, ys, stats, t_final, certificate, tape, first_step)."""
    ts, ys, st, t_final, cert = out[:5]
    first = out[6]
    if single:  # plain Python numbers: no per-field numpy indexing
        res, n, acc, rej, rhs = st[0].tolist()
        stats = {"num_steps": n, "num_accepted_steps": acc, "num_rejected_steps": rej,
                 "max_steps": max_steps, "num_rhs_evals": rhs, "first_step": float(first[0])}
        return Solution(ts[0], ys[0], stats, Result(res), float(t_final[0]), cert)
    stats = {"num_steps": st[:, 1], "num_accepted_steps": st[:, 2],
             "num_rejected_steps": st[:, 3], "max_steps": max_steps,
             "num_rhs_evals": st[:, 4], "first_step": first}
    return Solution(ts, ys, stats, _RESULT_ARRAY[st[:, 0]], t_final, cert)


def devices() -> "list[Dict[str, Any]]":
    """Every device this build reaches, as dicts with the facts clnode-devices prints: "spec"
    (the string for Context/solve), "backend", "engine" (what computes its strict GEMMs),
    "name", "vendor", "platform", "driver_version", "opencl_c_version", "compute_capability",
    "compute_units", "global_mem", "fp64". Backends without devices are left out; see
    clnode._clnode.devices() for the per-backend notes (why a backend has none)."""
    devs, _ = _clnode.devices()
    return devs


def probe(device: Optional[str] = None) -> Dict[str, Any]:
    """What `device` computes, as clnode-devices reports it: {"device", "backend", "name",
    "facts" (the driver's fp64/fma/denormals/correctly-rounded div-sqrt), "gemm": {"fp32/strict",
    "fp32/tf32", "fp64/strict": the GEMM probe, or {"error": message} where not available}}.
    Uses (and caches) the process's context of that device."""
    ctx = _context_for(device)
    out = {"device": ctx.device, "backend": ctx.backend, "name": ctx.device_name,
           "facts": ctx.facts(), "gemm": {}}
    for prec, mode in (("fp32", "strict"), ("fp32", "tf32"), ("fp64", "strict")):
        try:
            out["gemm"][f"{prec}/{mode}"] = ctx.probe(prec, mode)
        except _clnode.Error as e:
            out["gemm"][f"{prec}/{mode}"] = {"error": str(e), "status": getattr(e, "status", "")}
    return out
