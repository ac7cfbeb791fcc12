"""diffrax.diffeqsolve's arguments mapped into what clnode solves: every check that may
refuse a call (take: UnsupportedArgument, or the field's Refusal, before anything is solved),
then the call's frozen Problem (its structural settings: the sizes, the dtypes, the network's
layout, the save options, clnode.solve's options) and its named Operands (the arrays the
primitives carry); and solve_settings, the same mapping as clnode.solve's keywords."""
import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

import diffrax
import jax
import jax.numpy as jnp

from .. import _args, _clnode, _model, _solve
from . import _field
from ._fallback import UnsupportedArgument

# diffrax's progress meters that clnode.jax takes (the callback reports the library's progress to
# the one of a call: _callback._meter)
PROGRESS_METERS = (diffrax.NoProgressMeter, diffrax.TextProgressMeter, diffrax.TqdmProgressMeter)
_SOLVERS: Dict[type, str] = {
    diffrax.Tsit5: "tsit5", diffrax.Dopri5: "dopri5", diffrax.Dopri8: "dopri8",
    diffrax.Bosh3: "bosh3", diffrax.Heun: "heun", diffrax.Euler: "euler"}
# Where each option of the library's table comes from in diffeqsolve: the table's controller
# options that PIDController has, from the controller; what diffrax's own arguments say; the rest
# are clnode's keywords of diffeqsolve (gemm_precision, precision_guard, ...).
_PID_FIELDS = frozenset(f.name for f in dataclasses.fields(diffrax.PIDController))
_FROM_ARGUMENTS = {"method": "solver", "precision": "the dtype of y0 (float32: fp32, float64: "
                   "fp64)", "t0": "t0", "t1": "t1", "dt0": "dt0", "max_steps": "max_steps",
                   "constant_step": "stepsize_controller (ConstantStepSize)"}


def _option_route(info: Dict[str, Any]) -> str:
    """Where diffeqsolve takes option `info` of the table from."""
    if info["name"] in _FROM_ARGUMENTS:
        return _FROM_ARGUMENTS[info["name"]]
    if info["flags"] & _solve._CONTROLLER and info["name"] in _PID_FIELDS:
        return "stepsize_controller (PIDController)"
    if info["flags"] & _solve._SAVE:
        return "saveat"
    return "keyword"


_ROUTES = {name: _option_route(info) for name, info in _solve.OPTIONS.items()}
PID_OPTIONS = tuple(n for n, r in _ROUTES.items() if r == "stepsize_controller (PIDController)")
KEYWORDS = tuple(n for n, r in _ROUTES.items() if r == "keyword")


def _unsupported(name, what):
    return UnsupportedArgument(f"clnode.jax.diffeqsolve does not support {name}: {what}")


def _is_tracer(x):
    return isinstance(x, jax.core.Tracer)


def _static_float(x, name):
    if x is None:
        return None
    if _is_tracer(x):
        raise _unsupported(name, "it must be a concrete number, not a traced value")
    if isinstance(x, (bool, np.bool_, str, bytes)):
        raise TypeError(f"{name} must be a real number, not {x!r}")
    return _args.real(np.asarray(x), name)


