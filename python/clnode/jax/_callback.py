"""The callback of a diffeqsolve call: the batch its operands give (numpy arrays, each with the
batch's leading axes or size-1 ones, as the primitives pass them) solved by clnode.solve with the
call's frozen problem, and the outputs as diffrax reports them. Its errors are raised in
eqx.error_if's form under jax.jit (raise_in_callback), and kept for diffeqsolve to raise as they
are otherwise."""
from typing import Any, Tuple

import numpy as np

import diffrax

from .. import _clnode, _model, _progress, _solve
from . import _tapes
from ._problem import Problem, check_save_ts, scale_value

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


def raise_in_callback(e: BaseException) -> Any:
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


def make_mlp(p: Problem, layers: Any, scale: Any = None) -> _model.MLP:
    """The library's model of the field's network with `layers` ((weight, bias or None) per
    layer) and output scale `scale`."""
    return _model.MLP([np.asarray(w, np.float64) for w, _ in layers],
                      [None if b is None else np.asarray(b, np.float64) for _, b in layers],
                      activation=p.activation, final_activation=p.final_activation,
                      time_input=p.time_input, inputs=p.k, out_scale=scale)


def _model_of(p: Problem, theta: Any) -> _model.MLP:
    """The MLP of the flat parameter operand (laid out in the library's flat order,
    _model.flat_params), made once per parameter values (the call's last one, by the values'
    bytes)."""
    flat = _squeeze_unbatched(np.asarray(theta, np.float64), 1, "the model's parameters")
    key = flat.tobytes()
    if key not in p.models:
        p.models.clear()
        p.models[key] = make_mlp(p, _model.layers_of_flat(flat, p.layer_shapes))
    return p.models[key]


def _with_scale(p: Problem, m: _model.MLP, s: Any) -> _model.MLP:
    """Model m with output scale s (the call's last one kept for its next)."""
    if s is None:
        return m
    key = (id(m), np.asarray(s, np.float64).tobytes())
    if key not in p.scaled:
        p.scaled.clear()
        p.scaled[key] = _model.MLP(m.weights, m.biases, activation=m.activation,
                                   final_activation=m.final_activation,
                                   time_input=m.time_input, inputs=m.num_inputs, out_scale=s)
    return p.scaled[key]


def _batch_shape(p: Problem, ops: Any) -> Tuple[int, ...]:
    """The batch: every vmapped operand has the full leading axes, the others size-1 axes."""
    return np.broadcast_shapes(np.shape(ops.y0)[:-1], np.shape(ops.t0), np.shape(ops.t1),
                               np.shape(ops.dt0), np.shape(ops.args)[:-1] if p.k else (),
                               np.shape(ops.ts)[:-1] if p.has_ts else (),
                               np.shape(ops.scale)[:-1] if p.scale_traced else ())


def host(p: Problem, ops: Any, keep: bool) -> Tuple[Any, ...]:
    """The outputs (clnode.jax._primitives.Outputs: ts, ys, counts, token) of the batch of
    operands `ops` (an Operands of numpy arrays); keep: solved keeping the tape (for the reverse
    pass). An error is raised in eqx.error_if's form under jax.jit, else kept in p.failures
    (and zeros returned) for diffeqsolve to raise as it is."""
    try:
        return _solve_batch(p, ops, keep)
    except Exception as e:
        if p.jitting:  # reaches the caller through XLA's runtime error
            raise_in_callback(e)
        p.failures.append(e)  # an eager call raises it after the callback returns
        lead = _batch_shape(p, ops)
        return (np.zeros(lead + (p.T,), p.time_dtype), np.zeros(lead + (p.T, p.n), p.y_dtype),
                np.zeros(lead + (4,), np.int32), np.zeros(lead, np.int32))


