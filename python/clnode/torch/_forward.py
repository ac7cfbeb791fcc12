"""Forward-mode AD through clnode.torch: the registered op `clnode::solve_jvp` and the front
ends' forward-mode call.

A call whose y0, args or a parameter the library reads carries a forward tangent
(torch.autograd.forward_ad's dual tensors, torch.func.jvp's and torch.func.jacfwd's inputs) is
solved once on the primals by `clnode::solve` with its tape kept (the "keep" spec), then
solve_jvp(tape, ys, params, dy0, dargs, dparams, spec) -> ys_dot runs the library's tangent pass
from that tape (clnode_solution_tape_import, then Tape.tangent: clnode.Solution.jvp's, with the
solve's own steps held), and the result is fwad.make_dual(ys, ys_dot). The directions: dy0 (D,
B, N), dargs (D, B, k), dparams (D, P) the parameters' tangents flattened in the op's params
order (the library's flat order, clnode_gradient_params'), one direction for the whole batch;
each None for zero. Its vmap rule makes a vmapped direction (torch.func.jacfwd's columns) more
directions of the same pass: one tangent pass of all of them, as clnode.jax's jax.jacfwd.

Refused by name: a derivative of the tangent (reverse-over-forward: a backward through ys_dot,
torch.func.jacrev of jacfwd; forward-over-reverse: a backward with create_graph under a dual
level, torch.func.jacfwd of jacrev; forward-over-forward: torch.func.jvp of jvp, hessian), and
tangents of the times (Refusal, from _call)."""
from typing import Any, List, Optional, Sequence, Tuple

import torch
import torch.autograd.forward_ad as fwad
from torch import Tensor

from .. import _clnode, _solve
from . import _op
from ._field import Refusal

_REVERSE = ("torch.func.grad, vjp and jacrev through clnode.torch are not supported (torch's "
            "custom_op autograd is an autograd.Function without setup_context, which torch.func "
            "refuses): use loss.backward() or torch.autograd.grad")
_SECOND = ("a derivative of a forward-mode tangent through clnode.torch is not supported "
           "({what}): clnode computes first derivatives, forward (torch.func.jvp, jacfwd, "
           "torch.autograd.forward_ad) or reverse (loss.backward(), torch.autograd.grad)")


def check(*tensors: Optional[Tensor]) -> bool:
    """Whether the op's inputs carry a forward tangent; torch.func's reverse-mode transforms
    (the inputs inside a grad level) and nested forward-mode ones (inside two jvp levels)
    refused by name."""
    F = torch._C._functorch
    grad, jvps = False, set()
    its = None  # the transforms by level, read where an input is inside one
    for x in tensors:
        while x is not None and F.is_functorch_wrapped_tensor(x):
            if its is None:
                its = {i.level(): i.key() for i in
                       torch._functorch.pyfunctorch.retrieve_all_functorch_interpreters()}
            level = F.maybe_get_level(x)
            grad |= its.get(level) == F.TransformType.Grad
            if its.get(level) == F.TransformType.Jvp:
                jvps.add(level)
            x = F.get_unwrapped(x)
    if grad and jvps:
        raise Refusal(_SECOND.format(what="torch.func.jacrev, vjp or grad of jacfwd or jvp, "
                                     "torch.func.jacfwd or jvp of jacrev, vjp or grad"))
    if grad:
        raise Refusal(_REVERSE)
    if len(jvps) > 1:
        raise Refusal(_SECOND.format(what="torch.func.jvp or jacfwd of jvp or jacfwd, "
                                     "torch.func.hessian"))
    return any(x is not None and fwad.unpack_dual(x).tangent is not None for x in tensors)