def _controller_options(ctrl, dt0, traced=False):
    """The table's options of the step size controller; traced: a traced number (rtol, atol, a
    coefficient) kept as it is, for the custom calls' operand ctrl (else refused)."""
    if type(ctrl) is diffrax.ConstantStepSize:
        if dt0 is None:
            raise ValueError("ConstantStepSize needs dt0")
        return {"constant_step": True}
    clip = getattr(diffrax, "ClipStepSizeController", None)
    if clip is not None and type(ctrl) is clip:
        raise _unsupported("PIDController(step_ts=..., jump_ts=...) (or a "
                           "ClipStepSizeController)", "clnode steps where its controller says, "
                           "with no times to step to or jump at (diffrax makes these a "
                           "ClipStepSizeController)")
    if type(ctrl) is not diffrax.PIDController:
        raise _unsupported("stepsize_controller", f"{type(ctrl).__name__} (clnode has "
                           "PIDController and ConstantStepSize)")
    for name in ("step_ts", "jump_ts", "error_order"):
        if getattr(ctrl, name, None) is not None:
            raise _unsupported(f"PIDController({name}=...)", "not implemented in clnode")
    default_norm = diffrax.PIDController(rtol=1.0, atol=1.0).norm
    if ctrl.norm is not default_norm:
        raise _unsupported("PIDController(norm=...)", "clnode uses diffrax's default RMS norm")
    o: Dict[str, Any] = {"constant_step": False}
    for name in PID_OPTIONS:  # the table's controller options, as PIDController holds them
        info, v = _solve.OPTIONS[name], getattr(ctrl, name)
        what = f"PIDController({name}=...)"
        if info["type"] == "boolean":
            o[name] = _args.boolean(v, what)
        elif traced and _is_tracer(v):
            if jnp.ndim(v) != 0:
                raise ValueError(f"{what} must be a scalar, not of shape {jnp.shape(v)}")
            o[name] = v
        else:
            o[name] = _static_float(v, what)
    return o


def _saveat_options(saveat):
    if type(saveat) is not diffrax.SaveAt:
        raise _unsupported("saveat", f"{type(saveat).__name__} (pass a diffrax.SaveAt)")
    if saveat.dense:
        raise _unsupported("SaveAt(dense=True)", "clnode returns no interpolation")
    for name in ("solver_state", "controller_state", "made_jump"):
        if getattr(saveat, name):
            raise _unsupported(f"SaveAt({name}=True)", "clnode does not return it")
    sub = saveat.subs
    if type(sub) is not diffrax.SubSaveAt:
        raise _unsupported("SaveAt(subs=...)", "a pytree of several SubSaveAt (use one "
                           "SaveAt(t0=, t1=, ts=, steps=))")
    if sub.fn is not diffrax.SubSaveAt(t1=True).fn:
        raise _unsupported("SubSaveAt(fn=...)", "clnode saves y itself")
    steps = _args.integer(sub.steps, "SaveAt(steps=...)")
    if steps not in (0, 1):
        raise _unsupported(f"SaveAt(steps={steps})", "clnode saves every step or none")
    ts = sub.ts
    if ts is not None and np.ndim(ts) != 1:
        raise ValueError(f"SaveAt(ts=...) must be a 1-d array of times, not of shape "
                         f"{tuple(np.shape(ts))}"
                         + (" (as diffrax.diffeqsolve; for each trajectory its own times, "
                            "jax.vmap over them: every trajectory of the batch passes its own "
                            "1-d ts)" if np.ndim(ts) == 2 else ""))
    return (_args.boolean(sub.t0, "SaveAt(t0=...)"), _args.boolean(sub.t1, "SaveAt(t1=...)"),
            bool(steps), ts)


def jitting():
    """Whether this runs under a jax.jit trace (where a callback's error reaches the caller
    only through XLA's runtime error)."""
    return _is_tracer(jnp.asarray(1) + 1)


def _leaves_concrete(tree):
    return not any(_is_tracer(x) for x in jax.tree_util.tree_leaves(tree))


def scale_value(factor, what):
    """The model's output scale from the factor s as one value per component (N values): None
    when it is 1 (the field is the network itself), a float when one value for every component,
    else the N values. A non-finite factor is refused (`what` says where it comes from)."""
    s, why = _model._constant_factor(np.reshape(np.asarray(factor, np.float64), (1, -1)))
    if why:
        raise what(f"the factor s of the field's network is not finite ({factor})")
    if np.all(s == 1.0):
        return None
    return float(s[0]) if s.size == 1 else s


