"""clnode.jax.diffeqsolve: a drop-in for diffrax.diffeqsolve when the vector field is an MLP.

    from clnode.jax import diffeqsolve      # instead of: from diffrax import diffeqsolve

    sol = diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), t0=0.0, t1=50.0, dt0=0.02, y0=y0,
                      stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
                      saveat=diffrax.SaveAt(steps=True))

It takes diffrax's own objects and returns a diffrax.Solution with the same fields, shapes and
dtypes. The vector field must hold one eqx.nn.MLP (or eqx.nn.Sequential of Linear layers):
either as an equinox module tree (`Func(eqx.Module)` with an `mlp` field), or read by a plain
function (a lambda) from its closure or a global. The forms recognised are

    f(t, y, args) = mlp(y)                                   # y' = MLP(y)
    f(t, y, args) = mlp(jnp.concatenate([y, t[None]]))       # y' = MLP([y, t])
    f(t, y, args) = mlp(jnp.concatenate([y, args]))          # y' = MLP([y, c]), c = args
    f(t, y, args) = mlp(jnp.concatenate([y, t[None], args])) # y' = MLP([y, t, c])

with args one array of k values (a trajectory's conditioning inputs). Each form may multiply
the network's output by a factor s, a scalar or one value per component:

    f(t, y, args) = self.out_scale * self.mlp(y)             # y' = s * MLP(y)

where s is any expression of the field's leaves that does not involve y, t or args (a learnt
scalar, jnp.exp(log_scale), ...), solved exactly as JAX computes `s * mlp(y)`: one
multiplication after the final activation. The field is recognised from its computation, not
its values (clnode._jax_field): traced on every call with its network as one opaque call, its
trace is read, and the call is clnode's only when the part that depends on t, y or args is one
of these forms; the network's parameters and s, as the field makes them from its leaves, are
evaluated (and differentiated) by JAX. Anything else (terms added, the input changed, a factor
that depends on y, an unsupported activation, and the arguments clnode does not take) is handed
to diffrax.diffeqsolve with a FallbackWarning naming why, or with fallback="error" (or
CLNODE_JAX_FALLBACK=error) refused with an UnsupportedArgument; a call clnode takes is
never solved as something else. It works under jax.jit and jax.vmap over y0, t0, t1, dt0, args
and SaveAt(ts=...) (a vmapped call is one batched clnode solve with per-trajectory t0s/t1s/dt0s,
inputs and save times, through one jax.pure_callback with its operands packed), on CPU arrays.

It is differentiable in reverse mode, as diffrax's default adjoint (RecursiveCheckpointAdjoint:
the gradient of the discretised solve, its step sizes taken as constants): jax.grad,
jax.value_and_grad, jax.vjp, jax.jacrev, eqx.filter_grad and eqx.filter_value_and_grad, under
jax.jit/eqx.filter_jit and jax.vmap (a vmapped loss's parameter gradient is summed over the batch
inside clnode; jax.vmap of a gradient gives per-example gradients), with respect to y0, args and
every inexact array of the vector field (the MLP's weights and biases, and whatever makes its
factor s). The backward takes the forward's tape (or re-solves the batch with it: the same
steps and bits) and runs the library's reverse pass (clnode.Solution.vjp) on the forward's
device, with the same bits on every device; RecursiveCheckpointAdjoint(checkpoints=k) keeps about
k states per trajectory (the same bits). The time arguments (t0, t1, dt0, SaveAt ts) get no
gradient: one asked for is refused with a TypeError, as is forward mode (jax.jvp, jax.jacfwd,
jax.hessian).

Needs jax, equinox and diffrax (0.7.2 is what clnode follows step for step).
"""
import dataclasses
import functools
import types
from typing import Any, Dict, List, Optional

import numpy as np

import diffrax
import jax
import jax.numpy as jnp

from . import _args, _clnode, _jax_ad, _jax_fallback, _jax_field, _model, _progress, _solve
from ._jax_fallback import FallbackWarning, UnsupportedArgument

__all__ = ["diffeqsolve", "solve_settings", "FallbackWarning", "UnsupportedArgument"]

_SOLVERS: Dict[type, str] = {
    diffrax.Tsit5: "tsit5", diffrax.Dopri5: "dopri5", diffrax.Dopri8: "dopri8",
    diffrax.Bosh3: "bosh3", diffrax.Heun: "heun", diffrax.Euler: "euler"}
