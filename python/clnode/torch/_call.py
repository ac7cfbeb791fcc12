"""A front end's call of the op: the field recognised, its parameters gathered, dtypes checked,
the spec made, the op called (clnode.torch's shared part)."""
import functools
import json
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import _field, _forward, _op
from ._field import Refusal

# the library's methods by the peers' names
METHODS = {"dopri5": "dopri5", "tsit5": "tsit5", "dopri8": "dopri8", "bosh3": "bosh3",
           "adaptive_heun": "heun", "heun": "heun"}


def method_name(method: Any, peer: str, table: Dict[str, str]) -> str:
    if not isinstance(method, str):
        raise Refusal(f"method {type(method).__name__}: clnode.torch takes a method by name ("
                      + ", ".join(table) + ")")
    name = table.get(method.lower() if peer == "torchode" else method)
    if name is None:
        raise Refusal(f"method {method!r} is not one of clnode's: {peer}'s " + ", ".join(
            repr(m) for m in table) + " are mapped (fixed-grid, implicit, Adams and scipy "
            "methods are not)")
    return name


def check_dtype(y0: Tensor, params: Sequence[Tuple[str, Tensor]],
                args: Optional[Tensor]) -> None:
    if y0.dtype not in (torch.float32, torch.float64):
        raise Refusal(f"y0 is {y0.dtype}: clnode solves in float32 or float64 (for float16 or "
                      "bfloat16, convert: y0.float() and module.float())")
    if y0.device.type not in ("cpu", "cuda"):
        raise Refusal(f"y0 is on {y0.device}: clnode.torch takes CPU and CUDA tensors")
    for name, p in params:
        if p.dtype != y0.dtype:
            raise Refusal(f"the parameter {name} is {p.dtype} but y0 is {y0.dtype}: clnode "
                          "solves in one precision (module.to(y0.dtype))")
        if p.device != y0.device:
            raise Refusal(f"the parameter {name} is on {p.device}, y0 on {y0.device}")
    if args is not None and args.dtype != y0.dtype:
        raise Refusal(f"args is {args.dtype} but y0 is {y0.dtype}")


@torch.compiler.assume_constant_result
def _recognised(func: Any, n_args: int, dim: int, k: int, has_args: bool, method: str,
                options: Tuple[Tuple[str, Any], ...]) -> Tuple[str, ...]:
    """(the paths of the parameters the library reads, in its order, ..., then the op's spec
    without a gradient wanted, with one, and with a forward tangent): the field recognised and
    the specs made, kept with the module's recognition (made again when its tree changes:
    _field.recognise_memo) in eager mode, once per compilation under torch.compile (a constant
    of the graph: the forward's structure, not its values)."""
    field, memo = _field.recognise_memo(func, n_args, dim, k)
    key = (has_args, method, options)
    hit = memo.get(key)
    if hit is not None:
        return hit
    if has_args and not field.inputs:
        raise Refusal(f"args given but {type(func).__name__}.forward does not concatenate args "
                      "into its network's input")
    has_bias = field.has_bias(func)
    out = tuple(name for name, _ in field.parameters(func)) + tuple(
        _spec(field, has_bias, method, options, grad) for grad in (False, True)) + (
        _spec(field, has_bias, method, options, True, tangent=True),)
    memo[key] = out
    return out


def _spec(field: _field.Field, has_bias: Tuple[bool, ...], method: str,
          options: Tuple[Tuple[str, Any], ...], grad: bool, tangent: bool = False) -> str:
    """The op's spec; "tangent": the forward of a forward-mode call (its tape kept for the
    tangent pass), whose backward refuses to differentiate the gradient (_op._backward)."""
    extra = {"tangent": True} if tangent else {}
    return json.dumps(dict(has_bias=list(has_bias), has_scale=field.scale is not None,
                           activation=field.activation, final_activation=field.final_activation,
                           time_input=field.time_input, inputs=field.inputs, method=method,
                           options=dict(options), keep=grad, **extra), sort_keys=True)