def check_save_ts(ts, t0, t1):
    """diffrax refuses save times outside [t0, t1] and save times out of order: so does
    clnode.jax.diffeqsolve, naming the trajectory. ts: one list (T,) for every trajectory, or
    (B, T), each trajectory its own (under jax.vmap over the save times); t0, t1: scalars or
    one per trajectory. (clnode.solve instead clips a shared list to each trajectory's
    interval.)"""
    rows = np.atleast_2d(np.asarray(ts, np.float64))
    if rows.size == 0:
        return
    t0, t1 = np.broadcast_arrays(np.atleast_1d(t0), np.atleast_1d(t1))
    lo, hi = np.minimum(t0, t1), np.maximum(t0, t1)
    sign = np.where(t1 >= t0, 1.0, -1.0)
    many = max(t0.size, rows.shape[0]) > 1
    back = sign[:, None] * np.diff(rows, axis=1) < 0
    outside = (rows.min(axis=1) < lo) | (rows.max(axis=1) > hi)
    for bad, what, theirs in (
            (np.any(back, axis=1), "{who} is not monotone in the direction of integration (from "
             "t0 = {a:g} to t1 = {b:g})", "saveat.ts must be increasing or decreasing."),
            (outside, " has times outside the interval{who} [{a:g}, {b:g}]",
             "saveat.ts must lie between t0 and t1.")):
        bad = np.broadcast_to(bad, np.broadcast_shapes(bad.shape, lo.shape))
        if not np.any(bad):
            continue
        b = int(np.flatnonzero(bad)[0])
        row = rows[b if rows.shape[0] > 1 else 0]
        who = f" of trajectory {b}" if many else ""
        where = what.format(who=who, a=t0[b % t0.size], b=t1[b % t1.size])
        raise ValueError(f"clnode.jax.diffeqsolve: SaveAt(ts=...){where} (its times: "
                         f"{np.array2string(row, precision=6, threshold=8)}); "
                         f"diffrax.diffeqsolve refuses this too (\"{theirs}\")")


def _time_arg(x, name):
    """t0, t1 or dt0: a real scalar (a traced one too), refused by name otherwise."""
    if x is None:
        if name == "dt0":
            return
        raise TypeError(f"clnode.jax.diffeqsolve: {name} must be a real number, not None")
    if isinstance(x, (bool, np.bool_, str, bytes)):
        raise TypeError(f"clnode.jax.diffeqsolve: {name} must be a real number, not {x!r}")
    shape = np.shape(x)
    if shape != ():
        raise ValueError(f"clnode.jax.diffeqsolve: {name} must be a scalar, not of shape {shape} "
                         "(jax.vmap over it for one value per trajectory)")


def _promote(y0, t0, t1, dt0, save_ts):
    """y0 as an array of the dtype diffrax.diffeqsolve gives it, and the times' dtype: the times'
    dtype is jnp.result_type of t0, t1, dt0 and SaveAt(ts=...) (the default floating dtype for
    integer times), y0's is jnp.result_type(y0, time dtype), under standard promotion."""
    if not isinstance(y0, (jax.Array, np.ndarray, np.generic, float, int)):
        kind = type(y0).__name__
        raise _unsupported(f"a pytree state (y0 is a {kind})", "clnode.jax takes y0 as one "
                           "array, not a pytree (clnode's state is one vector)")
    for name, x in (("t0", t0), ("t1", t1), ("dt0", dt0)):
        _time_arg(x, name)
    timelikes = [x for x in (t0, t1, dt0, save_ts) if x is not None]
    with jax.numpy_dtype_promotion("standard"):
        time_dtype = jnp.result_type(*timelikes)
    if jnp.issubdtype(time_dtype, jnp.integer):
        x64 = jax.config.jax_enable_x64  # type: ignore[attr-defined]
        time_dtype = jnp.dtype(jnp.float64 if x64 else jnp.float32)
    elif not jnp.issubdtype(time_dtype, jnp.floating) or \
            jnp.issubdtype(time_dtype, jnp.complexfloating):
        raise _unsupported(f"times of dtype {time_dtype}", "t0, t1, dt0 and SaveAt(ts=...) must "
                           "be real numbers")
    with jax.numpy_dtype_promotion("standard"):
        y_dtype = jnp.result_type(y0, time_dtype)
    if y_dtype not in (jnp.float32, jnp.float64):
        raise _unsupported(f"y0 of dtype {jnp.result_type(y0)}",
                           f"it becomes {y_dtype} with times of dtype {time_dtype} (as diffrax "
                           "promotes it) and clnode solves in float32 or float64")
    y0 = jnp.asarray(y0, y_dtype)
    if y0.ndim != 1:
        raise _unsupported(f"y0 of shape {y0.shape}", "clnode's state is a vector (vmap over "
                           "a batch of initial states)")
    return y0, jnp.dtype(time_dtype)