# clnode result -> diffrax RESULTS: success, max_steps_reached, dt_min_reached; a non-finite
# vector field ends the trajectory early where diffrax would shrink dt until max_steps: reported
# as max_steps_reached (a failure, raised with throw=True). The precision floor (a step that
# shrinks no longer lowers the error estimate: the tolerance is below what the arithmetic
# resolves) is dt_min_reached, the code of a controller that cannot meet the tolerance by
# shrinking the step; with throw=True it raises the library's own message (_floor_error).
_DIFFRAX_OF = {"success": 0, "max_steps_reached": 1, "dt_min_reached": 2, "nonfinite": 1,
               "precision_floor": 2}
_FLOOR = _solve.Result.__members__["precision_floor"]
# the diffrax code of each clnode result code (0 successful, 1 max_steps_reached, 2 dt_min_reached)
_DIFFRAX_CODE = np.array([_DIFFRAX_OF[r.name] for r in _solve.Result], np.int32)

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
_PID_OPTIONS = tuple(n for n, r in _ROUTES.items() if r == "stepsize_controller (PIDController)")
_KEYWORDS = tuple(n for n, r in _ROUTES.items() if r == "keyword")


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


def _controller_options(ctrl, dt0):
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
    for name in _PID_OPTIONS:  # the table's controller options, as PIDController holds them
        info, v = _solve.OPTIONS[name], getattr(ctrl, name)
        what = f"PIDController({name}=...)"
        o[name] = _args.boolean(v, what) if info["type"] == "boolean" else _static_float(v, what)
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


def _jitting():
    """Whether this runs under a jax.jit trace (where a callback's error reaches the caller
    only through XLA's runtime error)."""
    return _is_tracer(jnp.asarray(1) + 1)


def _leaves_concrete(tree):
    return not any(_is_tracer(x) for x in jax.tree_util.tree_leaves(tree))


def _scale_value(factor, what):
    """The model's output scale from the factor s as one value per component (N values): None
    when it is 1 (the field is the network itself), a float when one value for every component,
    else the N values. A non-finite factor is refused (`what` says where it comes from)."""
    s, why = _model._constant_factor(np.reshape(np.asarray(factor, np.float64), (1, -1)))
    if why:
        raise what(f"the factor s of the field's network is not finite ({factor})")
    if np.all(s == 1.0):
        return None
    return float(s[0]) if s.size == 1 else s


def _one_scale(sv, n):
    """The factor s (N values) from the callback's operand, which has leading axes under
    jax.vmap when s depends on a vmapped value: one model solves the batch, so it must be the
    same for every trajectory."""
    a = np.asarray(sv, np.float64)
    rows = a.reshape(-1, n)
    if not np.all(rows == rows[0]):
        raise ValueError("clnode.jax.diffeqsolve: the factor s of the field's network changes "
                         "from trajectory to trajectory (clnode solves one model for a batch)")
    return rows[0]


def _per_trajectory(x, lead):
    """A time operand of the callback as one float (the same for every trajectory) or one value
    per trajectory (unbatched operands have size-1 axes under jax.vmap: fwd_p's batching)."""
    a = np.asarray(x, np.float64)
    if a.size == 1:
        return float(a.reshape(()))
    flat = np.broadcast_to(a, lead).reshape(-1)
    if flat.size == 0:
        return 0.0
    if np.all(flat == flat[0]):
        return float(flat[0])
    return np.ascontiguousarray(flat)


def _check_save_ts(ts, t0, t1):
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


def _save_rows(ts_, lead, n_ts):
    """The callback's save-times operand as clnode.solve takes it: one list (n_ts,) when it is
    the same operand for the whole batch (size-1 axes under jax.vmap), else
    each trajectory its own row, (B, n_ts) (jax.vmap over the save times, as per-sample ts)."""
    a = np.asarray(ts_, np.float64)
    if all(d == 1 for d in a.shape[:-1]):
        return a.reshape(n_ts)
    return np.ascontiguousarray(np.broadcast_to(a, (*lead, n_ts)).reshape(-1, n_ts))


