"""Reverse-mode differentiation of clnode.jax.diffeqsolve: the one file that uses JAX's
primitive machinery (jax.extend.core.Primitive and the jax.interpreters rules, written for jax
0.10.2; see python/requirements-test.txt).

A diffeqsolve call is a jax.custom_jvp function around fwd_p, the forward solve: one
jax.pure_callback whose operands and results are packed into one flat array per dtype. Its
JVP rule gives the primal outputs and the tangent of ys as `lin_p`, a primitive linear in the
tangents of y0, args, the field's factor s and the MLP's parameters, which is never evaluated:
under jax.grad it is transposed into `vjp_p`, whose callback re-solves the batch with the
library's tape (keep_tape: the same steps and bits as the forward) and runs the library's
reverse pass (clnode.Solution.vjp). JAX moves the rest: the factor's cotangent onto the field's
leaves that make s, the parameters' onto the equinox module.

Batching. Under jax.vmap the batched operands get one leading axis each; y0 and args are
broadcast to the batch (their cotangents are per trajectory), the factor and the parameters keep
a size-1 axis, so that their cotangent is summed over the batch inside the library, in its fixed
order: no intermediate of the batch times the parameters exists. vmap applied to a gradient
(per-example gradients, `keep` axes) re-solves each kept index's trajectories on their own
(the same bits as in the batch) and returns one gradient per index.

The time arguments (t0, t1, dt0, SaveAt ts) have no gradient in the library: their tangents
are refused by name when they are non-zero (only when someone differentiates them). Forward mode
(jax.jvp, jax.jacfwd, jax.hessian) is refused with a TypeError."""
import collections
import itertools
import math
import threading
from typing import Any, Callable, List, Tuple

import numpy as np

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import _solve

# the operands of the forward (clnode.jax's call): y0, t0, t1, dt0, save times, args, the
# field's factor s (one value per component) when traced, then the MLP's weights and biases,
# raveled into one flat array, when they are traced
Y0, T0, T1, DT0, TS, ARGS, SV, PARAMS = range(8)
_TIME_NAMES = {T0: "t0", T1: "t1", DT0: "dt0", TS: "SaveAt(ts=...)"}

_FORWARD_MODE = ("clnode computes first-order reverse-mode gradients only (jax.grad, "
                 "jax.value_and_grad, "
                 "jax.vjp, eqx.filter_grad, eqx.filter_value_and_grad, jax.jacrev), not {what}: "
                 "forward mode (jax.jvp, jax.jacfwd, jax.hessian, jax.linearize) is not "
                 "computed by clnode.jax.diffeqsolve")


class Problem:
    """A diffeqsolve call's static parts, as a primitive's parameter (hashed by identity).
    setup(*operands, scale_vector) -> (lead, model, y0 rows, clnode.solve keywords);
    raise_in_callback(e): raises a callback's exception so that it reaches the caller under
    jax.jit with its message; n, T: state dimension and time slots; checkpoint_every: the
    tape's (diffrax's adjoint checkpoints)."""

    def __init__(self, setup: Callable[..., Any],
                 raise_in_callback: Callable[[BaseException], Any], n: int, T: int,
                 checkpoint_every: int) -> None:
        self.setup, self.raise_in_callback = setup, raise_in_callback
        self.n, self.T, self.checkpoint_every = n, T, checkpoint_every

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


# The forward's solutions kept for their reverse pass, by token (the forward's last count): taken
# by the backward that reads the token, or dropped oldest first beyond _MAX_TAPES (a forward
# whose gradient is never taken, as under jax.linearize). A backward that finds none re-solves.
_TAPES: "collections.OrderedDict[int, Tuple[Any, Any]]" = collections.OrderedDict()
_TAPES_LOCK = threading.Lock()
_MAX_TAPES = 8
_TOKENS = itertools.count(1)


def keep_tape(sol: Any, model: Any) -> int:
    """Keeps a forward's solution (solved with keep_tape) and its model; returns its token."""
    with _TAPES_LOCK:
        token = next(_TOKENS) % 2147483647 or 1
        _TAPES[token] = (sol, model)
        while len(_TAPES) > _MAX_TAPES:
            _TAPES.popitem(last=False)
    return token


