"""The registered op `clnode::solve` and its reverse pass `clnode::solve_vjp`.

solve(y0, args, params, times, save_ts, spec) -> (ys, stats, tinfo, tape): one clnode.solve of
the batch y0 (B, N) with the model made of params ([w0, b0, w1, ..., s] in the library's order)
and the spec (a JSON string: the model's form, the method and options), each trajectory b from
times[0, b] to times[1, b] with first step times[2, b] (NaN: chosen, dt0="auto"), saving at
save_ts ((T,) shared or (B, T)). ys (B, T, N) in y0's dtype; stats (B, 5) int64: result,
num_steps, num_accepted_steps, num_rejected_steps, num_rhs_evals; tinfo (B, 2) float64:
first_step, t_final.

The tape is an output: a forward whose spec says "keep" (the front ends set it where a gradient
may be asked for: grad mode on and an input that requires grad) solves with keep_tape and returns
the library's tape bytes (clnode_solution_tape_export: what the reverse pass reads, the
solution's statistics, its saved points' counts and times and its tape, not the saved values,
which are ys; doc/gradient.md) as a uint8 tensor, of a size known only once solved (its fake is a
data-dependent size); otherwise the tape is empty. solve_vjp(ys_bar, tape, params, spec) imports
them (clnode_solution_tape_import, which checks every part and the model's fingerprint) and runs
the library's reverse pass from them. The op is functional: its outputs are a function of its
inputs alone, and its backward needs nothing but its saved tensors, so opcheck and torch.compile
take it as it is, and a training step solves once."""
import functools
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.autograd.forward_ad as fwad
from torch import Tensor

from .. import _clnode, _model, _solve
from . import _cuda
from ._field import Refusal

def _np(x: Tensor) -> np.ndarray:
    """A CPU tensor's values as numpy: a view of its memory (no copy) for a contiguous CPU
    tensor, which the extension reads as it is (float32 converted to float64 exactly where the
    library takes float64)."""
    return x.detach().cpu().numpy()


@functools.lru_cache(maxsize=64)
def _config(spec: str) -> Dict[str, Any]:
    """The spec's dict (read once per spec), with the extension's solve options of each
    precision already checked and converted (clnode.solve's own checks, once per spec)."""
    cfg = json.loads(spec)
    base = dict(cfg["options"], method=cfg["method"])
    if cfg["keep"]:
        base["keep_tape"] = True
    cfg["opts"] = {}
    for prec in ("fp32", "fp64"):
        for auto in (False, True):
            o = _solve._table_options(dict(base, precision=prec, **(
                {"dt0_auto": True} if auto else {})))
            o.update(save_t0=False, save_t1=False, save_steps=False)
            cfg["opts"][prec, auto] = o
    return cfg


def _model_of(params: Sequence[Tensor], cfg: Dict[str, Any]) -> _model.MLP:
    """The library's model of the parameters: made by the extension from views of the tensors'
    memory (float32 or float64 as they are: the model keeps them in float64, exactly, one copy;
    clnode.MLP's argument checks are the field recognition's here, and the library checks the
    values)."""
    it = iter(params)
    ws: List[np.ndarray] = []
    bs: List[Optional[np.ndarray]] = []
    for has_b in cfg["has_bias"]:
        ws.append(_np(next(it)))
        bs.append(_np(next(it)) if has_b else None)
    scale = _np(next(it)).reshape(-1) if cfg["has_scale"] else None
    return _model.MLP._wrap(_clnode.Model.from_arrays(
        ws, bs, cfg["activation"], cfg["final_activation"], bool(cfg["time_input"]),
        int(cfg["inputs"]), scale))


def _run(y0: Tensor, args: Optional[Tensor], params: Sequence[Tensor], times: Tensor,
         save_ts: Tensor, spec: str) -> Tuple[Any, ...]:
    """The extension's solve of the op's inputs (solved with keep_tape where the spec says
    "keep"): (ts, ys, stats, t_final, certificate, tape, first_step), as clnode.solve's; the
    arguments are clnode.solve's, made once per spec (_config) and from the tensors' memory."""
    cfg = _config(spec)
    model = _model_of(params, cfg)
    tm = _np(times)
    auto = bool(np.isnan(tm[2]).any())
    opts = cfg["opts"]["fp64" if y0.dtype == torch.float64 else "fp32", auto]
    extra: Dict[str, Any] = dict(save_ts=_np(save_ts), t0s=tm[0], t1s=tm[1])
    if not auto:
        extra["dt0s"] = tm[2]
    if args is not None:
        extra["inputs"] = _np(args)
    return _solve._run(None, None, model, _np(y0), opts, extra)