def split(x: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
    """(primal, tangent or None) of x."""
    u = fwad.unpack_dual(x)
    return u.primal, u.tangent


def tangent(ys: Tensor, tape: Tensor, params: Sequence[Tensor], dy0: Optional[Tensor],
            dargs: Optional[Tensor], dparams: Sequence[Optional[Tensor]], spec: str) -> Tensor:
    """ys as a dual tensor whose tangent is the tangent pass of one direction: dy0 (B, N),
    dargs (B, k), dparams each parameter's tangent (None: zero)."""
    dp = None
    if any(d is not None for d in dparams):
        dp = torch.cat([(torch.zeros_like(p) if d is None else d).reshape(-1)
                        for p, d in zip(params, dparams)])[None]
    ys_dot = solve_jvp_op(tape, ys, list(params), None if dy0 is None else dy0[None],
                          None if dargs is None else dargs[None], dp, spec)
    return fwad.make_dual(ys, ys_dot[0])


@torch.library.custom_op("clnode::solve_jvp", mutates_args=())
@_solve.ieee
def solve_jvp_op(tape: Tensor, ys: Tensor, params: List[Tensor], dy0: Optional[Tensor],
                 dargs: Optional[Tensor], dparams: Optional[Tensor], spec: str) -> Tensor:
    """The tangent of ys (D, B, T, N) in ys's dtype from the forward's tape (its ys (B, T, N))
    and the D directions dy0 (D, B, N), dargs (D, B, k), dparams (D, P) (None: zero)."""
    cfg = _op._config(spec)
    if tape.numel() == 0:
        raise RuntimeError("clnode::solve_jvp: the forward kept no tape")
    given = [d for d in (dy0, dargs, dparams) if d is not None]
    if not given:
        raise RuntimeError("clnode::solve_jvp: no direction given")
    D = int(given[0].shape[0])
    model = _op._model_of(params, cfg)
    buf = tape.detach().cpu().contiguous().numpy()
    dirs = [None if d is None else d.detach().cpu().to(torch.float64).contiguous().numpy()
            for d in (dy0, dargs, dparams)]

    def run(ctx):
        return _clnode.tape_import(ctx, model._m, buf, int(ys.shape[1])).tangent(
            ctx, D, dirs[0], dirs[1], dirs[2])
    try:
        out = _solve._on_context(_solve._reverse_device(None, None), run)
    except _clnode.UnsupportedError:  # a device without a tangent pass: the host's, same bits
        out = _solve._on_context("host", run)
    t = torch.from_numpy(out)
    return t.to(dtype=ys.dtype, device=ys.device)


@solve_jvp_op.register_fake
def _solve_jvp_fake(tape, ys, params, dy0, dargs, dparams, spec):
    D = next(d for d in (dy0, dargs, dparams) if d is not None).shape[0]
    return ys.new_empty((D,) + tuple(ys.shape))


def _backward(ctx, grad):
    raise Refusal(_SECOND.format(what="a backward through the tangent: torch.autograd.grad or "
                                 ".backward() of a function of it, torch.func.jacrev of jacfwd"))


solve_jvp_op.register_autograd(_backward)


@solve_jvp_op.register_vmap
def _solve_jvp_vmap(info, in_dims, tape, ys, params, dy0, dargs, dparams, spec):
    """Mapped directions alone (torch.func.jacfwd's columns, vmap over the tangents): more
    directions of one tangent pass. A mapped forward (vmap of a jvp: the mapped axis joined the
    trajectories of one solve, whose ys is mapped) takes the mapped tangents as those
    trajectories'; per-slice parameter directions then go through one pass of V x D directions,
    each slice's taken from its own. Mapped parameters (a solve per slice, their tapes stacked):
    a pass per slice."""
    t_dim, y_dim, p_dims, dy_dim, da_dim, dp_dim, _ = in_dims
    V = info.batch_size
    dirs = (dy0, dargs, dparams)
    d_dims = (dy_dim, da_dim, dp_dim)
    if t_dim is not None or any(d is not None for d in p_dims):
        outs = [solve_jvp_op(_op._slice(tape, t_dim, v), _op._slice(ys, y_dim, v),
                             [_op._slice(p, d, v) for p, d in zip(params, p_dims)],
                             *[_op._slice(x, d, v) for x, d in zip(dirs, d_dims)], spec)
                for v in range(V)]
        return torch.stack(outs), 0
    lead = [None if x is None else _op._expand(x, d, V) for x, d in zip(dirs, d_dims)]
    D = next(x.shape[1] for x in lead if x is not None)
    if y_dim is None:  # the directions alone: V x D directions
        flat = [None if x is None else x.reshape((V * D,) + x.shape[2:]) for x in lead]
        out = solve_jvp_op(tape, ys, params, *flat, spec)
        return out.reshape((V, D) + out.shape[1:]), 0
    # the trajectories joined: ys (V, B, T, N) solved as V * B trajectories
    Y = ys.movedim(y_dim, 0)
    B = Y.shape[1]
    yj = Y.reshape((V * B,) + Y.shape[2:])
    per = lead[:2]
    if dparams is None or dp_dim is None:  # (V, D, B, c) -> (D, V * B, c)
        flat = [None if x is None else x.movedim(0, 1).reshape(D, V * B, -1) for x in per]
        out = solve_jvp_op(tape, yj, params, *flat, dparams, spec)  # (D, V * B, T, N)
        return out.reshape((D, V, B) + out.shape[2:]).movedim(1, 0), 0
    # per-slice parameter directions: direction (v, d) of slice v alone, its block taken
    P = lead[2]  # (V, D, P)
    assert P is not None
    eye = torch.eye(V, dtype=ys.dtype, device=ys.device)
    flat = [None if x is None else torch.einsum("uv,vdbc->udvbc", eye.to(x.dtype), x).reshape(
        V * D, V * B, -1) for x in per]
    out = solve_jvp_op(tape, yj, params, *flat, P.reshape(V * D, -1), spec)
    out = out.reshape((V, D, V, B) + out.shape[2:])
    return torch.stack([out[v, :, v] for v in range(V)]), 0
