"""The JAX primitives of clnode.jax.diffeqsolve and their reverse-mode differentiation: the one
file that uses JAX's primitive machinery (jax.extend.core.Primitive and the jax.interpreters
rules, written for jax 0.10.2; see python/requirements-test.txt).

A diffeqsolve call is solve(problem, operands): a jax.custom_jvp function (the call's frozen
Problem its non-differentiable argument, its Operands by name) around fwd_p, the forward solve:
under jax.jit on the CPU, and on a CUDA GPU where a CUDA plugin is installed, one call of
clnode's XLA custom call (_ffi), eagerly _callback.host (clnode.solve), and elsewhere (another
GPU JAX, a call with a progress meter) one jax.pure_callback
(_callback.host) whose operands and results are packed into one flat array per dtype. Its outputs (Outputs) are ts, ys, the counts and the tape's token. Its JVP rule
solves the forward keeping its tape (_tapes, found again by the token) and gives the tangent of
ys as `lin_p`, a primitive linear in the tangents of y0, args, the field's factor s and the
MLP's parameters, which is never evaluated: under jax.grad it is transposed into `vjp_p`, whose
custom call (or callback) takes the forward's tape (or re-solves the batch keeping it: the same steps and bits)
and runs the library's reverse pass (clnode.Solution.vjp). JAX moves the rest: the factor's
cotangent onto the field's leaves that make s, the parameters' onto the equinox module.

Batching. Under jax.vmap the batched operands get one leading axis each; y0 and args are
broadcast to the batch (their cotangents are per trajectory), the factor and the parameters keep
a size-1 axis, so that their cotangent is summed over the batch inside the library, in its fixed
order: no intermediate of the batch times the parameters exists. vmap applied to a gradient
(per-example gradients, `keep` axes) re-solves each kept index's trajectories on their own
(the same bits as in the batch) and returns one gradient per index.

Forward mode. Under jax.jvp, jax.jacfwd and jax.linearize, lin_p is evaluated: its custom
call (_ffi, or eagerly/elsewhere a callback) takes the forward's tape (or re-solves the batch
keeping it: the same steps and bits) and runs the library's tangent pass (clnode.Solution.jvp's),
the solve's own steps held. jax.vmap over the tangents alone (jax.jacfwd's columns) gives lin_p
direction axes (`dirs`) in front of the batch's: D directions are one call, one pass of the
library with ndir = D. jax.linearize keeps the forward's outputs and its token: the first call
of the linear function uses the forward's tape and frees it, later calls re-solve the forward
(the same bits) for their tangent pass. Derivatives of derivatives (jax.hessian, jax.jacfwd of
jax.grad, jax.grad of jax.jvp) are refused with a TypeError naming them.

The time arguments (t0, t1, dt0, SaveAt ts) have no derivative in the library: their tangents
are refused by name when they are non-zero (only when someone differentiates them), in both
modes."""
import functools
import math
from typing import Any, List, NamedTuple, Tuple

import numpy as np

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from .. import _model, _solve
from . import _callback, _ffi, _tapes
from ._problem import Operands, Problem


class Outputs(NamedTuple):
    """The forward's outputs: ts, ys, the counts (per trajectory num_steps, accepted,
    rejected and diffrax's result code) and the tape's token (per trajectory, the same value for
    the whole batch: the key of the forward's kept tape, _tapes; 0 when it kept none)."""

    ts: Any
    ys: Any
    counts: Any
    token: Any


NAMES = Operands._fields
_TIME_NAMES = {"t0": "t0", "t1": "t1", "dt0": "dt0", "ts": "SaveAt(ts=...)",
               "ctrl": "the step size controller's rtol, atol and coefficients"}
# the operands whose cotangent is one per trajectory (y0, args), and those with one for the
# batch (the factor and the parameters: "theta")
_PER_TRAJECTORY = ("y0", "args")
_THETA = ("scale", "params")
_DIFFERENTIABLE = _PER_TRAJECTORY + _THETA