def setup(p: Problem, ops: Any, scale_vector: bool = False) -> Tuple[Any, Any, Any, Any]:
    """The clnode.solve call of the batch the operands give: (lead, model, y0 rows, keyword
    arguments). scale_vector: the model has the output scale as one value per component,
    1 where the field has none (for its gradient: the same bits, s * x for each
    component)."""
    y = np.asarray(ops.y0)
    lead = _batch_shape(p, ops)
    yb = np.broadcast_to(y, lead + (p.n,)).reshape(-1, p.n)
    B = yb.shape[0]
    t0v = _per_trajectory(ops.t0, lead)
    t1v = _per_trajectory(ops.t1, lead)
    dt0v = _per_trajectory(ops.dt0, lead)
    cv = None
    if p.k:
        cv = np.broadcast_to(np.asarray(ops.args, np.float64), lead + (p.k,)).reshape(B, p.k)
    m = p.mlp
    if m is None:  # traced parameters (under jax.jit): this call's values
        m = _model_of(p, ops.params)
    s = p.scale
    if p.scale_traced:  # this call's factor
        factor = _one_scale(ops.scale, p.n)
        s = factor if scale_vector else scale_value(factor, ValueError)
    elif scale_vector:
        s = np.broadcast_to(np.asarray(1.0 if s is None else s, np.float64), (p.n,))
    m = _with_scale(p, m, s)
    tsv = None
    if p.has_ts:
        tsv = _save_rows(ops.ts, lead, p.n_ts)
        if not p.ts_checked:
            check_save_ts(tsv, t0v, t1v)
    sa = _solve.SaveAt(t0=p.save_t0, t1=p.save_t1, ts=tsv, steps=p.save_steps) \
        if (p.save_t0 or p.save_t1 or p.save_steps or tsv is not None) else None
    o = dict(p.opts)
    if p.ctrl_names:  # this call's traced controller numbers
        ctrl = _squeeze_unbatched(np.asarray(ops.ctrl, np.float64), 1,
                                  "the step size controller's " + ", ".join(p.ctrl_names))
        o.update((name, float(v)) for name, v in zip(p.ctrl_names, ctrl))
    o["saveat"] = sa
    o["dt0"] = None if (np.ndim(dt0v) == 0 and dt0v == 0.0) else dt0v
    return lead, m, yb, dict(o, t0=t0v, t1=t1v, args=cv)


def _solve_batch(p: Problem, ops: Any, keep: bool) -> Tuple[Any, ...]:
    """ts, ys, the counts (num_steps, accepted, rejected, diffrax's result code) and the tape's
    token (0 unless keep) of the batch; with keep, its solution kept with the tape for the
    reverse pass (_tapes.keep)."""
    # kept for the reverse pass: the factor's gradient needs the model with its scale
    lead, m, yb, kw = setup(p, ops, scale_vector=keep and p.scale_traced)
    if keep:
        kw.update(keep_tape=True, checkpoint_every=p.checkpoint_every)
    meter = _meter(p.progress_meter)  # none: no Python for progress
    try:
        sol = _solve.solve(m, yb, progress=meter, **kw)
    finally:
        if meter is not None:
            meter.close()
    if p.throw and np.any(np.asarray(sol.result).reshape(-1) == _FLOOR):
        raise _floor_error(sol, kw)
    st = sol.stats
    counts = np.empty((yb.shape[0], 4), np.int32)
    counts[:, 0] = st["num_steps"]
    counts[:, 1] = st["num_accepted_steps"]
    counts[:, 2] = st["num_rejected_steps"]
    counts[:, 3] = _DIFFRAX_CODE[np.asarray(sol.result, np.intp).reshape(-1)]
    token = np.full(lead, _tapes.keep(sol, m) if keep else 0, np.int32)
    return (sol.ts.reshape(lead + (p.T,)).astype(p.time_dtype),
            sol.ys.reshape(lead + (p.T, p.n)).astype(p.y_dtype),
            counts.reshape(lead + (4,)), token)


def _meter(progress_meter: Any) -> Any:
    """What a solve reports its progress to for diffrax's progress meter (None: nothing)."""
    if type(progress_meter) is diffrax.TextProgressMeter:
        return _progress.TextMeter(float(progress_meter.minimum_increase))
    if type(progress_meter) is diffrax.TqdmProgressMeter:
        return _progress.TqdmMeter()
    return None


def _floor_error(sol: Any, kw: Any) -> BaseException:
    """diffeqsolve's error (throw=True) for trajectories that stopped at the precision floor: the
    library's warning, which names the floor, the rtol and the bound 16 u above it."""
    msg = sol._floor_message or (f"precision_floor: trajectories stopped at the rounding floor: "
                                 f"rtol {kw.get('rtol')} is below what this arithmetic resolves")
    return _clnode.PrecisionError(msg)