def _squeeze_unbatched(a, core_ndim, name):
    """A callback operand without its vmap axes, which must all have size 1 (fwd_p's batching gives
    unbatched operands size-1 axes)."""
    lead = a.shape[:a.ndim - core_ndim]
    if any(d != 1 for d in lead):
        if np.all(a == a.reshape((-1,) + a.shape[len(lead):])[0]):
            return a.reshape((-1,) + a.shape[len(lead):])[0]
        raise ValueError(f"clnode.jax.diffeqsolve: vmapping over {name} is not supported "
                         "(clnode solves one model for every trajectory of a batch; vmap over "
                         "y0, t0, t1, dt0, args and SaveAt(ts=...))")
    return a.reshape(a.shape[len(lead):])


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
    _check_save_ts(np.asarray(save_ts, np.float64), np.asarray(t0, np.float64),
                   np.asarray(t1, np.float64))


def _check_traced(ts_op, t0a, t1a, dt0a):
    """Under jax.jit, the checks that traced t0, t1, dt0 and save times allow in JAX, as
    diffrax makes them: eqx.error_if raises their messages before the callback runs (under
    equinox.filter_jit as equinox.EquinoxRuntimeError). Returns (ts_op, dt0a)."""
    import equinox as eqx
    dt0a = eqx.error_if(dt0a, (t1a - t0a) * dt0a < 0, "clnode.jax.diffeqsolve: dt0 has the "
                        "wrong sign for integrating from t0 to t1 (diffrax.diffeqsolve: \"Must "
                        "have (t1 - t0) * dt0 >= 0\")")
    if ts_op is not None:
        lo, hi = jnp.minimum(t0a, t1a), jnp.maximum(t0a, t1a)
        bad = jnp.any(ts_op < lo) | jnp.any(ts_op > hi)
        ts_op = eqx.error_if(ts_op, bad, "clnode.jax.diffeqsolve: SaveAt(ts=...) has times "
                             "outside the interval [t0, t1] (of a trajectory, under jax.vmap); "
                             "diffrax.diffeqsolve refuses this too (\"saveat.ts must lie "
                             "between t0 and t1\")")
        back = jnp.any(jnp.where(t1a >= t0a, 1, -1) * (ts_op[1:] - ts_op[:-1]) < 0)
        ts_op = eqx.error_if(ts_op, back, "clnode.jax.diffeqsolve: SaveAt(ts=...) is not "
                             "monotone in the direction of integration (of a trajectory, under "
                             "jax.vmap); diffrax.diffeqsolve refuses this too (\"saveat.ts must "
                             "be increasing or decreasing.\")")
    return ts_op, dt0a


def _raise_in_callback(e):
    """Raises `e` from a callback under jax.jit. XLA reports it as `INTERNAL: CpuCallback error`
    with the traceback inside; equinox.filter_jit replaces that by equinox.EquinoxRuntimeError
    carrying the message for errors of eqx.error_if, which this one is made to look like (the
    name and the message equinox's filter_jit reads), so that under filter_jit the library's
    message is the error. Without equinox's internals it is raised as it is."""
    try:
        from equinox import _jit as eqx_jit
        from equinox._errors import _EquinoxRuntimeError
    except ImportError:
        raise e from None
    cls = type(e).__qualname__
    if type(e).__module__ != "builtins":
        cls = f"{type(e).__module__}.{cls}"
    msg = f"clnode.jax.diffeqsolve: {cls}: {e}"
    if not hasattr(eqx_jit, "last_error_info"):
        raise e from None
    eqx_jit.last_error_info = (msg, [])
    raise _EquinoxRuntimeError(msg) from e


def _model_of(p, models, theta):
    """The MLP of the flat parameter operand (the weights, then the biases, raveled), made once
    per parameter values (models: the last one, by the values' bytes)."""
    flat = _squeeze_unbatched(np.asarray(theta, np.float64), 1, "the model's parameters")
    key = flat.tobytes()
    if key not in models:
        parts, off = [], 0
        for shape in p.param_shapes:
            size = int(np.prod(shape))
            parts.append(flat[off:off + size].reshape(shape))
            off += size
        ws, bs, j = parts[:p.n_layers], [], p.n_layers
        for hb in p.has_bias:
            bs.append(parts[j] if hb else None)
            j += hb
        models.clear()
        models[key] = p.make_mlp(ws, bs)
    return models[key]