def _check_save_ts_now(save_ts, t0, t1):
    """The save times against [t0, t1] where all three are concrete: refused here, before any
    callback (traced ones are checked by _check_save_ts_traced and in the callback)."""
    if save_ts is None or not _leaves_concrete((save_ts, t0, t1)):
        return
    check_save_ts(np.asarray(save_ts, np.float64), np.asarray(t0, np.float64),
                   np.asarray(t1, np.float64))


def _check_traced(ts_op, t0a, t1a, dt0a):
    """Under jax.jit, the checks that traced t0, t1, dt0 and save times allow in JAX, as
    diffrax makes them: one eqx.branched_error_if raises their messages before the custom call
    runs (under equinox.filter_jit as equinox.EquinoxRuntimeError). Where several fail (under
    jax.vmap, in any trajectory), the first in _TRACED_CHECKS's order is named. One check, not
    one per message: each costs tracing time on the first call and a conditional in the
    compiled program. The save times' two checks are one element-wise code and one reduction
    (a save time outside [t0, t1]: 2, one before the one before it: 1), so that the compiled
    program runs one fused reduction before the conditional, not a reduction per check.
    Returns (ts_op, dt0a)."""
    import equinox as eqx
    # the code of the first failing check: 3 dt0's sign, 2 the interval, 1 monotone, 0 none
    code = jnp.where((t1a - t0a) * dt0a < 0, 3, 0)
    n = 1
    if ts_op is not None:
        n = 3
        lo, hi = jnp.minimum(t0a, t1a), jnp.maximum(t0a, t1a)
        # each time less the one before it (the first less itself), in the direction of t1
        back = jnp.where(t1a >= t0a, 1, -1) * (
            ts_op - jnp.concatenate([ts_op[:1], ts_op[:-1]])) < 0
        code = jnp.maximum(code, jnp.max(jnp.where((ts_op < lo) | (ts_op > hi), 2,
                                                   jnp.where(back, 1, 0))))
    # branched_error_if names the largest index over a vmapped batch: the first check's is the
    # largest
    index = jnp.maximum(code - 1 - (3 - n), 0).astype(jnp.int32)
    msgs = [_TRACED_CHECKS[i] for i in reversed(range(n))]
    return eqx.branched_error_if((ts_op, dt0a), code > 0, index, msgs)


# the messages of _check_traced's checks, in the order in which they are named
_TRACED_CHECKS = (
    "clnode.jax.diffeqsolve: dt0 has the wrong sign for integrating from t0 to t1 "
    "(diffrax.diffeqsolve: \"Must have (t1 - t0) * dt0 >= 0\")",
    "clnode.jax.diffeqsolve: SaveAt(ts=...) has times outside the interval [t0, t1] (of a "
    "trajectory, under jax.vmap); diffrax.diffeqsolve refuses this too (\"saveat.ts must lie "
    "between t0 and t1\")",
    "clnode.jax.diffeqsolve: SaveAt(ts=...) is not monotone in the direction of integration "
    "(of a trajectory, under jax.vmap); diffrax.diffeqsolve refuses this too (\"saveat.ts "
    "must be increasing or decreasing.\")")