def call(func: Any, y0: Tensor, args: Optional[Tensor], times: Tensor, save_ts: Tensor,
         n_args: int, method: str, options: Dict[str, Any],
         only: Optional[Sequence[Tensor]] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """(ys (B, T, N), stats (B, 5), tinfo (B, 2)) of func's field solved from y0 (B, N).
    only: the parameters that get gradients (odeint_adjoint's adjoint_params); the others are
    detached. The forward keeps its tape (the spec's "keep") where a gradient may be asked for:
    grad mode on and y0, args or a parameter the library reads requiring grad, or where y0, args
    or a parameter the library reads carries a forward tangent (forward mode, _forward: ys is
    then a dual tensor, its tangent the library's tangent pass from that tape; the parameters'
    tangents are read whatever `only` says)."""
    if y0.dim() != 2:
        raise Refusal(f"y0 of shape {tuple(y0.shape)}: clnode.torch takes (N,) or (B, N)")
    B, N = y0.shape
    k = 0 if args is None else int(args.shape[-1])
    *names, spec_nograd, spec_grad, spec_fwd = _recognised(
        func, n_args, N, k, args is not None, method, tuple(sorted(options.items())))
    named = [(name, _field.attribute(func, name)) for name in names]
    check_dtype(y0, named, args)
    params = [p for _, p in named]
    held = [False] * len(params) if only is None else [
        all(p is not q for q in only) for p in params]
    fwd = not torch.compiler.is_compiling() and _forward.check(y0, args, *params)
    if fwd:  # solved on the primals, the tangents kept for the tangent pass
        y0, dy0 = _forward.split(y0)
        args, dargs = (None, None) if args is None else _forward.split(args)
        params, dparams = map(list, zip(*[_forward.split(p) for p in params]))
    params = [p.detach() if h else p for p, h in zip(params, held)]
    grad = torch.is_grad_enabled() and (y0.requires_grad or (
        args is not None and args.requires_grad) or any(p.requires_grad for p in params))
    if args is not None and args.dim() == 1:
        args = args.expand(B, k)
        dargs = None if not fwd or dargs is None else dargs.expand(B, k)
    spec = spec_fwd if fwd else spec_grad if grad else spec_nograd
    ys, stats, tinfo, tape = _op.solve_op(y0.contiguous(), None if args is None else
                                          args.contiguous(), params, times.contiguous(),
                                          save_ts.contiguous(), spec)
    if fwd:
        ys = _forward.tangent(ys, tape, params, dy0, dargs, dparams, spec)
    return ys, stats, tinfo


def times_tensor(t0: Any, t1: Any, dt0: Any, B: int) -> Tensor:
    """(3, B) float64: t0, t1, dt0 per trajectory (dt0 NaN: chosen by the solver)."""
    one = [None] if torch.compiler.is_compiling() else [_scalar(v) for v in (t0, t1, dt0)]
    if all(v is not None for v in one):  # eager, one value each: a row of B
        return _times_rows(struct.pack("<3d", *one), B)

    def row(v):
        x = torch.as_tensor(v if v is not None else float("nan"), dtype=torch.float64)
        return x.detach().cpu().reshape(-1).expand(B) if x.numel() == 1 else \
            x.detach().cpu().reshape(B)
    return torch.stack([row(t0), row(t1), row(dt0)])


@functools.lru_cache(maxsize=16)
def _times_rows(bits: bytes, B: int) -> Tensor:
    """(3, B) float64 of the three times whose bits are `bits` (the key: their exact bits, -0.0
    and NaN included), kept: the op only reads it, and the steps of a training loop solving the
    same times take it without the torch calls that make it (about 0.03 ms a step, the front
    end's code being cold after a solve)."""
    return torch.tensor(struct.unpack("<3d", bits), dtype=torch.float64)[:, None].expand(
        3, B).contiguous()


def _scalar(v: Any) -> Optional[float]:
    """A time given as one number (None: NaN) as a float, else None."""
    if v is None:
        return float("nan")
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, Tensor) and v.numel() == 1:
        return float(v)  # exact: float64 holds every float32 and float64
    return None


def refuse_time_grad(*ts: Any) -> None:
    """A gradient asked for with respect to the times, or a forward tangent of the times, is
    refused by name (the library differentiates y0, args and the parameters)."""
    for t in ts:
        if isinstance(t, Tensor) and t.requires_grad and torch.is_grad_enabled():
            raise Refusal("a gradient with respect to the times (t, t_eval, t_span, dt0) is not "
                          "computed by clnode: detach them (t.detach())")
        if isinstance(t, Tensor) and _forward.split(t)[1] is not None:
            raise Refusal("a forward-mode tangent of the times (t, t_eval, t_span, dt0) is not "
                          "computed by clnode: give the times without one")


def stats_dict(stats: Tensor, tinfo: Tensor) -> Dict[str, Tensor]:
    return {"result": stats[:, 0], "num_steps": stats[:, 1], "num_accepted_steps": stats[:, 2],
            "num_rejected_steps": stats[:, 3], "num_rhs_evals": stats[:, 4],
            "first_step": tinfo[:, 0], "t_final": tinfo[:, 1]}


def options_of(names: List[str], given: Dict[str, Any], what: str) -> None:
    bad = sorted(set(given) - set(names))
    if bad:
        raise Refusal(f"{what} {bad} not supported by clnode.torch (it takes "
                      + ", ".join(names) + ")")