def _take_tape(token: np.ndarray) -> Any:
    """The kept (solution, model) of the forward whose token the operand holds (the same value
    for every trajectory of the batch), removed; None when none is kept."""
    flat = np.asarray(token).reshape(-1)
    if flat.size == 0 or not np.all(flat == flat[0]):
        return None
    with _TAPES_LOCK:
        return _TAPES.pop(int(flat[0]), None)


def _per_trajectory_operand(i: int) -> bool:
    """Whether operand i's cotangent is one per trajectory (y0, args) rather than one for the
    batch (the factor and the parameters)."""
    return i in (Y0, ARGS)


# --------------------------------------------------------------------------------------------
# fwd_p: the forward solve (clnode.jax's callback), one packed callback per call

fwd_p = Primitive("clnode_solve")
fwd_p.multiple_results = True


class Forward:
    """A diffeqsolve call's forward, as fwd_p's parameter (hashed by identity): host(*operands,
    keep) solves the batch the operands give (numpy arrays, each with the batch's leading axes
    or size-1 ones, as pure_callback's vmap_method="expand_dims" passes them) and returns
    numpy arrays of `shapes` (ShapeDtypeStructs of one trajectory's outputs) with the batch's
    leading axes. It handles its own errors (raised in eqx.error_if's form under jax.jit, kept
    for the caller otherwise)."""

    def __init__(self, host: Callable[..., Any], shapes: Any) -> None:
        self.host, self.shapes = host, tuple(shapes)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


def forward(fwd: Forward, keep: bool, *operands: Any) -> Any:
    """The forward's outputs for `operands` (keep: solved keeping the tape, its token in the
    last count)."""
    return tuple(fwd_p.bind(*operands, fwd=fwd, keep=keep, lead=()))


def _fwd_abstract(*operands, fwd, keep, lead):
    return [jax.core.ShapedArray(tuple(lead) + tuple(s.shape), s.dtype) for s in fwd.shapes]


def _fwd_impl(*operands, fwd, keep, lead):
    shapes = [tuple(lead) + tuple(s.shape) for s in fwd.shapes]
    dtypes = [np.dtype(s.dtype) for s in fwd.shapes]
    if _concrete(*operands):
        outs = fwd.host(*[np.asarray(x) for x in operands], keep=keep)
        return [jnp.asarray(o) for o in outs]
    return _packed_callback(lambda *ops: fwd.host(*ops, keep=keep), operands, shapes, dtypes,
                            None)


def _fwd_batch(args, dims, *, fwd, keep, lead):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    out = [_lead_axis(a, d, size, False) for a, d in zip(args, dims)]
    return fwd_p.bind(*out, fwd=fwd, keep=keep, lead=(size,) + tuple(lead)), \
        [0] * len(fwd.shapes)


# --------------------------------------------------------------------------------------------
# The JVP rule of the forward

def jvp_rule(call: Callable[..., Any], call_keeping_tape: Callable[..., Any],
             prob: Problem) -> Callable[..., Any]:
    """The custom_jvp rule (symbolic_zeros=True) of clnode.jax's forward `call`: the forward
    solved keeping its tape (its token in the last count), and the tangent of ys as lin_p."""

    def rule(primals, tangents):
        asked = [name for i, name in _TIME_NAMES.items()
                 if not isinstance(tangents[i], SymbolicZero)]
        if asked:
            names = " and ".join(asked)
            raise TypeError(
                f"clnode.jax.diffeqsolve computes no gradient with respect to {names} (the "
                "library's reverse pass differentiates y0, args and the vector field's arrays), "
                f"and {names} depend{'s' if len(asked) == 1 else ''} on what is differentiated "
                f"here: stop the gradient through {names} (jax.lax.stop_gradient) or "
                "differentiate only the model, y0 and args")
        want = tuple(i for i, t in enumerate(tangents)
                     if i in (Y0, ARGS, SV) or i >= PARAMS
                     if not isinstance(t, SymbolicZero))
        ts, ys, counts = call_keeping_tape(*primals) if want else call(*primals)
        zeros = (jnp.zeros_like(ts), jnp.zeros_like(ys),
                 np.zeros(np.shape(counts), jax.dtypes.float0))
        if not want:
            return (ts, ys, counts), zeros
        ys_dot = lin_p.bind(*[tangents[i] for i in want], counts[..., 4], *primals, prob=prob,
                            want=want, lead=tuple(np.shape(primals[Y0])[:-1]))
        return (ts, ys, counts), (zeros[0], ys_dot, zeros[2])

    return rule