def _check_arguments(terms, solver, adjoint, event, progress_meter, solver_state,
                     controller_state, made_jump, max_steps, throw, options, device):
    """diffeqsolve's arguments that clnode does not support refused by name, and the keywords
    checked before any callback. Returns (method name, max_steps)."""
    if type(terms) is not diffrax.ODETerm:
        kind = type(terms).__name__
        what = {"ControlTerm": " (a controlled differential equation, CDE)",
                "MultiTerm": " (a sum of terms, e.g. an SDE's drift and diffusion)",
                "WeaklyDiagonalControlTerm": " (a controlled differential equation)"}.get(
                    kind, "")
        raise _unsupported("terms", f"{kind}{what}; clnode solves ODETerm(f) with f an MLP")
    method = _SOLVERS.get(type(solver))
    if method is None:
        raise _unsupported("solver", f"{type(solver).__name__} (clnode has "
                           + ", ".join(c.__name__ + "()" for c in _SOLVERS) + ")")
    if type(adjoint) not in (diffrax.RecursiveCheckpointAdjoint, diffrax.ForwardMode):
        raise _unsupported("adjoint", f"{type(adjoint).__name__} (clnode's reverse pass is "
                           "diffrax's default, RecursiveCheckpointAdjoint: discretise then "
                           "differentiate, with checkpoints=k or None; its forward mode "
                           "diffrax's ForwardMode, which clnode also takes)")
    if event is not None:
        raise _unsupported("event", "clnode has no events")
    if type(progress_meter) not in PROGRESS_METERS:
        raise _unsupported("progress_meter", type(progress_meter).__name__)
    for name, v in (("solver_state", solver_state), ("controller_state", controller_state),
                    ("made_jump", made_jump)):
        if v is not None:
            raise _unsupported(name, "clnode starts every solve afresh")
    if max_steps is None:
        raise _unsupported("max_steps=None", "clnode needs a bound on the steps")
    max_steps = _args.integer(max_steps, "max_steps", 1, 2147483647)
    _args.boolean(throw, "throw")
    for name in options:
        if name not in KEYWORDS:
            where = _ROUTES.get(name)
            raise TypeError(f"diffeqsolve() got an unexpected keyword argument {name!r}"
                            + (f" (clnode takes {name} from {where})" if where else ""))
    kw = _solve._table_options(options)
    _solve._device_arg(device)
    return method, max_steps, kw, checkpoint_every(adjoint, max_steps)


class Taken(NamedTuple):
    """A call as clnode takes it (take's), before its field's operands are evaluated."""

    method: str
    max_steps: int
    kw: Dict[str, Any]
    checkpoint_every: int
    ctrl: Dict[str, Any]
    save_t0: bool
    save_t1: bool
    save_steps: bool
    save_ts: Any
    y0: Any
    time_dtype: Any
    field: Any
    args: Any
    progress_meter: Any


def take(terms, solver, t0, t1, dt0, y0, args, saveat, stepsize_controller, adjoint, event,
         max_steps, throw, progress_meter, solver_state, controller_state, made_jump, device,
         options) -> Taken:
    """Every check of a call that may refuse it (UnsupportedArgument, or the field's Refusal)
    before anything is solved: the call as clnode takes it, or the refusal."""
    method, max_steps, kw, checkpoint_every = _check_arguments(
        terms, solver, adjoint, event, progress_meter, solver_state, controller_state,
        made_jump, max_steps, throw, options, device)
    ctrl = _controller_options(stepsize_controller, dt0, traced=True)
    save_t0, save_t1, save_steps, save_ts = _saveat_options(saveat)
    y0, time_dtype = _promote(y0, t0, t1, dt0, save_ts)
    _check_save_ts_now(save_ts, t0, t1)
    field = _field_of(terms.vector_field, int(y0.shape[0]), y0.dtype, time_dtype, args)
    return Taken(
        method=method, max_steps=max_steps, kw=kw, checkpoint_every=checkpoint_every, ctrl=ctrl,
        save_t0=save_t0, save_t1=save_t1, save_steps=save_steps, save_ts=save_ts, y0=y0,
        time_dtype=time_dtype, field=field, args=args,
        progress_meter=None if type(progress_meter) is diffrax.NoProgressMeter else progress_meter)


