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
its values (clnode.jax._field): traced on every call with its network as one opaque call, its
trace is read, and the call is clnode's only when the part that depends on t, y or args is one
of these forms; the network's parameters and s, as the field makes them from its leaves, are
evaluated (and differentiated) by JAX. Anything else (terms added, the input changed, a factor
that depends on y, an unsupported activation, and the arguments clnode does not take) is handed
to diffrax.diffeqsolve with a FallbackWarning naming why, or with fallback="error" (or
CLNODE_JAX_FALLBACK=error) refused with an UnsupportedArgument; a call clnode takes is
never solved as something else. It works under jax.jit and jax.vmap over y0, t0, t1, dt0, args
and SaveAt(ts=...) (a vmapped call is one batched clnode solve with per-trajectory t0s/t1s/dt0s,
inputs and save times: under jax.jit one call of clnode's XLA custom call, written in C, with no
Python per call; eagerly one clnode.solve), on CPU arrays.

It is differentiable in reverse mode, as diffrax's default adjoint (RecursiveCheckpointAdjoint:
the gradient of the discretised solve, its step sizes taken as constants): jax.grad,
jax.value_and_grad, jax.vjp, jax.jacrev, eqx.filter_grad and eqx.filter_value_and_grad, under
jax.jit/eqx.filter_jit and jax.vmap (a vmapped loss's parameter gradient is summed over the batch
inside clnode; jax.vmap of a gradient gives per-example gradients), with respect to y0, args and
every inexact array of the vector field (the MLP's weights and biases, and whatever makes its
factor s). The backward takes the forward's tape (or re-solves the batch with it: the same
steps and bits) and runs the library's reverse pass (clnode.Solution.vjp) on the forward's
device, with the same bits on every device; RecursiveCheckpointAdjoint(checkpoints=k) keeps about
k states per trajectory (the same bits). It is differentiable in forward mode too, as diffrax
with adjoint=diffrax.ForwardMode() (which it also takes, with the same results as the default
adjoint, forward and reverse): jax.jvp, jax.jacfwd and jax.linearize, under jax.jit and
jax.vmap, by the library's tangent pass (clnode.Solution.jvp) on the forward's tape, the steps
held; jax.jacfwd's directions are one tangent pass (the tangent pass runs on the host where the
forward's device has none: the same bits). jax.linearize keeps the forward's outputs and its
tape's token: the first call of the linear function uses the tape, later calls re-solve the
forward (the same bits). The time arguments (t0, t1, dt0, SaveAt ts) get no derivative: one
asked for is refused with a TypeError naming it, as are second-order derivatives (jax.hessian,
jax.jacfwd of jax.grad, ...).

Needs jax, equinox and diffrax (0.7.2 is what clnode follows step for step).