# --------------------------------------------------------------------------------------------
# lin_p: the tangent of ys, linear in the wanted operands' tangents; transposed, never evaluated

lin_p = Primitive("clnode_solve_linear")
TOKEN = -1  # the forward's tape token: an operand of lin_p and vjp_p before the forward's


def _lin_abstract(*args, prob, want, lead):
    return jax.core.ShapedArray(tuple(lead) + (prob.T, prob.n), args[len(want) + 1 + Y0].dtype)


def _lin_impl(*args, **params):
    raise TypeError(_FORWARD_MODE.format(what="a forward-mode derivative"))


def _is_theta(i):
    """Whether operand i is the factor's or a parameter (one cotangent for the batch)."""
    return i == SV or i >= PARAMS


def _lin_batch(args, dims, *, prob, want, lead):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    index = list(want) + [TOKEN] + list(range(len(args) - len(want) - 1))
    theta_batched = any(d is not None and _is_theta(i) for i, d in zip(index, dims))
    out = [_lead_axis(a, d, size, _per_trajectory_operand(i) or (theta_batched and _is_theta(i)))
           for i, a, d in zip(index, args, dims)]
    return lin_p.bind(*out, prob=prob, want=want, lead=(size,) + tuple(lead)), 0


def _lin_transpose(ct, *args, prob, want, lead):
    nw = len(want)
    if type(ct) is ad.Zero:
        return [None] * len(args)
    grads = vjp_p.bind(ct, *args[nw:], prob=prob, want=want, lead=tuple(lead),
                       keep=(False,) * len(lead))
    return [g if ad.is_undefined_primal(a) else None for a, g in zip(args[:nw], grads)] + \
        [None] * (len(args) - nw)


def _no_forward_mode(primals, tangents, **params):
    raise TypeError(_FORWARD_MODE.format(what="a derivative of a gradient (jax.hessian, "
                                          "jax.jacfwd or jax.grad of jax.grad)"))


def no_higher_order(primals, tangents):
    """The JVP rule of the forward that keeps its tape, differentiated again."""
    _no_forward_mode(primals, tangents)


lin_p.def_impl(_lin_impl)
lin_p.def_abstract_eval(_lin_abstract)
batching.primitive_batchers[lin_p] = _lin_batch
ad.primitive_transposes[lin_p] = _lin_transpose
ad.primitive_jvps[lin_p] = _no_forward_mode
mlir.register_lowering(lin_p, mlir.lower_fun(_lin_impl, multiple_results=False))


def _lead_axis(a, d, size, broadcast):
    """Operand `a` with its batch axis `d` (None: unbatched) first: moved there, or, unbatched,
    broadcast to `size` (per-trajectory operands) or given a size-1 axis (the rest: the
    callback broadcasts it; its cotangent stays one for the batch)."""
    if d is not None:
        return jnp.moveaxis(a, d, 0)
    if broadcast:
        return jnp.broadcast_to(a, (size,) + np.shape(a))
    return jnp.expand_dims(a, 0)


# --------------------------------------------------------------------------------------------
# vjp_p: the cotangents of the wanted operands from the cotangent of ys (operands: ct, the
# forward's tape token, the forward's operands)

vjp_p = Primitive("clnode_solve_vjp")
vjp_p.multiple_results = True


def _vjp_shapes(operands, want, lead, keep):
    """The cotangents' shapes: per trajectory (y0, args) the batch's, the others one for the
    batch along the axes of the gradient (size 1 there) and the batch's along kept axes (vmap of
    a gradient) or where the operand itself is batched."""
    nl = len(lead)
    shapes = []
    for i in want:
        s = np.shape(operands[i])
        shapes.append(tuple(lead[a] if keep[a] or _per_trajectory_operand(i) else s[a]
                            for a in range(nl)) + tuple(s[nl:]))
    return shapes


def _vjp_abstract(ct, token, *operands, prob, want, lead, keep):
    return [jax.core.ShapedArray(s, operands[i].dtype)
            for s, i in zip(_vjp_shapes(operands, want, lead, keep), want)]