def _host_callback(p, failures, jitting, shapes):
    """The callback of a diffeqsolve call: the batch it is given solved by clnode.solve. p: the
    problem's static parts (the MLP or how to build it from traced parameters, the check
    points, the save options, clnode.solve's options); failures: where an eager call's
    exception is kept for diffeqsolve to raise as it is (under jit it is raised, reaching the
    caller inside XLA's runtime error); shapes: the outputs' ShapeDtypeStructs."""

    def batch_shape(y, t0_, t1_, dt0_, ts_, c_, sv, *params):
        # the batch: every vmapped operand has the full leading axes, the others size-1 axes
        return np.broadcast_shapes(np.shape(y)[:-1], np.shape(t0_), np.shape(t1_),
                                   np.shape(dt0_), np.shape(c_)[:-1] if p.k else (),
                                   np.shape(ts_)[:-1] if p.save_ts is not None else (),
                                   np.shape(sv)[:-1] if p.scale_traced else ())

    scaled: Dict[Any, Any] = {}  # the last model given a scale, for the next call's

    def with_scale(m, s):
        if s is None:
            return m
        key = (id(m), np.asarray(s, np.float64).tobytes())
        if key not in scaled:
            scaled.clear()
            scaled[key] = _model.MLP(m.weights, m.biases, activation=m.activation,
                                     final_activation=m.final_activation,
                                     time_input=m.time_input, inputs=m.num_inputs, out_scale=s)
        return scaled[key]

    def host(*operands, keep=False):
        try:
            return solve_batch(*operands, keep=keep)
        except Exception as e:
            if jitting:  # reaches the caller through XLA's runtime error
                _raise_in_callback(e)
            failures.append(e)  # an eager call raises it after the callback returns
            lead = batch_shape(*operands)
            return tuple(np.zeros(lead + s.shape, s.dtype) for s in shapes)

    models: Dict[bytes, Any] = {}  # the last model made of traced parameters, by their bytes

    def setup(y, t0_, t1_, dt0_, ts_, c_, sv, *params, scale_vector=False):
        """The clnode.solve call of the batch the operands give: (lead, model, y0 rows, keyword
        arguments). scale_vector: the model has the output scale as one value per component,
        1 where the field has none (for its gradient: the same bits, s * x for each
        component)."""
        y = np.asarray(y)
        lead = batch_shape(y, t0_, t1_, dt0_, ts_, c_, sv, *params)
        yb = np.broadcast_to(y, lead + (p.n,)).reshape(-1, p.n)
        B = yb.shape[0]
        t0v = _per_trajectory(t0_, lead)
        t1v = _per_trajectory(t1_, lead)
        dt0v = _per_trajectory(dt0_, lead)
        cv = None
        if p.k:
            cv = np.broadcast_to(np.asarray(c_, np.float64), lead + (p.k,)).reshape(B, p.k)
        m = p.mlp
        if m is None:  # traced parameters (under jax.jit): this call's values
            m = _model_of(p, models, params[0])
        s = p.scale
        if p.scale_traced:  # this call's factor
            factor = _one_scale(sv, p.n)
            s = factor if scale_vector else _scale_value(factor, ValueError)
        elif scale_vector:
            s = np.broadcast_to(np.asarray(1.0 if s is None else s, np.float64), (p.n,))
        m = with_scale(m, s)
        tsv = None
        if p.save_ts is not None:
            tsv = _save_rows(ts_, lead, p.n_ts)
            if not p.ts_checked:
                _check_save_ts(tsv, t0v, t1v)
        sa = _solve.SaveAt(t0=p.save_t0, t1=p.save_t1, ts=tsv, steps=p.save_steps) \
            if (p.save_t0 or p.save_t1 or p.save_steps or tsv is not None) else None
        o = dict(p.opts)
        o["saveat"] = sa
        o["dt0"] = None if (np.ndim(dt0v) == 0 and dt0v == 0.0) else dt0v
        return lead, m, yb, dict(o, t0=t0v, t1=t1v, args=cv)

    def solve_batch(*operands, keep=False):
        """ts, ys and the counts (num_steps, accepted, rejected, diffrax's result code, the
        tape's token: 0 unless keep) of the batch; with keep, its solution kept with the tape
        for the reverse pass (_jax_ad.keep_tape)."""
        # kept for the reverse pass: the factor's gradient needs the model with its scale
        lead, m, yb, kw = setup(*operands, scale_vector=keep and p.scale_traced)
        if keep:
            kw.update(keep_tape=True, checkpoint_every=p.checkpoint_every)
        meter = p.meter() if p.meter is not None else None  # none: no Python for progress
        try:
            sol = _solve.solve(m, yb, progress=meter, **kw)
        finally:
            if meter is not None:
                meter.close()
        if p.throw and np.any(np.asarray(sol.result).reshape(-1) == _FLOOR):
            raise _floor_error(sol, kw)
        st = sol.stats
        counts = np.empty((yb.shape[0], 5), np.int32)
        counts[:, 0] = st["num_steps"]
        counts[:, 1] = st["num_accepted_steps"]
        counts[:, 2] = st["num_rejected_steps"]
        counts[:, 3] = _DIFFRAX_CODE[np.asarray(sol.result, np.intp).reshape(-1)]
        counts[:, 4] = _jax_ad.keep_tape(sol, m) if keep else 0
        return (sol.ts.reshape(lead + (p.T,)).astype(p.time_dtype),
                sol.ys.reshape(lead + (p.T, p.n)).astype(p.y_dtype),
                counts.reshape(lead + (5,)))

    host.setup = setup  # type: ignore[attr-defined]
    return host