@torch.library.custom_op("clnode::solve", mutates_args=())
@_solve.ieee
def solve_op(y0: Tensor, args: Optional[Tensor], params: List[Tensor], times: Tensor,
             save_ts: Tensor, spec: str) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    keep = bool(_config(spec)["keep"])
    if _cuda.on_device(y0, times, save_ts):  # CUDA tensors on their device, no copy
        cfg = _config(spec)
        return _cuda.solve(y0, args, _model_of(params, cfg), times, save_ts, cfg, keep)
    out = _run(y0, args, params, times, save_ts, spec)
    tape = torch.empty((out[5].nbytes if keep else 0,), dtype=torch.uint8)
    if keep:
        out[5].export_into(tape.numpy())  # written in place: no copy
    # the extension's arrays, new and contiguous: the tensors share their memory
    stats = torch.from_numpy(out[2])  # result, num_steps, accepted, rejected, rhs_evals
    tinfo = torch.from_numpy(np.stack([out[6], out[3]], axis=1))  # first_step, t_final
    ys = torch.from_numpy(out[1])
    if y0.device.type != "cpu":
        return ys.to(y0.device), stats.to(y0.device), tinfo.to(y0.device), tape.to(y0.device)
    return ys, stats, tinfo, tape


@solve_op.register_fake
def _solve_fake(y0, args, params, times, save_ts, spec):
    B, N = y0.shape
    T = save_ts.shape[-1]
    # the tape's bytes follow the steps taken: a size known once solved
    n = torch.library.get_ctx().new_dynamic_size() if _config(spec)["keep"] else 0
    return (y0.new_empty((B, T, N)), y0.new_empty((B, 5), dtype=torch.int64),
            y0.new_empty((B, 2), dtype=torch.float64), y0.new_empty((n,), dtype=torch.uint8))


@torch.library.custom_op("clnode::solve_vjp", mutates_args=())
@_solve.ieee
def solve_vjp_op(ys_bar: Tensor, tape: Tensor, params: List[Tensor], spec: str) -> List[Tensor]:
    """The gradients of y0 (B, N), args ((B, k); (0,) without) and each parameter, from the
    cotangent ys_bar (B, T, N) of ys and the forward's tape."""
    cfg = _config(spec)
    if tape.numel() == 0:
        raise RuntimeError("clnode::solve_vjp: the forward kept no tape (it ran without a "
                           "gradient wanted: grad mode off or no input requiring grad)")
    model = _model_of(params, cfg)
    # the cotangent read as float64 (exactly) by the reverse pass; the tape's bytes read in place
    cot = ys_bar.detach().cpu().to(torch.float64).contiguous().numpy()
    buf = tape.detach().cpu().contiguous().numpy()
    g = _solve._on_context(_solve._reverse_device(None, None), lambda ctx: _clnode.tape_import(
        ctx, model._m, buf, cot.shape[1]).gradient(ctx, cot))
    out = [_like(g["y0"], ys_bar)]
    out.append(_like(g["inputs"], ys_bar) if cfg["inputs"] else ys_bar.new_empty((0,)))
    flat = []
    for w, b in zip(g["weights"], g["biases"]):
        flat.append(w)
        if b is not None:
            flat.append(b)
    if cfg["has_scale"]:
        flat.append(g["out_scale"])
    for a, p in zip(flat, params):
        out.append(_like(a, p) if a.shape == p.shape else _like(a, p).reshape(p.shape))
    return out


def _like(a: np.ndarray, like: Tensor) -> Tensor:
    """The extension's float64 array as a tensor of like's dtype and device (float64 on the
    CPU: its memory, no copy). Converted by numpy (the same rounding as torch's, a third of
    Tensor.to's time per tensor: the backward makes one per parameter)."""
    t = torch.from_numpy(a if like.dtype == torch.float64 else a.astype(np.float32))
    return t if like.device.type == "cpu" else t.to(like.device)