def _kept_axes(operands, lead, keep):
    """The leading axes along which the batch-wide cotangents are one per index: kept ones, and
    those along which the factor or a parameter operand is itself batched."""
    return [a for a in range(len(lead)) if keep[a] or any(
        np.shape(x)[a] > 1 for i, x in enumerate(operands) if _is_theta(i))]


def _take(x, axes, idx, nl):
    """Operand x (nl leading axes, each of the batch's size or 1) at index idx along `axes`
    (those axes removed)."""
    sel: List[Any] = [slice(None)] * nl
    for a, k in zip(axes, idx):
        sel[a] = k if np.shape(x)[a] > 1 else 0
    return x[tuple(sel)]


def _vjp_compute(prob, want, lead, keep, ct, token, operands):
    """The wanted cotangents (numpy) of a batch: from the forward's kept tape when the batch is
    one reverse pass and the tape is there, else re-solved, per kept index."""
    nl = len(lead)
    kept = _kept_axes(operands, lead, keep)
    tape = _take_tape(token)
    if not kept:
        return _reverse(prob, ct, operands, want, tape)
    shapes = _vjp_shapes(operands, want, lead, keep)
    outs = [np.zeros(s, operands[i].dtype) for s, i in zip(shapes, want)]
    for idx in np.ndindex(*[lead[a] for a in kept]):
        sub = [_take(x, kept, idx, nl) for x in operands]
        g = _reverse(prob, _take(ct, kept, idx, nl), sub, want, None)
        sel: List[Any] = [slice(None)] * nl
        for a, k in zip(kept, idx):
            sel[a] = k
        for o, gi in zip(outs, g):
            o[tuple(sel)] = gi.reshape(o[tuple(sel)].shape)
    return outs


def _reverse(prob, ct, operands, want, tape):
    """One reverse pass of the batch of `operands` (ct: the cotangent of its ys), with the
    forward's tape (solution, model) or, without it, re-solved keeping the tape (the same steps
    and bits); the wanted operands' cotangents, the batch-wide ones summed over the batch in the
    library."""
    lead = tuple(np.shape(ct)[:-2])
    if tape is not None:
        sol, m = tape
    else:
        _, m, yb, kw = prob.setup(*operands, scale_vector=SV in want)
        sol = _solve.solve(m, yb, keep_tape=True, checkpoint_every=prob.checkpoint_every, **kw)
    B = math.prod(lead)
    g = sol.vjp(np.reshape(ct, (B, prob.T, prob.n)))
    weights = [g.params[f"layers.{i}.weight"] for i in range(len(m.layers))]
    biases = [g.params[f"layers.{i}.bias"] for i, (_, b) in enumerate(m.layers)
              if b is not None]
    params = weights + biases
    out: List[np.ndarray] = []
    for i in want:
        if i == Y0:
            out.append(g.y0)
        elif i == ARGS:  # an operand only for a model with inputs
            assert g.args is not None
            out.append(g.args)
        elif i == SV:  # the factor, one value per component
            out.append(np.broadcast_to(g.params["out_scale"], (prob.n,)))
        else:  # the flat parameters: the weights, then the biases
            out.append(np.concatenate([np.ravel(x) for x in params]))
    shapes = _vjp_shapes(operands, want, lead, (False,) * len(lead))
    return [np.asarray(o, operands[i].dtype).reshape(s) for o, i, s in zip(out, want, shapes)]


def _packed(outs, dtypes):
    """Arrays as one flat array per dtype (one callback result each: every result of a
    callback costs a device transfer)."""
    return tuple(np.concatenate([np.ravel(o) for o, d in zip(outs, dtypes) if d == g] or
                                [np.zeros(0, g)]) for g in dict.fromkeys(dtypes))


def _layout(shapes, dtypes):
    """Where _packed puts each array of shapes and dtypes: (group, start, stop) in its dtype's
    flat array, and each group's size."""
    groups = list(dict.fromkeys(dtypes))
    sizes = [0] * len(groups)
    spans = []
    for s, d in zip(shapes, dtypes):
        g = groups.index(d)
        n = math.prod(s)
        spans.append((g, sizes[g], sizes[g] + n))
        sizes[g] += n
    return groups, sizes, spans