The package, one concern per file: _problem (diffrax's arguments mapped into a call's frozen
Problem and its named Operands; solve_settings), _field (the vector field recognised from its
computation), _fallback (what becomes of a call clnode does not take), _primitives (the JAX
primitives: the forward, its linearisation, evaluated in forward mode, and its transpose), _ffi
(their lowering under
jax.jit to clnode's XLA custom calls, the C tape registry's tape_stats and set_tape_limit),
_callback (a batch of operands solved by the library eagerly, and under jax.jit for a call
with a progress meter), _tapes (the eager forward's tapes kept for
their reverse pass, by token); this file, diffeqsolve itself.
"""
from typing import Any, Optional

import diffrax
import jax

from .. import _solve
from . import _fallback, _field, _primitives, _problem
from ._fallback import FallbackWarning, UnsupportedArgument
from ._ffi import set_tape_limit, tape_stats
from ._problem import solve_settings

__all__ = ["diffeqsolve", "solve_settings", "FallbackWarning", "UnsupportedArgument",
           "tape_stats", "set_tape_limit"]


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
    factormax, safety; its numbers may be traced scalars: under jax.jit a new value runs without
    recompiling) or ConstantStepSize(). saveat: SaveAt(t0=, t1=, ts=, steps=True).
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
    another form, an adjoint other than RecursiveCheckpointAdjoint or ForwardMode, an event,
    SubSaveAt fn,
    other solvers, controllers or terms, a pytree state) is diffrax.diffeqsolve's, with a
    FallbackWarning naming why; fallback="error" (default: $CLNODE_JAX_FALLBACK, else "warn")
    raises UnsupportedArgument (a ValueError) instead. Raises ValueError when save times are
    out of order or lie outside their trajectory's interval (as diffrax) and for vmapping over
    the model, TypeError for an argument
    of the wrong kind (a bool that is not bool, a float max_steps), the library's exception when
    it refuses the problem, and a TypeError for a gradient with respect to t0, t1, dt0 or
    SaveAt(ts=...) and for a second-order derivative (jax.hessian, ...): clnode computes
    first-order derivatives, reverse mode and forward mode, with respect to y0, args and the
    vector field's arrays (the module's documentation). adjoint: RecursiveCheckpointAdjoint()
    (every state kept), RecursiveCheckpointAdjoint(checkpoints=k) (about k kept; the same
    gradient bits) or ForwardMode() (diffrax's forward mode: the same derivatives, every state
    kept).
    Checks on concrete values run before the solve; under jax.jit, those on traced
    times run in JAX through one eqx.branched_error_if (where several fail, the first of dt0's
    sign, save times inside [t0, t1] and monotone save times is named), and the rest inside
    clnode's custom call, whose
    failure is XLA's runtime error (jax.errors.JaxRuntimeError) with the library's message
    first, then the exception clnode.solve would raise."""
    how = _fallback.mode(fallback)
    try:
        taken = _problem.take(terms, solver, t0, t1, dt0, y0, args, saveat,
                              stepsize_controller, adjoint, event, max_steps, throw,
                              progress_meter, solver_state, controller_state, made_jump, device,
                              options)
    except _field.Refusal as why:  # UnsupportedArgument among them
        return _fallback.hand_over(why, how, lambda: diffrax.diffeqsolve(
            terms, solver, t0, t1, dt0, y0, args, saveat=saveat,
            stepsize_controller=stepsize_controller, adjoint=adjoint, event=event,
            max_steps=max_steps, throw=throw, progress_meter=progress_meter,
            solver_state=solver_state, controller_state=controller_state,
            made_jump=made_jump), stacklevel=2)
    problem, operands = _problem.frozen(taken, t0, t1, dt0, throw, device)
    out = _primitives.solve(problem, operands)
    if not problem.jitting:
        jax.block_until_ready(out)
        if problem.failures:  # the library's (or this package's) exception itself
            raise problem.failures[0]
    return _solution(problem, operands, out)


diffeqsolve.__doc__ = (diffeqsolve.__doc__ or "").replace("{keywords}\n", "".join(
    f"    {n}: {_solve.OPTIONS[n]['doc']}.\n" for n in _problem.KEYWORDS))


def _solution(problem: _problem.Problem, operands: _problem.Operands,
              out: _primitives.Outputs) -> diffrax.Solution:
    """The diffrax.Solution of the forward's outputs (ts, ys, step counts, result codes); with
    throw, diffrax's own error_if on a failed trajectory."""
    nsteps, nacc, nrej, code = (out.counts[..., i] for i in range(4))
    R = diffrax.RESULTS
    result = R.where(code == 1, R.max_steps_reached, R.successful)
    result = R.where(code == 2, R.dt_min_reached, result)
    stats = {"num_steps": nsteps, "num_accepted_steps": nacc, "num_rejected_steps": nrej,
             "max_steps": problem.max_steps}
    sol = diffrax.Solution(t0=operands.t0, t1=operands.t1, ts=out.ts, ys=out.ys,
                           interpolation=None, stats=stats, result=result, solver_state=None,
                           controller_state=None, made_jump=None, event_mask=None)
    if problem.throw:
        sol = result.error_if(sol, code != 0)
    return sol