def _field_of(vf, n, y_dtype, time_dtype, args):
    """The vector field recognised (_field.recognise), refused naming what it is when it is
    none of the forms; a controlled term (ControlTerm.to_ode()) named as such."""
    where = [type(x).__name__ for x in jax.tree_util.tree_leaves(
        vf, is_leaf=lambda x: isinstance(x, (diffrax.AbstractTerm, diffrax.AbstractPath)))
        if isinstance(x, (diffrax.AbstractTerm, diffrax.AbstractPath))]
    if where:
        raise _unsupported("the vector field", f"it holds a {where[0]} (a controlled "
                           "differential equation, ControlTerm(...).to_ode(), or another term "
                           "inside the field); clnode solves ODETerm(f) with f an MLP")
    try:
        field = _field.recognise(vf, n, y_dtype, time_dtype, args)
    except ValueError as e:  # a Refusal, or what the network search found wrong
        raise _unsupported("the vector field", str(e)) from None
    if field is None:
        kinds = sorted({type(x).__name__ for x in jax.tree_util.tree_leaves(
            vf, is_leaf=lambda x: not isinstance(x, (list, tuple, dict)))})[:12]
        raise _unsupported("the vector field", "no equinox.nn.MLP (or eqx.nn.Sequential of "
                           f"eqx.nn.Linear and activations) found in {type(vf).__name__} (its "
                           f"leaves: {', '.join(kinds) or 'none'}), nor in what a plain function "
                           "reads (its closure and the globals it names)")
    return field


@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
    """A diffeqsolve call's structural settings, as the primitives' parameter (hashed by
    identity): n, k (state and conditioning inputs), T (time slots), the times' and the state's
    dtypes; the network (mlp: the library's model when its parameters are concrete, else None;
    layer_shapes: (weight shape, bias shape or None) per layer; the activations, time_input),
    the factor (scale: None, one value or N when concrete; scale_traced: an operand), the save
    options (has_ts, n_ts: the save times an operand of n_ts values; ts_checked: checked before
    the callback), clnode.solve's options (opts), the tape's checkpoint_every, max_steps,
    throw, diffrax's progress meter (None for NoProgressMeter: nothing reported) and whether
    the call runs under a jax.jit trace. The last three fields are not
    settings but the call's own mutable state: failures (a callback's exception kept for an
    eager diffeqsolve to raise as it is) and the last models the callback made (of traced
    parameters, by their bytes; with a scale)."""

    n: int
    k: int
    T: int
    time_dtype: Any
    y_dtype: Any
    opts: Dict[str, Any]
    mlp: Optional[_model.MLP]
    layer_shapes: Tuple[Tuple[Tuple[int, ...], Optional[Tuple[int, ...]]], ...]
    activation: str
    final_activation: str
    time_input: bool
    scale_traced: bool
    scale: Any
    has_ts: bool
    n_ts: int
    save_t0: bool
    save_t1: bool
    save_steps: bool
    ts_checked: bool
    checkpoint_every: int
    max_steps: int
    throw: bool
    progress_meter: Any
    jitting: bool
    ctrl_names: Tuple[str, ...] = ()
    failures: List[BaseException] = dataclasses.field(default_factory=list, repr=False)
    models: Dict[Any, Any] = dataclasses.field(default_factory=dict, repr=False)
    scaled: Dict[Any, Any] = dataclasses.field(default_factory=dict, repr=False)


class Operands(NamedTuple):
    """The arrays of a diffeqsolve call, by name, as the primitives carry them: y0, t0, t1,
    dt0, the save times (empty without), args (empty for a network without inputs), the
    field's factor s as one value per component when it is traced (empty otherwise), and the
    network's parameters when they are traced, raveled into one flat array in the library's
    flat order (_model.flat_params; empty when they are concrete), and the step size
    controller's traced numbers (rtol, atol, the coefficients: Problem.ctrl_names, in its
    order; empty when all are concrete, which the Problem's options hold), so that a new value
    runs the same compiled program."""

    y0: Any
    t0: Any
    t1: Any
    dt0: Any
    ts: Any
    args: Any
    scale: Any
    params: Any
    ctrl: Any


