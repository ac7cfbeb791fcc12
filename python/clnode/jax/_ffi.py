"""clnode.jax's custom calls: the forward solve, the reverse pass and the tangent pass (forward
mode) as XLA FFI handlers in C (python/clnode/_clnode_xla.c, _clnode_xla_jvp.c), which a jitted
program calls with no Python: registered with XLA for the CPU at import (and for CUDA where a
CUDA plugin is installed), and the lowerings of the primitives fwd_p, vjp_p and lin_p (_primitives)
that name them. A call's structure is a plan, made once per Problem at trace time (its handle an
int64 attribute; plans live for the process); its numbers are operands. Its forward, solved for
a gradient, leaves its tape in the C registry (bounded in bytes: tape_stats, set_tape_limit,
$CLNODE_JAX_TAPE_BYTES) under the token it returns.

Supported: jaxlib >= MIN_JAXLIB (the FFI API 0.1 and its metadata query, which the handlers
answer with the lowest version they need); an older jaxlib is refused at import, naming both
versions."""
import importlib
import importlib.util
import pkgutil
from typing import Any, Dict, Tuple

import numpy as np

import jax
from jax.interpreters import mlir

from .. import _clnode, _model, _solve
from ._problem import Operands, Problem

# the oldest jaxlib with the public jax.ffi module (register_ffi_target, ffi_lowering,
# include_dir) and the FFI API 0.1 with its metadata query (tests/python/test_jax_ffi*.py pass
# with 0.5.0 and 0.10.2)
MIN_JAXLIB = (0, 5, 0)
FWD_TARGET = "clnode_solve_fwd"
VJP_TARGET = "clnode_solve_vjp"
JVP_TARGET = "clnode_solve_jvp"
_NAME_BITS = {name: 1 << i for i, name in enumerate(Operands._fields)}


def _version(text: str) -> Tuple[int, ...]:
    out = []
    for part in text.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit()) or "0"
        out.append(int(digits))
    return tuple(out)


def check_jaxlib(version: str) -> None:
    """Refuses a jaxlib older than MIN_JAXLIB, naming both versions."""
    if _version(version) < MIN_JAXLIB:
        raise ImportError(
            f"clnode.jax needs jaxlib >= {'.'.join(map(str, MIN_JAXLIB))} (its XLA FFI API "
            f"0.1, which clnode's custom calls use, and the jax.ffi module); this jaxlib is "
            f"{version}: pip install -U 'jax[cpu]>=0.5.0'")


import jaxlib  # noqa: E402

check_jaxlib(getattr(jaxlib, "__version__", "0"))
_XLA: Dict[str, Any] = _clnode._xla()
jax.ffi.register_ffi_target(FWD_TARGET, _XLA["fwd"], platform="cpu")
jax.ffi.register_ffi_target(VJP_TARGET, _XLA["vjp"], platform="cpu")
jax.ffi.register_ffi_target(JVP_TARGET, _XLA["jvp"], platform="cpu")


def _cuda_plugin() -> bool:
    """Whether a CUDA jaxlib plugin is installed (a jax_plugins module named for CUDA, as
    jax-cuda12-plugin's xla_cuda12), found without starting any backend."""
    if importlib.util.find_spec("jax_plugins") is None:
        return False
    plugins = importlib.import_module("jax_plugins")
    return any("cuda" in m.name for m in pkgutil.iter_modules(getattr(plugins, "__path__", [])))


# On XLA's CUDA platform the same handlers run on host copies of the device buffers, staged on
# XLA's stream (python/clnode/_clnode_xla_cuda.c), except a forward without a tape on a CUDA
# device=, which runs on XLA's buffers (_clnode_xla_cuda_fwd.c); registered only where a CUDA
# plugin is.
CUDA = _cuda_plugin()
if CUDA:
    _XLA_CUDA: Dict[str, Any] = _clnode._xla_cuda()
    jax.ffi.register_ffi_target(FWD_TARGET, _XLA_CUDA["fwd"], platform="CUDA")
    jax.ffi.register_ffi_target(VJP_TARGET, _XLA_CUDA["vjp"], platform="CUDA")
    jax.ffi.register_ffi_target(JVP_TARGET, _XLA_CUDA["jvp"], platform="CUDA")
DEFAULT_TAPE_BYTES = 256 << 20


def tape_stats() -> Dict[str, int]:
    """The counts of clnode's custom calls (jitted solves) since the process started: solves
    (forward calls) and their trajectories, reverses (reverse passes) and tangents (tangent
    passes of forward mode, with tangent_dirs and tangent_trajectories: the sums of their
    directions, ndir, and of their trajectories), the library's time in them (solve_ns: every solve, the re-solves
    of reverse and tangent passes included; reverse_ns; tangent_ns), the handlers' whole time
    (fwd_ns: the forward handler's, over its solves calls; vjp_ns: the reverse handler's, over
    its vjps calls; jvp_ns: the tangent handler's, over its jvps calls; the library's time in
    them included), and the tape registry: hits and misses of the reverse and tangent passes
    (a miss re-solves the forward: the same bits), tapes kept and dropped (oldest first beyond the bound, or larger than it), the tapes
    and bytes held now, and the bound (limit, bytes)."""
    return dict(_XLA["tape_stats"]())