# diffrax's progress meters: what each call's solve reports its progress to (None: nothing)
_METERS: Dict[type, Any] = {
    diffrax.NoProgressMeter: lambda m: None,
    diffrax.TextProgressMeter: lambda m: lambda: _progress.TextMeter(m.minimum_increase),
    diffrax.TqdmProgressMeter: lambda m: _progress.TqdmMeter}


def _floor_error(sol, kw):
    """diffeqsolve's error (throw=True) for trajectories that stopped at the precision floor: the
    library's warning, which names the floor, the rtol and the bound 16 u above it."""
    msg = sol._floor_message or (f"precision_floor: trajectories stopped at the rounding floor: "
                                 f"rtol {kw.get('rtol')} is below what this arithmetic resolves")
    return _clnode.PrecisionError(msg)


def _solution(t0a, t1a, out, max_steps, throw):
    """The diffrax.Solution of the callback's outputs (ts, ys, step counts, result codes); with
    throw, diffrax's own error_if on a failed trajectory."""
    ts, ys, counts = out
    nsteps, nacc, nrej, code = (counts[..., i] for i in range(4))
    R = diffrax.RESULTS
    result = R.where(code == 1, R.max_steps_reached, R.successful)
    result = R.where(code == 2, R.dt_min_reached, result)
    stats = {"num_steps": nsteps, "num_accepted_steps": nacc, "num_rejected_steps": nrej,
             "max_steps": max_steps}
    sol = diffrax.Solution(t0=t0a, t1=t1a, ts=ts, ys=ys, interpolation=None, stats=stats,
                           result=result, solver_state=None, controller_state=None,
                           made_jump=None, event_mask=None)
    if throw:
        sol = result.error_if(sol, code != 0)
    return sol


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
    if type(adjoint) is not diffrax.RecursiveCheckpointAdjoint:
        raise _unsupported("adjoint", f"{type(adjoint).__name__} (clnode's reverse pass is "
                           "diffrax's default, RecursiveCheckpointAdjoint: discretise then "
                           "differentiate, with checkpoints=k or None)")
    if event is not None:
        raise _unsupported("event", "clnode has no events")
    if type(progress_meter) not in _METERS:
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
        if name not in _KEYWORDS:
            where = _ROUTES.get(name)
            raise TypeError(f"diffeqsolve() got an unexpected keyword argument {name!r}"
                            + (f" (clnode takes {name} from {where})" if where else ""))
    kw = _solve._table_options(options)
    _solve._device_arg(device)
    return method, max_steps, kw, _jax_ad.checkpoint_every(adjoint, max_steps)