def frozen(c: Taken, t0: Any, t1: Any, dt0: Any, throw: bool,
           device: Optional[str]) -> Tuple[Problem, Operands]:
    """The call clnode takes (take's) as its frozen Problem and its Operands: the field's
    parameters and factor evaluated by JAX from its leaves (concrete ones made into the
    library's model here), traced times checked in JAX under jax.jit."""
    y0, time_dtype, field = c.y0, c.time_dtype, c.field
    precision = "fp64" if y0.dtype == jnp.float64 else "fp32"
    n = int(y0.shape[0])
    k, net = field.inputs, field.network
    weights, biases, scale = field.operands()
    layers = list(zip(weights, biases))
    concrete = _leaves_concrete((weights, biases))
    mlp = None
    if concrete:
        mlp = _model.MLP([np.asarray(w, np.float64) for w in weights],
                         [None if b is None else np.asarray(b, np.float64) for b in biases],
                         activation=net.activation, final_activation=net.final_activation,
                         time_input=field.time_input, inputs=k)
    scale_traced = scale is not None and not _leaves_concrete(scale)
    s_value = None
    if scale is not None and not scale_traced:
        s_value = scale_value(np.broadcast_to(np.asarray(scale, np.float64), (n,)),
                              UnsupportedArgument)
    n_ts = 0 if c.save_ts is None else int(np.shape(c.save_ts)[0])
    T = _clnode.save_slots(save_t0=c.save_t0, save_t1=c.save_t1, n_ts=n_ts,
                           save_steps=c.save_steps, max_steps=c.max_steps)
    jit = jitting()
    # the controller's traced numbers: an operand (ctrl), None among the options
    ctrl_names = tuple(name for name, v in c.ctrl.items() if _is_tracer(v))
    ctrl_opts = {name: None if name in ctrl_names else v for name, v in c.ctrl.items()}
    ctrl_op = jnp.zeros((0,), jnp.result_type(float)) if not ctrl_names else jnp.stack(
        [jnp.asarray(c.ctrl[name], jnp.result_type(float)) for name in ctrl_names])
    problem = Problem(
        n=n, k=k, T=T, time_dtype=time_dtype, y_dtype=y0.dtype,
        opts=dict(method=c.method, max_steps=c.max_steps, precision=precision, device=device,
                  saveat=None, **ctrl_opts, **c.kw),
        mlp=mlp, layer_shapes=tuple((tuple(np.shape(w)), None if b is None else
                                      tuple(np.shape(b))) for w, b in layers),
        activation=net.activation, final_activation=net.final_activation,
        time_input=field.time_input, scale_traced=scale_traced, scale=s_value,
        has_ts=c.save_ts is not None, n_ts=n_ts, save_t0=c.save_t0, save_t1=c.save_t1,
        save_steps=c.save_steps,
        # the save times checked before the callback: concrete (_check_save_ts_now), or traced
        # under jax.jit (_check_traced, in JAX); else (eager jax.vmap or jax.grad) in it
        ts_checked=c.save_ts is None or jit or _leaves_concrete((c.save_ts, t0, t1)),
        checkpoint_every=c.checkpoint_every, max_steps=c.max_steps, throw=throw,
        progress_meter=c.progress_meter, jitting=jit, ctrl_names=ctrl_names)
    args_op = jnp.zeros((0,), y0.dtype)
    if k:
        args_op = jnp.asarray(c.args)
        if args_op.dtype != y0.dtype:
            args_op = args_op.astype(y0.dtype)
    ts_op = jnp.zeros((0,), time_dtype) if c.save_ts is None else \
        jnp.asarray(c.save_ts, time_dtype)
    # the factor s as one value per component, when traced (its cotangent reaches the leaves
    # that make it through JAX)
    sv_op = jnp.zeros((0,), y0.dtype) if not scale_traced else \
        jnp.broadcast_to(jnp.asarray(scale, y0.dtype), (n,))
    # traced parameters: one flat operand (one transfer per callback) in the library's flat
    # order; JAX maps its cotangent back onto the leaves
    params_op = jnp.zeros((0,), y0.dtype) if concrete else jnp.concatenate(
        [jnp.ravel(x) for x in _model.flat_params(layers)])
    t0a = jnp.asarray(t0, time_dtype)
    t1a = jnp.asarray(t1, time_dtype)
    dt0a = jnp.asarray(0.0 if dt0 is None else dt0, time_dtype)
    if jit and not _leaves_concrete((c.save_ts, t0, t1, dt0)):
        checked_ts, dt0a = _check_traced(ts_op if c.save_ts is not None else None, t0a, t1a,
                                         dt0a)
        if c.save_ts is not None:  # without save times the operand stays the empty array
            ts_op = checked_ts
    return problem, Operands(y0, t0a, t1a, dt0a, ts_op, args_op, sv_op, params_op, ctrl_op)