def out_shapes(problem: Problem) -> Outputs:
    """One trajectory's outputs as ShapeDtypeStructs."""
    return Outputs(jax.ShapeDtypeStruct((problem.T,), problem.time_dtype),
                   jax.ShapeDtypeStruct((problem.T, problem.n), problem.y_dtype),
                   jax.ShapeDtypeStruct((4,), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32))


_SECOND_ORDER = ("clnode computes first-order derivatives only: reverse mode (jax.grad, "
                 "jax.value_and_grad, jax.vjp, eqx.filter_grad, jax.jacrev) and forward mode "
                 "(jax.jvp, jax.jacfwd, jax.linearize), not {what}: second-order derivatives "
                 "are not computed by clnode.jax.diffeqsolve")


# --------------------------------------------------------------------------------------------
# fwd_p: the forward solve (clnode.jax's callback), one packed callback per call

fwd_p = Primitive("clnode_solve")
fwd_p.multiple_results = True


def _fwd_abstract(*operands, problem, keep, lead):
    return [jax.core.ShapedArray(tuple(lead) + tuple(s.shape), s.dtype)
            for s in out_shapes(problem)]


def _fwd_impl(*operands, problem, keep, lead):
    shapes = [tuple(lead) + tuple(s.shape) for s in out_shapes(problem)]
    dtypes = [np.dtype(s.dtype) for s in out_shapes(problem)]
    if _concrete(*operands):
        outs = _callback.host(problem, Operands(*[np.asarray(x) for x in operands]), keep)
        return [jnp.asarray(o) for o in outs]
    return _packed_callback(lambda *ops: _callback.host(problem, Operands(*ops), keep),
                            operands, shapes, dtypes, None)


def _fwd_batch(args, dims, *, problem, keep, lead):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    out = [_lead_axis(a, d, size, False) for a, d in zip(args, dims)]
    return fwd_p.bind(*out, problem=problem, keep=keep, lead=(size,) + tuple(lead)), \
        [0] * len(Outputs._fields)


# --------------------------------------------------------------------------------------------
# The forward as a custom_jvp function, and its JVP rule

def solve(problem: Problem, operands: Operands) -> Outputs:
    """The forward of a diffeqsolve call (its frozen problem, its operands): differentiable in
    reverse mode with respect to y0, args, the factor and the parameters."""
    return Outputs(*_solve_fn(problem, *operands))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _solve_fn(problem, *operands):
    return tuple(fwd_p.bind(*operands, problem=problem, keep=False, lead=()))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _solve_keeping_tape(problem, *operands):
    """The forward under differentiation: solved keeping its tape, its token the last output."""
    return tuple(fwd_p.bind(*operands, problem=problem, keep=True, lead=()))


def _jvp_rule(problem, primals, tangents):
    """The JVP rule (symbolic_zeros=True) of the forward: the forward solved keeping its tape,
    and the tangent of ys as lin_p."""
    primals, tangents = Operands(*primals), Operands(*tangents)
    asked = [what for name, what in _TIME_NAMES.items()
             if not isinstance(getattr(tangents, name), SymbolicZero)]
    if asked:
        names = " and ".join(asked)
        raise TypeError(
            f"clnode.jax.diffeqsolve computes no gradient with respect to {names} (the "
            "library's reverse pass differentiates y0, args and the vector field's arrays), "
            f"and {names} depend{'s' if len(asked) == 1 else ''} on what is differentiated "
            f"here: stop the gradient through {names} (jax.lax.stop_gradient) or "
            "differentiate only the model, y0 and args")
    want = tuple(name for name in NAMES if name in _DIFFERENTIABLE  # in the operands' order
                 if not isinstance(getattr(tangents, name), SymbolicZero))
    out = Outputs(*(_solve_keeping_tape(problem, *primals) if want
                    else _solve_fn(problem, *primals)))
    zeros = Outputs(jnp.zeros_like(out.ts), jnp.zeros_like(out.ys),
                    np.zeros(np.shape(out.counts), jax.dtypes.float0),
                    np.zeros(np.shape(out.token), jax.dtypes.float0))
    if not want:
        return tuple(out), tuple(zeros)
    ys_dot = lin_p.bind(*[getattr(tangents, name) for name in want], out.token, *primals,
                        problem=problem, want=want, lead=tuple(np.shape(primals.y0)[:-1]),
                        dirs=())
    return tuple(out), tuple(zeros._replace(ys=ys_dot))