def diffeqsolve(terms: Any, solver: Any, t0: Any, t1: Any, dt0: Any, y0: Any, args: Any = None,
                *, saveat: Any = diffrax.SaveAt(t1=True),
                stepsize_controller: Any = diffrax.ConstantStepSize(),
                adjoint: Any = diffrax.RecursiveCheckpointAdjoint(), event: Any = None,
                max_steps: Optional[int] = 4096, throw: bool = True,
                progress_meter: Any = diffrax.NoProgressMeter(), solver_state: Any = None,
                controller_state: Any = None, made_jump: Any = None, device: Optional[str] = None,
                fallback: Optional[str] = None, **options: Any) -> diffrax.Solution:
    """diffrax.diffeqsolve for an MLP vector field, solved by clnode.

    terms: diffrax.ODETerm(f) with f an equinox module tree (e.g. `Func(eqx.Module)` holding an
    `eqx.nn.MLP`) or a function reading one, whose value is MLP(y), MLP([y, t]), MLP([y, args])
    or MLP([y, t, args]), each possibly times a factor s of the leaves (`out_scale * mlp(y)`;
    see the module's documentation), recognised from its computation on every call.
    args: None, or for a network conditioned on it one array of k values.
    solver: Tsit5(), Dopri5(), Dopri8(), Bosh3(), Heun() or Euler(). stepsize_controller:
    PIDController(rtol, atol, pcoeff, icoeff, dcoeff, dtmin, dtmax, force_dtmin, factormin,
    factormax, safety) or ConstantStepSize(). saveat: SaveAt(t0=, t1=, ts=, steps=True).
    max_steps, throw: as diffrax (max_steps in [1, 2147483647]; with SaveAt(steps=True) in
    [1, 16777216]). y0: one array (not a pytree), promoted as diffrax promotes it
    (jnp.result_type(y0, time dtype), the time dtype jnp.result_type(t0, t1, dt0, SaveAt ts));
    a float32 state is an fp32 solve, float64 fp64; the Solution has diffrax's dtypes.

    clnode's own keywords: device (a device string, default $CLNODE_DEVICE or "host"), and the
    options of the library's table that diffrax's arguments do not give (clnode.solve's
    keywords of the same names):
{keywords}
    Returns a diffrax.Solution (ts, ys, stats, result as diffrax's; interpolation None; a
    trajectory stopped at the precision floor is RESULTS.dt_min_reached, and with throw=True
    raises clnode.PrecisionError naming the floor, the rtol and its bound). progress_meter:
    NoProgressMeter, TextProgressMeter or TqdmProgressMeter (doc/python.md). Under
    jax.vmap over any of y0, t0, t1, dt0, args and SaveAt(ts=...) the whole batch is one clnode
    solve, every trajectory with its own values (all of one direction of integration; vmapped
    save times: each trajectory its own list). A call it does not take (a vector field of
    another form, an adjoint other than RecursiveCheckpointAdjoint, an event, SubSaveAt fn,
    other solvers, controllers or terms, a pytree state) is diffrax.diffeqsolve's, with a
    FallbackWarning naming why; fallback="error" (default: $CLNODE_JAX_FALLBACK, else "warn")
    raises UnsupportedArgument (a ValueError) instead. Raises ValueError when save times are
    out of order or lie outside their trajectory's interval (as diffrax) and for vmapping over
    the model, TypeError for an argument
    of the wrong kind (a bool that is not bool, a float max_steps), the library's exception when
    it refuses the problem, and a TypeError for a gradient with respect to t0, t1, dt0 or
    SaveAt(ts=...) and for forward mode (jax.jvp, jax.jacfwd, jax.hessian): clnode computes
    reverse-mode gradients with respect to y0, args and the vector field's arrays (the module's
    documentation). adjoint: RecursiveCheckpointAdjoint() (every state kept) or
    RecursiveCheckpointAdjoint(checkpoints=k) (about k kept; the same gradient bits).
    Checks on concrete values run before the callback; under jax.jit, those on traced
    times run in JAX through eqx.error_if, and the rest inside the callback, raised in
    eqx.error_if's form: with equinox.filter_jit, equinox.EquinoxRuntimeError carrying the
    message; with jax.jit, XLA's runtime error with the message inside."""
    how = _jax_fallback.mode(fallback)
    try:
        taken = _take(terms, solver, t0, t1, dt0, y0, args, saveat, stepsize_controller, adjoint,
                      event, max_steps, throw, progress_meter, solver_state, controller_state,
                      made_jump, device, options)
    except _jax_field.Refusal as why:  # UnsupportedArgument among them
        return _jax_fallback.hand_over(why, how, lambda: diffrax.diffeqsolve(
            terms, solver, t0, t1, dt0, y0, args, saveat=saveat,
            stepsize_controller=stepsize_controller, adjoint=adjoint, event=event,
            max_steps=max_steps, throw=throw, progress_meter=progress_meter,
            solver_state=solver_state, controller_state=controller_state,
            made_jump=made_jump), stacklevel=2)
    return _solve_taken(taken, t0, t1, dt0, max_steps, throw, device)