def checkpoint_every(adjoint: Any, max_steps: int) -> int:
    """The tape's checkpoint_every of diffrax.RecursiveCheckpointAdjoint(checkpoints=k): every
    state kept (1) for checkpoints=None, else about max_steps / k steps between kept states (the
    same gradient bits at any value; only the memory and the recomputation change);
    diffrax.ForwardMode() keeps every state (1), as RecursiveCheckpointAdjoint() does: its
    derivatives are those of the default adjoint, forward and reverse."""
    k = getattr(adjoint, "checkpoints", None)
    if k is None:
        return 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"RecursiveCheckpointAdjoint(checkpoints={k!r}): checkpoints must be "
                         "a positive integer or None")
    return max(1, -(-int(max_steps) // int(k)))


def solve_settings(solver: Any, t0: Any, t1: Any, dt0: Any, y0: Any, *,
                   saveat: Any = diffrax.SaveAt(t1=True),
                   stepsize_controller: Any = diffrax.ConstantStepSize(),
                   max_steps: int = 4096, **options: Any) -> Dict[str, Any]:
    """The solve of a diffeqsolve call (its arguments, without terms and args) as clnode.solve's
    keywords: `clnode.solve(model, y0, **settings)` is that solve, and
    `model.save(path, settings=settings)` writes them into the model file, which
    `clnode-solve --model` then solves with (doc/deploy.md). method from the solver, precision
    from y0 as diffeqsolve promotes it (float32: "fp32", float64: "fp64"), t0, t1, dt0 and the
    save times as diffeqsolve rounds them to the times' dtype, the controller's options,
    saveat as a clnode.SaveAt, max_steps, and clnode's keywords of diffeqsolve (options:
    gemm_precision, precision_guard, ...) as given. Every value must be concrete (one
    trajectory's: SaveAt(ts=...) of shape (T,)). Refuses what diffeqsolve refuses, naming it."""
    method = _SOLVERS.get(type(solver))
    if method is None:
        raise _unsupported("solver", type(solver).__name__)
    max_steps = _args.integer(max_steps, "max_steps", 1, 2147483647)
    for name in options:
        if name not in KEYWORDS:
            raise TypeError(f"solve_settings() got an unexpected keyword argument {name!r}")
    _solve._table_options(options)
    ctrl = _controller_options(stepsize_controller, dt0)
    save_t0, save_t1, save_steps, save_ts = _saveat_options(saveat)
    for name, x in (("t0", t0), ("t1", t1), ("dt0", dt0), ("SaveAt(ts=...)", save_ts)):
        if _is_tracer(x):
            raise _unsupported(f"a traced {name}", "the settings are concrete values")
    y0, time_dtype = _promote(y0, t0, t1, dt0, save_ts)

    def time(x):  # a time as diffeqsolve passes it to the library
        return float(np.asarray(x, dtype=time_dtype))

    out: Dict[str, Any] = dict(
        method=method, precision="fp64" if y0.dtype == jnp.float64 else "fp32", t0=time(t0),
        t1=time(t1), dt0=None if dt0 is None else time(dt0), max_steps=max_steps,
        saveat=_solve.SaveAt(t0=save_t0, t1=save_t1, steps=save_steps, ts=None if save_ts is None
                             else np.asarray(save_ts, dtype=time_dtype).astype(np.float64)))
    out.update((k, v) for k, v in ctrl.items() if v is not None)
    out.update(options)
    return out
