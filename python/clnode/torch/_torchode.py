"""torchode's solve_ivp, solved by clnode."""
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from .. import _solve
from . import _call
from ._field import Refusal

# torchode's status codes (torchode.status_codes) of the library's results
_STATUS = {"success": 0, "dt_min_reached": 2, "max_steps_reached": 3, "nonfinite": 4,
           "precision_floor": 1}
_TABLE = torch.tensor([_STATUS[str(r)] for r in _solve.Result], dtype=torch.int64)


class Solution:
    """torchode's Solution: ts (B, T), ys (B, T, N), stats (per sample, (B,) tensors:
    n_steps, n_accepted, n_f_evals, and clnode's first_step), status (B,) int64
    in torchode's codes (0 success, 1 general error: clnode's precision_floor, 2 dt_min reached,
    3 max_steps reached, 4 a non-finite value)."""

    def __init__(self, ts: Tensor, ys: Tensor, stats: Dict[str, Tensor], status: Tensor):
        self.ts, self.ys, self.stats, self.status = ts, ys, stats, status

    def __repr__(self) -> str:
        return f"Solution(ts={self.ts}, ys={self.ys}, stats={self.stats}, status={self.status})"


def _controller(controller: Any) -> Dict[str, Any]:
    """The library's controller options of a torchode step size controller (None: solve_ivp's
    default, PIDController(atol=1e-7, rtol=1e-7, pcoeff=0.2, icoeff=0.5, dcoeff=0.0))."""
    if controller is None:
        return dict(atol=1e-7, rtol=1e-7, pcoeff=0.2, icoeff=0.5, dcoeff=0.0)
    kind = type(controller).__name__
    if kind == "IntegralController":
        coeffs = dict(pcoeff=0.0, icoeff=1.0, dcoeff=0.0)
    elif kind == "PIDController":
        coeffs = dict(pcoeff=float(controller.pcoeff), icoeff=float(controller.icoeff),
                      dcoeff=float(controller.dcoeff))
    else:
        raise Refusal(f"controller {kind}: clnode.torch maps torchode's IntegralController and "
                      "PIDController (fixed steps are not mapped)")
    norm = getattr(controller, "norm", None)
    if getattr(norm, "__name__", None) != "rms_norm":
        raise Refusal(f"{kind}(norm={getattr(norm, '__name__', norm)}): clnode's error norm is "
                      "torchode's rms_norm")
    out: Dict[str, Any] = dict(coeffs)
    for name in ("atol", "rtol"):
        v = getattr(controller, name)
        if isinstance(v, Tensor) and v.numel() != 1:
            raise Refusal(f"{kind} {name} per component: clnode takes one {name}")
        out[name] = float(v)
    out.update(safety=float(controller.safety), factormin=float(controller.factor_min),
               factormax=float(controller.factor_max))
    if controller.dt_min is not None:
        out.update(dtmin=float(controller.dt_min), force_dtmin=False)
    if controller.dt_max is not None:
        out["dtmax"] = float(controller.dt_max)
    return out


def solve_ivp(f: Any, y0: Tensor, t_eval: Tensor, *,
              t_span: Optional[Tuple[Any, Any]] = None, method: Any = "tsit5",
              max_steps: Optional[int] = None, controller: Any = None, dt0: Any = None,
              args: Any = None) -> Solution:
    """torchode.solve_ivp(f, y0, t_eval, t_span=None, method="tsit5", max_steps=None,
    controller=None, dt0=None, args=None) solved by clnode: f an nn.Module whose forward(t, y)
    (or forward(t, y, args) when args is given) is one of the forms clnode.torch recognises,
    y0 (B, N), t_eval (T,) shared or (B, T) per sample, t_span (t_start, t_end), scalars or (B,)
    (default: t_eval's first and last columns), dt0 None (each sample's first step chosen, as
    torchode chooses it) or (B,). args: the conditioning inputs (B, k) of a field
    net(cat([y, args], -1)).

    Each sample is solved as alone, as torchode does (the same bits in any batch). method:
    "tsit5", "dopri5", "heun" (torchode's names; euler and method objects refused).
    controller: torchode's IntegralController or PIDController, its atol, rtol, coefficients,
    safety, factor_min, factor_max, dt_min, dt_max mapped as they are (torchode's PID
    coefficients have diffrax's convention, Söderlind's: the same factors; atol and rtol as
    torchode holds them, float32 tensors, whose values it solves with); None is solve_ivp's
    default PIDController(atol=1e-7, rtol=1e-7, pcoeff=0.2, icoeff=0.5, dcoeff=0.0). max_steps
    None: the library's largest (unbounded as torchode's, within 16777216 steps).

    The gradient is torchode's AutoDiffAdjoint(backprop_through_step_size_control=False)'s:
    the step sizes are held (diffrax's semantics), where torchode's default also differentiates
    its controller (a difference of the order of the tolerances). Forward mode (torch.func.jvp,
    jacfwd, torch.autograd.forward_ad) in y0, args and the parameters: one solve and the
    library's tangent pass, the same steps held; tangents of t_eval, t_span and dt0 are
    refused."""
    if not isinstance(y0, Tensor) or y0.dim() != 2:
        raise Refusal(f"y0 must be a (B, N) tensor (torchode's layout), not "
                      f"{getattr(y0, 'shape', type(y0).__name__)}")
    B = y0.shape[0]
    name = _call.method_name(method, "torchode", {m: _call.METHODS[m] for m in (
        "tsit5", "dopri5", "heun")})
    _call.refuse_time_grad(t_eval, dt0, *(t_span or ()))
    te = torch.as_tensor(t_eval).detach().to(device="cpu", dtype=torch.float64)
    if te.dim() not in (1, 2) or (te.dim() == 2 and te.shape[0] != B):
        raise Refusal(f"t_eval of shape {tuple(te.shape)}: torchode takes (T,) or ({B}, T)")
    te2 = te.expand(B, -1) if te.dim() == 1 else te
    t0, t1 = (te2[:, 0], te2[:, -1]) if t_span is None else t_span
    dt = None if dt0 is None else torch.as_tensor(dt0).detach().to(torch.float64)
    times = _call.times_tensor(t0, t1, dt, B)
    opts = _controller(controller)
    opts["max_steps"] = int(_solve.OPTIONS["max_steps"]["max"]) if max_steps is None \
        else int(max_steps)
    a = None
    if args is not None:
        a = torch.as_tensor(args)
        if a.dim() not in (1, 2):
            raise Refusal(f"args of shape {tuple(a.shape)}: clnode takes (B, k) or (k,)")
    ys, stats, tinfo = _call.call(f, y0, a, times, te, 3 if args is not None else 2, name, opts)
    st = {"n_steps": stats[:, 1], "n_accepted": stats[:, 2], "n_f_evals": stats[:, 4],
          "first_step": tinfo[:, 0]}
    return Solution(te2.to(y0.dtype), ys, st, _TABLE[stats[:, 0]])