def _take(terms, solver, t0, t1, dt0, y0, args, saveat, stepsize_controller, adjoint, event,
          max_steps, throw, progress_meter, solver_state, controller_state, made_jump, device,
          options):
    """Every check of a call that may refuse it (UnsupportedArgument, or the field's Refusal)
    before anything is solved: the call as clnode takes it (a namespace), or the refusal."""
    method, max_steps, kw, checkpoint_every = _check_arguments(
        terms, solver, adjoint, event, progress_meter, solver_state, controller_state,
        made_jump, max_steps, throw, options, device)
    ctrl = _controller_options(stepsize_controller, dt0)
    save_t0, save_t1, save_steps, save_ts = _saveat_options(saveat)
    y0, time_dtype = _promote(y0, t0, t1, dt0, save_ts)
    _check_save_ts_now(save_ts, t0, t1)
    field = _field_of(terms.vector_field, int(y0.shape[0]), y0.dtype, time_dtype, args)
    return types.SimpleNamespace(
        method=method, max_steps=max_steps, kw=kw, checkpoint_every=checkpoint_every, ctrl=ctrl,
        save_t0=save_t0, save_t1=save_t1, save_steps=save_steps, save_ts=save_ts, y0=y0,
        time_dtype=time_dtype, field=field, args=args,
        meter=_METERS[type(progress_meter)](progress_meter))


def _field_of(vf, n, y_dtype, time_dtype, args):
    """The vector field recognised (_jax_field.recognise), refused naming what it is when it is
    none of the forms; a controlled term (ControlTerm.to_ode()) named as such."""
    where = [type(x).__name__ for x in jax.tree_util.tree_leaves(
        vf, is_leaf=lambda x: isinstance(x, (diffrax.AbstractTerm, diffrax.AbstractPath)))
        if isinstance(x, (diffrax.AbstractTerm, diffrax.AbstractPath))]
    if where:
        raise _unsupported("the vector field", f"it holds a {where[0]} (a controlled "
                           "differential equation, ControlTerm(...).to_ode(), or another term "
                           "inside the field); clnode solves ODETerm(f) with f an MLP")
    try:
        field = _jax_field.recognise(vf, n, y_dtype, time_dtype, args)
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