def _no_higher_order(problem, primals, tangents):
    """The JVP rule of the forward that keeps its tape, differentiated again (a second-order
    derivative)."""
    _no_second_order(primals, tangents)


_solve_fn.defjvp(_jvp_rule, symbolic_zeros=True)
_solve_keeping_tape.defjvp(_no_higher_order)


# --------------------------------------------------------------------------------------------
# lin_p: the tangent of ys, linear in the wanted operands' tangents: transposed under reverse mode,
# evaluated (the library's tangent pass) under forward mode. Its operands: the wanted operands'
# tangents (each with the direction axes `dirs` first, then the batch's leading axes `lead`, size
# 1 where one for the batch, then the operand's own), the forward's tape token, the forward's
# operands; its result (dirs, lead, T, N).

lin_p = Primitive("clnode_solve_linear")


def _lin_abstract(*args, problem, want, lead, dirs):
    y0 = args[len(want) + 1]  # the forward's first operand
    return jax.core.ShapedArray(tuple(dirs) + tuple(lead) + (problem.T, problem.n), y0.dtype)


def _lin_impl(*args, problem, want, lead, dirs):
    nw = len(want)
    shape = tuple(dirs) + tuple(lead) + (problem.T, problem.n)
    dtype = np.dtype(args[nw + 1].dtype)
    if _concrete(*args):  # eager: errors raised as they are
        out = _jvp_compute(problem, want, lead, dirs, [np.asarray(a) for a in args[:nw]],
                           np.asarray(args[nw]), Operands(*[np.asarray(x) for x in args[nw + 1:]]))
        return jnp.asarray(out)
    return _packed_callback(lambda *xs: [_jvp_compute(
        problem, want, lead, dirs, list(xs[:nw]), xs[nw], Operands(*xs[nw + 1:]))],
        args, [shape], [dtype], _callback.raise_in_callback)[0]


