"""torchdiffeq's odeint and odeint_adjoint, solved by clnode."""
from typing import Any, Dict, Optional

import torch
from torch import Tensor

from . import _call
from ._field import Refusal

_OPTIONS = ["first_step", "max_num_steps", "dtype", "safety", "ifactor", "dfactor"]


def _options(method: Optional[str], options: Optional[Dict[str, Any]],
             rtol: Any, atol: Any) -> Dict[str, Any]:
    opts = dict(options or {})
    _call.options_of(_OPTIONS, opts, "odeint options")
    out: Dict[str, Any] = {}
    for name, v in (("rtol", rtol), ("atol", atol)):
        if isinstance(v, Tensor):
            if v.numel() != 1:
                raise Refusal(f"{name} per component ({tuple(v.shape)}): clnode takes one "
                              f"{name}")
            v = float(v)
        out[name] = float(v)
    if opts.get("max_num_steps") is not None:
        out["max_steps"] = int(opts["max_num_steps"])
    for src, dst in (("safety", "safety"), ("ifactor", "factormax"), ("dfactor", "factormin")):
        if opts.get(src) is not None:
            out[dst] = float(opts[src])
    return out


def odeint(func: Any, y0: Tensor, t: Tensor, *, rtol: Any = 1e-7, atol: Any = 1e-9,
           method: Optional[str] = None, options: Optional[Dict[str, Any]] = None,
           event_fn: Any = None) -> Tensor:
    """torchdiffeq.odeint(func, y0, t, rtol=1e-7, atol=1e-9, method=None, options=None) solved
    by clnode: func an nn.Module whose forward(t, y) is one of the forms clnode.torch
    recognises, y0 (N,) or (B, N), t (T,) the save times (t[0] the start, t[-1] the end,
    increasing or decreasing). Returns (T, *y0.shape) in y0's dtype (a view of clnode's (B, T,
    N)).

    Each trajectory takes its own steps (its own PID control, diffrax's semantics), where
    torchdiffeq takes one step size for the whole batch: the steps and the results differ from
    torchdiffeq's at the order of the tolerances, and a trajectory's result never depends on
    the batch it is in.

    method: "dopri5" (None), "tsit5", "dopri8", "bosh3", "adaptive_heun" (clnode's heun, the
    same Heun-Euler pair); others (rk4, euler, midpoint, explicit_adams, implicit_adams,
    fehlberg2, scipy_solver, ...) are refused by name. options: first_step (else each
    trajectory's first step is chosen, as torchdiffeq chooses it: dt0="auto"), max_num_steps,
    dtype (ignored: clnode's times are float64), safety, ifactor (factormax),
    dfactor (factormin); others (norm, grid_points, step_t, jump_t, perturb, interp) refused.
    rtol and atol are passed as given (float32 solves with rtol below float32's resolution get
    the library's precision guard: clnode.PrecisionWarning, or precision_floor). Gradients:
    through torch's autograd (y0, the module's parameters); one asked for with respect to t is
    refused. Forward mode (torch.func.jvp, jacfwd, torch.autograd.forward_ad): one solve and the
    library's tangent pass (doc/torch.md); a tangent of t is refused."""
    return _odeint(func, y0, t, rtol, atol, method, options, event_fn, None)


def odeint_adjoint(func: Any, y0: Tensor, t: Tensor, *, rtol: Any = 1e-7, atol: Any = 1e-9,
                   method: Optional[str] = None, options: Optional[Dict[str, Any]] = None,
                   event_fn: Any = None, adjoint_rtol: Any = None, adjoint_atol: Any = None,
                   adjoint_method: Any = None, adjoint_options: Any = None,
                   adjoint_params: Any = None) -> Tensor:
    """torchdiffeq.odeint_adjoint solved by clnode: odeint's result, whose gradient is clnode's
    discrete reverse pass (the gradient of what was computed, as odeint's) rather than a
    continuous adjoint solved backwards. adjoint_rtol, adjoint_atol, adjoint_method and
    adjoint_options would tune that backward solve, which does not exist here: given, they are
    refused. adjoint_params: the parameters that get gradients (default: every parameter of
    func); the field's other parameters are held constant."""
    for name, v in (("adjoint_rtol", adjoint_rtol), ("adjoint_atol", adjoint_atol),
                    ("adjoint_method", adjoint_method), ("adjoint_options", adjoint_options)):
        if v is not None:
            raise Refusal(f"{name}: clnode's gradient is the discrete reverse pass of the forward "
                          "solve, not a continuous adjoint solved with its own settings (leave "
                          f"{name} unset)")
    only = None if adjoint_params is None else list(adjoint_params)
    return _odeint(func, y0, t, rtol, atol, method, options, event_fn, only)


def _odeint(func: Any, y0: Any, t: Any, rtol: Any, atol: Any, method: Optional[str],
            options: Optional[Dict[str, Any]], event_fn: Any, only: Any) -> Tensor:
    if event_fn is not None:
        raise Refusal("event_fn: clnode.torch solves without events")
    if isinstance(y0, tuple) or not isinstance(y0, Tensor):
        raise Refusal(f"y0 of type {type(y0).__name__}: clnode.torch takes one tensor (no "
                      "tuple states)")
    if not isinstance(t, Tensor) or t.dim() != 1 or t.numel() < 2:
        raise Refusal("t must be a 1-d tensor of at least two times")
    _call.refuse_time_grad(t, (options or {}).get("first_step"))
    name = _call.method_name("dopri5" if method is None else method, "torchdiffeq",
                             {m: _call.METHODS[m] for m in ("dopri5", "tsit5", "dopri8", "bosh3",
                                                            "adaptive_heun")})
    opts = _options(method, options, rtol, atol)
    first = (options or {}).get("first_step")
    single = y0.dim() == 1
    y = y0.reshape(1, -1) if single else y0
    B = y.shape[0]
    tt = t.detach().to(device="cpu", dtype=torch.float64)
    times = _call.times_tensor(tt[0], tt[-1], None if first is None else float(first), B)
    ys, _, _ = _call.call(func, y, None, times, tt, 2, name, opts, only=only)
    return ys[0] if single else ys.transpose(0, 1)