@solve_vjp_op.register_fake
def _solve_vjp_fake(ys_bar, tape, params, spec):
    B, _, N = ys_bar.shape
    k = _config(spec)["inputs"]
    return ([ys_bar.new_empty((B, N)), ys_bar.new_empty((B, k) if k else (0,))]
            + [torch.empty_like(p) for p in params])


def _setup(ctx, inputs, output):
    y0, args, params, times, save_ts, spec = inputs
    ctx.spec = spec
    ctx.has_args = args is not None
    ctx.ys_shape = output[0].shape
    ctx.save_for_backward(output[3], *params)
    ctx.mark_non_differentiable(output[1], output[2], output[3])


def _backward(ctx, ys_bar, stats_bar, tinfo_bar, tape_bar):
    if (ys_bar is not None and fwad.unpack_dual(ys_bar).tangent is not None) or (
            _config(ctx.spec).get("tangent") and torch.is_grad_enabled()
            and fwad._current_level >= 0):
        # forward-over-reverse: the gradient's own tangent, which the reverse pass has not
        raise Refusal("a forward-mode tangent of a gradient through clnode.torch is not "
                      "supported (forward-over-reverse: a backward with create_graph=True "
                      "under torch.autograd.forward_ad.dual_level, or of a cotangent carrying "
                      "a tangent): clnode computes first derivatives, forward or reverse")
    tape, *params = ctx.saved_tensors
    if ys_bar is None:
        ys_bar = tape.new_zeros(ctx.ys_shape, dtype=params[0].dtype)
    g = solve_vjp_op(ys_bar.contiguous(), tape, list(params), ctx.spec)
    return g[0], (g[1] if ctx.has_args else None), list(g[2:]), None, None, None


solve_op.register_autograd(_backward, setup_context=_setup)


@solve_op.register_vmap
def _solve_vmap(info, in_dims, y0, args, params, times, save_ts, spec):
    """A vmapped solve is one batched solve: the mapped axis joins the trajectories' (each
    trajectory is solved as alone, so this equals a loop over the mapped axis, bit for bit). A
    mapped parameter is solved one slice at a time."""
    y_dim, a_dim, p_dims, t_dim, s_dim, _ = in_dims
    V = info.batch_size
    if any(d is not None for d in p_dims):
        outs = [solve_op(_slice(y0, y_dim, v), _slice(args, a_dim, v),
                         [_slice(p, d, v) for p, d in zip(params, p_dims)],
                         _slice(times, t_dim, v), _slice(save_ts, s_dim, v), spec)
                for v in range(V)]
        # each slice's tape (its autograd node keeps its own): padded to the longest, which the
        # import allows (the bytes after a tape are not read)
        n = max(int(o[3].shape[0]) for o in outs)
        tapes = torch.stack([torch.nn.functional.pad(o[3], (0, n - int(o[3].shape[0])))
                             for o in outs])
        return tuple(torch.stack([o[i] for o in outs]) for i in range(3)) + (tapes,), (0, 0, 0, 0)
    B = y0.shape[-2] if y_dim is None else y0.movedim(y_dim, 0).shape[1]
    y = _expand(y0, y_dim, V).reshape(V * B, -1)
    a = None if args is None else _expand(args, a_dim, V).reshape(V * B, -1)
    tm = _expand(times, t_dim, V).movedim(0, 1).reshape(3, V * B)
    s = save_ts
    if s.dim() - (s_dim is not None) == 1:  # (T,) shared: a row per trajectory
        s = _expand(s, s_dim, V)[:, None, :].expand(V, B, -1)
    else:
        s = _expand(s, s_dim, V)
    s = s.reshape(V * B, -1).contiguous()
    ys, stats, tinfo, tape = solve_op(y.contiguous(), None if a is None else a.contiguous(),
                                      params, tm.contiguous(), s, spec)
    # one solve of the V x B trajectories: one tape, shared by the slices
    return (ys.reshape(V, B, *ys.shape[1:]), stats.reshape(V, B, 5),
            tinfo.reshape(V, B, 2), tape), (0, 0, 0, None)


def _slice(x, d, v):
    return x if x is None or d is None else x.select(d, v)


def _expand(x, d, V):
    """x with the mapped axis first (broadcast to V where it is not mapped)."""
    if d is None:
        return x.unsqueeze(0).expand(V, *x.shape)
    return x.movedim(d, 0)