def _lin_batch(args, dims, *, problem, want, lead, dirs):
    """vmap of lin_p: over the forward's operands (then its token too), one more leading axis of
    the batch; over the tangents alone (jax.jacfwd's columns, jax.vmap of a linearized
    function), one more direction axis, first."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    nw, nd = len(want), len(dirs)
    names = list(want) + ["token"] + list(NAMES)
    if all(d is None for d in dims[nw:]):  # the tangents alone: directions
        out = [jnp.moveaxis(a, d, 0) if d is not None else
               jnp.broadcast_to(a, (size,) + np.shape(a)) for a, d in zip(args[:nw], dims[:nw])]
        return lin_p.bind(*out, *args[nw:], problem=problem, want=want, lead=lead,
                          dirs=(size,) + tuple(dirs)), 0
    theta_batched = any(d is not None and n in _THETA for n, d in zip(names, dims))
    out = []
    for i, (n, a, d) in enumerate(zip(names, args, dims)):
        at = nd if i < nw else 0  # a tangent's leading axes come after its direction axes
        bcast = n in _PER_TRAJECTORY or (theta_batched and n in _THETA)
        if d is not None:
            out.append(jnp.moveaxis(a, d, at))
        elif bcast:
            shape = np.shape(a)
            out.append(jnp.broadcast_to(jnp.expand_dims(a, at), shape[:at] + (size,) +
                                        shape[at:]))
        else:
            out.append(jnp.expand_dims(a, at))
    return lin_p.bind(*out, problem=problem, want=want, lead=(size,) + tuple(lead),
                      dirs=dirs), nd


def _lin_transpose(ct, *args, problem, want, lead, dirs):
    nw = len(want)
    if type(ct) is ad.Zero:
        return [None] * len(args)
    if dirs:
        raise TypeError(_SECOND_ORDER.format(what="the transpose of a batch of forward-mode "
                                                  "directions"))
    grads = vjp_p.bind(ct, *args[nw:], problem=problem, want=want, lead=tuple(lead),
                       keep=(False,) * len(lead))
    return [g if ad.is_undefined_primal(a) else None for a, g in zip(args[:nw], grads)] + \
        [None] * (len(args) - nw)


def _no_second_order(primals, tangents, **params):
    raise TypeError(_SECOND_ORDER.format(what="a derivative of a derivative (jax.hessian, "
                                          "jax.jacfwd of jax.grad or of jax.jacfwd, jax.grad "
                                          "of jax.grad or of jax.jvp)"))


lin_p.def_impl(_lin_impl)
lin_p.def_abstract_eval(_lin_abstract)
batching.primitive_batchers[lin_p] = _lin_batch
ad.primitive_transposes[lin_p] = _lin_transpose
ad.primitive_jvps[lin_p] = _no_second_order
mlir.register_lowering(lin_p, mlir.lower_fun(_lin_impl, multiple_results=False))


def _jvp_compute(problem, want, lead, dirs, tans, token, operands):
    """The tangent of ys (numpy, (dirs, lead, T, N)) of the wanted operands' tangents `tans`
    (dirs, lead, core): from the forward's kept tape when the batch is one tangent pass and the
    tape is there, else re-solved, per index of the axes along which a batch-wide operand or its
    tangent is batched."""
    nl, nd = len(lead), len(dirs)
    D = math.prod(dirs)
    tans = [np.reshape(t, (D,) + np.shape(t)[nd:]) for t in tans]
    kept = sorted(set(_kept_axes(operands, lead, (False,) * nl)) | {
        a for t, name in zip(tans, want) if name in _THETA for a in range(nl)
        if np.shape(t)[1 + a] > 1})
    tape = _tapes.take(token)
    out = np.zeros((D,) + tuple(lead) + (problem.T, problem.n), problem.y_dtype)
    if not kept:
        out[...] = _tangent(problem, want, tans, operands, tape, lead)
        return out.reshape(tuple(dirs) + out.shape[1:])
    for idx in np.ndindex(*[lead[a] for a in kept]):
        sub = Operands(*[_take(x, kept, idx, nl) for x in operands])
        sub_t = [np.stack([_take(t[d], kept, idx, nl) for d in range(D)]) for t in tans]
        sel: List[Any] = [slice(None)] + [slice(None)] * nl
        for a, k in zip(kept, idx):
            sel[1 + a] = k
        sub_lead = tuple(lead[a] for a in range(nl) if a not in kept)
        out[tuple(sel)] = _tangent(problem, want, sub_t, sub, None, sub_lead)
    return out.reshape(tuple(dirs) + out.shape[1:])


def _tangent(problem, want, tans, operands, tape, lead):
    """One tangent pass of the batch of `operands` (lead), with the forward's tape (solution,
    model) or, without it, re-solved keeping the tape (the same steps and bits): the tangent of
    ys, (D, lead, T, N), of the D directions `tans` of the wanted operands ((D, lead, core), one
    row for the batch for the factor and the parameters)."""
    if tape is not None:
        sol, m = tape
    else:
        _, m, yb, kw = _callback.setup(problem, operands, scale_vector=problem.scale_traced)
        sol = _solve.solve(m, yb, keep_tape=True, checkpoint_every=problem.checkpoint_every,
                           **kw)
    B = math.prod(lead)
    t = dict(zip(want, tans))
    D = np.shape(tans[0])[0]
    dy0 = None if "y0" not in t else np.reshape(
        np.broadcast_to(t["y0"], (D,) + tuple(lead) + (problem.n,)), (D, B, problem.n))
    dargs = None if "args" not in t or not problem.k else np.reshape(
        np.broadcast_to(t["args"], (D,) + tuple(lead) + (problem.k,)), (D, B, problem.k))
    dparams = None
    if "params" in t or "scale" in t:
        scale = m.out_scale
        ns = 0 if scale is None else scale.size
        if "scale" in t and ns != problem.n:
            raise ValueError("clnode.jax.diffeqsolve: the factor's tangent needs the model's "
                             f"output scale per component ({problem.n} values, not {ns})")
        n_params = sum(math.prod(w) + (0 if b is None else math.prod(b))
                       for w, b in problem.layer_shapes)
        rows = [np.reshape(t["params"], (D, -1, n_params))[:, 0] if "params" in t
                else np.zeros((D, n_params))]
        if ns:
            rows.append(np.reshape(t["scale"], (D, -1, ns))[:, 0] if "scale" in t
                        else np.zeros((D, ns)))
        dparams = np.concatenate(rows, axis=1)
    f = [None if x is None else np.ascontiguousarray(x, np.float64) for x in (dy0, dargs, dparams)]
    out = sol._tangent(D, *f)
    return np.reshape(out, (D,) + tuple(lead) + (problem.T, problem.n))


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
    for name in want:
        s = np.shape(getattr(operands, name))
        shapes.append(tuple(lead[a] if keep[a] or name in _PER_TRAJECTORY else s[a]
                            for a in range(nl)) + tuple(s[nl:]))
    return shapes


def _vjp_abstract(ct, token, *operands, problem, want, lead, keep):
    ops = Operands(*operands)
    return [jax.core.ShapedArray(s, getattr(ops, name).dtype)
            for s, name in zip(_vjp_shapes(ops, want, lead, keep), want)]


def _kept_axes(operands, lead, keep):
    """The leading axes along which the batch-wide cotangents are one per index: kept ones, and
    those along which the factor or a parameter operand is itself batched."""
    return [a for a in range(len(lead)) if keep[a] or any(
        np.shape(getattr(operands, name))[a] > 1 for name in _THETA)]


def _take(x, axes, idx, nl):
    """Operand x (nl leading axes, each of the batch's size or 1) at index idx along `axes`
    (those axes removed)."""
    sel: List[Any] = [slice(None)] * nl
    for a, k in zip(axes, idx):
        sel[a] = k if np.shape(x)[a] > 1 else 0
    return x[tuple(sel)]


def _vjp_compute(problem, want, lead, keep, ct, token, operands):
    """The wanted cotangents (numpy) of a batch: from the forward's kept tape when the batch is
    one reverse pass and the tape is there, else re-solved, per kept index."""
    nl = len(lead)
    kept = _kept_axes(operands, lead, keep)
    tape = _tapes.take(token)
    if not kept:
        return _reverse(problem, ct, operands, want, tape)
    shapes = _vjp_shapes(operands, want, lead, keep)
    outs = [np.zeros(s, getattr(operands, name).dtype) for s, name in zip(shapes, want)]
    for idx in np.ndindex(*[lead[a] for a in kept]):
        sub = Operands(*[_take(x, kept, idx, nl) for x in operands])
        g = _reverse(problem, _take(ct, kept, idx, nl), sub, want, None)
        sel: List[Any] = [slice(None)] * nl
        for a, k in zip(kept, idx):
            sel[a] = k
        for o, gi in zip(outs, g):
            o[tuple(sel)] = gi.reshape(o[tuple(sel)].shape)
    return outs


def _reverse(problem, ct, operands, want, tape):
    """One reverse pass of the batch of `operands` (ct: the cotangent of its ys), with the
    forward's tape (solution, model) or, without it, re-solved keeping the tape (the same steps
    and bits); the wanted operands' cotangents, the batch-wide ones summed over the batch in the
    library."""
    lead = tuple(np.shape(ct)[:-2])
    if tape is not None:
        sol, m = tape
    else:
        _, m, yb, kw = _callback.setup(problem, operands, scale_vector="scale" in want)
        sol = _solve.solve(m, yb, keep_tape=True, checkpoint_every=problem.checkpoint_every,
                           **kw)
    B = math.prod(lead)
    g = sol.vjp(np.reshape(ct, (B, problem.T, problem.n)))
    grads = {
        "y0": lambda: g.y0,
        "args": lambda: g.args,  # an operand only for a model with inputs
        "scale": lambda: np.broadcast_to(g.params["out_scale"], (problem.n,)),
        # the flat parameters, in the library's flat order as the operand lays them out
        "params": lambda: np.concatenate([np.ravel(x) for x in _model.flat_params(
            [(g.params[f"layers.{i}.weight"], g.params.get(f"layers.{i}.bias"))
             for i in range(len(m.layers))])])}
    shapes = _vjp_shapes(operands, want, lead, (False,) * len(lead))
    return [np.asarray(grads[name](), getattr(operands, name).dtype).reshape(s)
            for name, s in zip(want, shapes)]


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


def _vjp_impl(ct, token, *operands, problem, want, lead, keep):
    ops = Operands(*operands)
    shapes = _vjp_shapes(ops, want, lead, keep)
    dtypes = [np.dtype(getattr(ops, name).dtype) for name in want]
    if _concrete(ct, token, *operands):  # eager: errors raised as they are
        outs = _vjp_compute(problem, want, lead, keep, np.asarray(ct), np.asarray(token),
                            Operands(*[np.asarray(x) for x in operands]))
        return [jnp.asarray(o) for o in outs]
    return _packed_callback(lambda ct_, token_, *ops_: _vjp_compute(
        problem, want, lead, keep, ct_, token_, Operands(*ops_)), (ct, token, *operands),
        shapes, dtypes, _callback.raise_in_callback)


def _vjp_batch(args, dims, *, problem, want, lead, keep):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    out = [_lead_axis(args[0], dims[0], size, True), _lead_axis(args[1], dims[1], size, False)]
    for name, a, d in zip(NAMES, args[2:], dims[2:]):
        out.append(_lead_axis(a, d, size, name in _PER_TRAJECTORY))
    grads = vjp_p.bind(*out, problem=problem, want=want, lead=(size,) + tuple(lead),
                       keep=(True,) + tuple(keep))
    return grads, [0] * len(grads)


vjp_p.def_impl(_vjp_impl)
vjp_p.def_abstract_eval(_vjp_abstract)
batching.primitive_batchers[vjp_p] = _vjp_batch
ad.primitive_jvps[vjp_p] = _no_second_order
mlir.register_lowering(vjp_p, mlir.lower_fun(_vjp_impl, multiple_results=True))

fwd_p.def_impl(_fwd_impl)
fwd_p.def_abstract_eval(_fwd_abstract)
batching.primitive_batchers[fwd_p] = _fwd_batch
ad.primitive_jvps[fwd_p] = _no_second_order
mlir.register_lowering(fwd_p, mlir.lower_fun(_fwd_impl, multiple_results=True))

# On the CPU both primitives are clnode's custom calls (_ffi), but for a call with a progress
# meter, which keeps the callback (Python runs while the library works)
_fwd_callback_lowering = mlir.lower_fun(_fwd_impl, multiple_results=True)
_vjp_callback_lowering = mlir.lower_fun(_vjp_impl, multiple_results=True)


def _fwd_cpu_lowering(ctx, *args, problem, keep, lead):
    rule = _ffi.fwd_lowering if _ffi.takes(problem) else _fwd_callback_lowering
    return rule(ctx, *args, problem=problem, keep=keep, lead=lead)


def _vjp_cpu_lowering(ctx, *args, problem, want, lead, keep):
    rule = _ffi.vjp_lowering if _ffi.takes(problem) else _vjp_callback_lowering
    return rule(ctx, *args, problem=problem, want=want, lead=lead, keep=keep)


_lin_callback_lowering = mlir.lower_fun(_lin_impl, multiple_results=False)


def _lin_cpu_lowering(ctx, *args, problem, want, lead, dirs):
    rule = _ffi.jvp_lowering if _ffi.takes(problem) else _lin_callback_lowering
    return rule(ctx, *args, problem=problem, want=want, lead=lead, dirs=dirs)


mlir.register_lowering(fwd_p, _fwd_cpu_lowering, platform="cpu")
mlir.register_lowering(vjp_p, _vjp_cpu_lowering, platform="cpu")
mlir.register_lowering(lin_p, _lin_cpu_lowering, platform="cpu")
if _ffi.CUDA:  # the same custom calls on XLA's CUDA platform (staged through the host)
    mlir.register_lowering(fwd_p, _fwd_cpu_lowering, platform="cuda")
    mlir.register_lowering(vjp_p, _vjp_cpu_lowering, platform="cuda")
    mlir.register_lowering(lin_p, _lin_cpu_lowering, platform="cuda")


__all__: Tuple[str, ...] = ("Outputs", "solve", "out_shapes")