def _unpacked(flat, shapes, spans, xp: Any = np):
    """The arrays of shapes that _packed packed into `flat` (one per dtype) at `spans`
    (_layout's); xp: np in a callback, jnp for the callback's results in JAX."""
    return [xp.asarray(flat[g])[a:b].reshape(s) for s, (g, a, b) in zip(shapes, spans)]


def _packed_callback(fn, ins, shapes, dtypes, on_error):
    """fn(*numpy arrays) -> arrays of `shapes` and `dtypes`, called through one
    jax.pure_callback whose operands and results are one flat array per dtype (every operand
    and every result of a callback is a transfer, ~30 us each). on_error(e), when given, raises
    a callback's exception so that it reaches the caller under jax.jit with its message."""
    in_dtypes = [np.dtype(x.dtype) for x in ins]
    in_shapes = [tuple(np.shape(x)) for x in ins]
    in_groups, _, in_spans = _layout(in_shapes, in_dtypes)
    groups, sizes, spans = _layout(shapes, dtypes)

    def host(*flat_in):
        try:
            outs = fn(*_unpacked(flat_in, in_shapes, in_spans))
            return _packed(outs, dtypes)
        except Exception as e:  # noqa: BLE001 - the library's message, raised as under jit
            if on_error is not None:
                on_error(e)
            raise

    packed_in = [jnp.concatenate([jnp.ravel(x) for x, d in zip(ins, in_dtypes) if d == g])
                 for g in in_groups]
    flat = jax.pure_callback(host, [jax.ShapeDtypeStruct((n,), g) for n, g in zip(sizes, groups)],
                             *packed_in)
    return _unpacked(flat, shapes, spans, jnp)


def _concrete(*xs):
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def _vjp_impl(ct, token, *operands, prob, want, lead, keep):
    shapes = _vjp_shapes(operands, want, lead, keep)
    dtypes = [np.dtype(operands[i].dtype) for i in want]
    if _concrete(ct, token, *operands):  # eager: errors raised as they are
        outs = _vjp_compute(prob, want, lead, keep, np.asarray(ct), np.asarray(token),
                            [np.asarray(x) for x in operands])
        return [jnp.asarray(o) for o in outs]
    return _packed_callback(lambda ct_, token_, *ops: _vjp_compute(prob, want, lead, keep, ct_,
                                                                   token_, ops),
                            (ct, token, *operands), shapes, dtypes, prob.raise_in_callback)


def _vjp_batch(args, dims, *, prob, want, lead, keep):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    out = [_lead_axis(args[0], dims[0], size, True), _lead_axis(args[1], dims[1], size, False)]
    for i, (a, d) in enumerate(zip(args[2:], dims[2:])):
        out.append(_lead_axis(a, d, size, _per_trajectory_operand(i)))
    grads = vjp_p.bind(*out, prob=prob, want=want, lead=(size,) + tuple(lead),
                       keep=(True,) + tuple(keep))
    return grads, [0] * len(grads)


vjp_p.def_impl(_vjp_impl)
vjp_p.def_abstract_eval(_vjp_abstract)
batching.primitive_batchers[vjp_p] = _vjp_batch
ad.primitive_jvps[vjp_p] = _no_forward_mode
mlir.register_lowering(vjp_p, mlir.lower_fun(_vjp_impl, multiple_results=True))

fwd_p.def_impl(_fwd_impl)
fwd_p.def_abstract_eval(_fwd_abstract)
batching.primitive_batchers[fwd_p] = _fwd_batch
ad.primitive_jvps[fwd_p] = _no_forward_mode
mlir.register_lowering(fwd_p, mlir.lower_fun(_fwd_impl, multiple_results=True))


def checkpoint_every(adjoint: Any, max_steps: int) -> int:
    """The tape's checkpoint_every of diffrax.RecursiveCheckpointAdjoint(checkpoints=k): every
    state kept (1) for checkpoints=None, else about max_steps / k steps between kept states (the
    same gradient bits at any value; only the memory and the recomputation change)."""
    k = adjoint.checkpoints
    if k is None:
        return 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"RecursiveCheckpointAdjoint(checkpoints={k!r}): checkpoints must be "
                         "a positive integer or None")
    return max(1, -(-int(max_steps) // int(k)))


__all__: Tuple[str, ...] = ("Problem", "Forward", "forward", "jvp_rule", "no_higher_order",
                            "keep_tape", "checkpoint_every")