def _solve_taken(c, t0, t1, dt0, max_steps, throw, device):
    """The call clnode takes (_take's namespace), solved: the forward's jax.custom_jvp around
    the callback, bound to this call's operands."""
    method, max_steps, kw, checkpoint_every = c.method, c.max_steps, c.kw, c.checkpoint_every
    ctrl, save_t0, save_t1, save_steps, save_ts = c.ctrl, c.save_t0, c.save_t1, c.save_steps, \
        c.save_ts
    y0, time_dtype, field, args = c.y0, c.time_dtype, c.field, c.args
    precision = "fp64" if y0.dtype == jnp.float64 else "fp32"
    n = int(y0.shape[0])
    k, net = field.inputs, field.network
    weights, biases, scale = field.operands()

    def make_mlp(ws, bs, scale=None):
        return _model.MLP([np.asarray(w, np.float64) for w in ws],
                          [None if b is None else np.asarray(b, np.float64) for b in bs],
                          activation=net.activation, final_activation=net.final_activation,
                          time_input=field.time_input, inputs=k, out_scale=scale)

    args_op = None
    if k:
        args_op = jnp.asarray(args)
        if args_op.dtype != y0.dtype:
            args_op = args_op.astype(y0.dtype)
    mlp = make_mlp(weights, biases) if _leaves_concrete((weights, biases)) else None
    scale_traced = scale is not None and not _leaves_concrete(scale)
    s_value = None
    if scale is not None and not scale_traced:
        s_value = _scale_value(np.broadcast_to(np.asarray(scale, np.float64), (n,)),
                               UnsupportedArgument)

    n_ts = 0 if save_ts is None else int(np.shape(save_ts)[0])
    T = _clnode.save_slots(save_t0=save_t0, save_t1=save_t1, n_ts=n_ts, save_steps=save_steps,
                           max_steps=max_steps)
    opts = dict(method=method, max_steps=max_steps, precision=precision, device=device,
                saveat=None, **ctrl, **kw)
    # ts, ys, and per trajectory num_steps, accepted, rejected, result code and tape token
    shapes = (jax.ShapeDtypeStruct((T,), time_dtype), jax.ShapeDtypeStruct((T, n), y0.dtype),
              jax.ShapeDtypeStruct((5,), jnp.int32))
    # what the callback raised, for the eager caller to raise as it is
    failures: List[BaseException] = []
    jitting = _jitting()
    prob = types.SimpleNamespace(
        n=n, k=k, scale_traced=scale_traced, mlp=mlp, n_layers=len(weights),
        has_bias=[b is not None for b in biases], make_mlp=make_mlp,
        save_ts=save_ts, n_ts=n_ts, scale=s_value, save_t0=save_t0,
        throw=throw, meter=c.meter,
        save_t1=save_t1, save_steps=save_steps, opts=opts, T=T, time_dtype=time_dtype,
        y_dtype=y0.dtype, checkpoint_every=checkpoint_every,
        # the save times checked before the callback: concrete (_check_save_ts_now), or traced
        # under jax.jit (_check_traced, in JAX); else (eager jax.vmap or jax.grad) in it
        ts_checked=save_ts is None or jitting or _leaves_concrete((save_ts, t0, t1)),
        param_shapes=[np.shape(x) for x in weights + [b for b in biases if b is not None]])
    host = _host_callback(prob, failures, jitting, shapes)

    fwd = _jax_ad.Forward(host, shapes)
    call = jax.custom_jvp(lambda *ops: _jax_ad.forward(fwd, False, *ops))
    call_keeping_tape = jax.custom_jvp(  # under differentiation
        lambda *ops: _jax_ad.forward(fwd, True, *ops))
    call_keeping_tape.defjvp(_jax_ad.no_higher_order)

    ad_prob = _jax_ad.Problem(host.setup, _raise_in_callback, n, T, checkpoint_every)
    call.defjvp(_jax_ad.jvp_rule(call, call_keeping_tape, ad_prob), symbolic_zeros=True)

    ts_op = jnp.zeros((0,), time_dtype) if save_ts is None else jnp.asarray(save_ts, time_dtype)
    # the factor s as one value per component, when traced (its cotangent reaches the leaves
    # that make it through JAX)
    sv_op = jnp.zeros((0,), y0.dtype) if not scale_traced else \
        jnp.broadcast_to(jnp.asarray(scale, y0.dtype), (n,))
    c_op = jnp.zeros((0,), y0.dtype) if not k else args_op
    # traced parameters: one flat operand (one transfer per callback), the weights then the
    # biases; JAX maps its cotangent back onto the leaves
    params = [] if mlp is not None else [jnp.concatenate(
        [jnp.ravel(x) for x in weights + [b for b in biases if b is not None]])]
    t0a = jnp.asarray(t0, time_dtype)
    t1a = jnp.asarray(t1, time_dtype)
    dt0a = jnp.asarray(0.0 if dt0 is None else dt0, time_dtype)
    if jitting and not _leaves_concrete((save_ts, t0, t1, dt0)):
        checked_ts, dt0a = _check_traced(ts_op if save_ts is not None else None, t0a, t1a,
                                         dt0a)
        if save_ts is not None:  # without save times the operand stays the empty array
            ts_op = checked_ts
    out = call(y0, t0a, t1a, dt0a, ts_op, c_op, sv_op, *params)
    if not jitting:
        jax.block_until_ready(out)
        if failures:  # the library's (or this module's) exception itself
            raise failures[0]
    return _solution(t0a, t1a, out, max_steps, throw)


diffeqsolve.__doc__ = (diffeqsolve.__doc__ or "").replace("{keywords}\n", "".join(
    f"    {n}: {_solve.OPTIONS[n]['doc']}.\n" for n in _KEYWORDS))


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
        if name not in _KEYWORDS:
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