def set_tape_limit(nbytes: int) -> int:
    """Bounds the bytes the tape registry of jitted solves holds (default 256 MiB, or
    $CLNODE_JAX_TAPE_BYTES read at the first solve); tapes beyond it are dropped oldest first
    (their reverse pass re-solves). Returns the previous bound."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
        raise ValueError(f"the tape bound must be a non-negative number of bytes, not {nbytes!r}")
    return int(_XLA["set_tape_limit"](int(nbytes)))


def plan(problem: Problem) -> int:
    """The handle of the problem's plan (made on the first lowering that names it)."""
    h = problem.models.get(_plan_key)
    if h is None:
        o = dict(problem.opts)
        device = o.pop("device", None)
        o.pop("saveat", None)
        opts = _solve._table_options({k: v for k, v in o.items() if v is not None})
        opts.update(save_t0=problem.save_t0, save_t1=problem.save_t1,
                    save_steps=problem.save_steps)
        sizes = tuple([int(problem.layer_shapes[0][0][1])] +
                      [int(w[0]) for w, _ in problem.layer_shapes])
        biases = tuple(b is not None for _, b in problem.layer_shapes)
        device = _solve._default_device() if _solve._device_arg(device) is None else device
        h = _XLA["plan"](_texts(opts), device, sizes, biases, problem.activation,
                         problem.final_activation, problem.time_input, problem.k,
                         problem.n_ts, problem.T, problem.y_dtype == np.float64,
                         problem.time_dtype == np.float64, problem.has_ts,
                         problem.scale_traced or problem.scale is not None,
                         problem.scale_traced, problem.throw, problem.checkpoint_every,
                         problem.ctrl_names)
        problem.models[_plan_key] = h
    return int(h)


_plan_key = ("clnode.jax._ffi", "plan")


def _texts(opts: Dict[str, Any]) -> Tuple[Tuple[str, str], ...]:
    """The table's options (_solve._table_options's values) as the library parses them, each
    the same double: a choice's name, 1/0 for a boolean, a number's repr (exact)."""
    return tuple((k, v if isinstance(v, str) else ("1" if v else "0") if isinstance(v, bool)
                  else repr(float(v))) for k, v in opts.items())


def takes(problem: Problem) -> bool:
    """Whether the custom calls solve the problem: all but those with a progress meter (which
    runs Python while the library works: those keep the callback)."""
    return problem.progress_meter is None


def _constants(ctx: Any, operands: Tuple[Any, ...], first: int,
               problem: Problem) -> Tuple[Any, Any]:
    """The operands with the concrete factor and parameters (frozen into the problem) as
    float64 constants in place of their empty operands: the handlers read every number from an
    operand."""
    args = list(operands)
    avals = list(ctx.avals_in)
    iscale, iparams = first + NAMES.index("scale"), first + NAMES.index("params")
    if problem.scale is not None and not problem.scale_traced:
        s = np.ascontiguousarray(np.broadcast_to(np.asarray(problem.scale, np.float64),
                                                 (problem.n,)))
        args[iscale] = mlir.ir_constant(s)
        avals[iscale] = jax.core.ShapedArray(s.shape, np.float64)
    if problem.mlp is not None:
        m = problem.mlp
        flat = np.concatenate([np.ravel(np.asarray(a, np.float64)) for a in _flat(m)])
        args[iparams] = mlir.ir_constant(flat)
        avals[iparams] = jax.core.ShapedArray(flat.shape, np.float64)
    return ctx.replace(avals_in=avals), args


def _flat(m: Any) -> Any:
    return _model.flat_params(list(zip(m.weights, m.biases)))


NAMES = Operands._fields
_fwd_rule = jax.ffi.ffi_lowering(FWD_TARGET)
_vjp_rule = jax.ffi.ffi_lowering(VJP_TARGET)
_jvp_rule = jax.ffi.ffi_lowering(JVP_TARGET)


def fwd_lowering(ctx: Any, *args: Any, problem: Problem, keep: bool, lead: Any) -> Any:
    """fwd_p's lowering on the CPU: one call of the forward handler."""
    ctx, args = _constants(ctx, args, 0, problem)
    return _fwd_rule(ctx, *args, plan=np.int64(plan(problem)), keep=np.int64(bool(keep)))


def vjp_lowering(ctx: Any, ct: Any, token: Any, *args: Any, problem: Problem, want: Any,
                 lead: Any, keep: Any) -> Any:
    """vjp_p's lowering on the CPU: one call of the reverse handler."""
    ctx, all_args = _constants(ctx, (ct, token) + args, 2, problem)
    bits = sum(_NAME_BITS[name] for name in want)
    kept = sum(1 << a for a, k in enumerate(keep) if k)
    return _vjp_rule(ctx, *all_args, plan=np.int64(plan(problem)), want=np.int64(bits),
                     keep=np.int64(kept))


def jvp_lowering(ctx: Any, *args: Any, problem: Problem, want: Any, lead: Any,
                 dirs: Any) -> Any:
    """lin_p's lowering on the CPU (forward mode): one call of the tangent handler for every
    direction (dirs: the direction axes, in front of the batch's)."""
    nw = len(want)
    ctx, all_args = _constants(ctx, args, nw + 1, problem)
    bits = sum(_NAME_BITS[name] for name in want)
    return _jvp_rule(ctx, *all_args, plan=np.int64(plan(problem)), want=np.int64(bits),
                     keep=np.int64(0), dirs=np.int64(len(dirs)))
