"""clnode.jax.diffeqsolve under jax.vmap over y0, t0, t1, dt0 and args against the real diffrax
(float64: exact step counts), as one batched clnode solve, bit-identical to solving each
trajectory alone; the vector-field forms recognised, and the refusals."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

import clnode  # noqa: E402
import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402

T0S = np.array([0.0, 0.5, -1.0, 0.3, 0.1])
T1S = np.array([6.0, 12.0, 4.0, 9.0, 20.0])
DT0S = np.array([0.02, 0.05, 0.01, 0.1, 0.03])
ARGS = np.array([[0.0, 0.0], [1.0, -0.5], [-2.0, 0.75], [0.3, 1.7], [-0.9, -1.1]])
Y0 = np.array([[0.0, 0.0, 0.0, 0.0], [0.5, -0.5, 0.25, 1.0], [-1.0, 0.3, 0.7, -0.2],
               [0.1, 0.2, 0.3, 0.4], [2.0, -1.0, 0.0, 0.5]])


class CondFunc(eqx.Module):
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.mlp(jnp.concatenate([y, args]))


def cond_mlp(time_input=False):
    mlp = eqx.nn.MLP(4 + 2 + int(time_input), 4, 16, 2, activation=jnp.tanh,
                     key=jax.random.PRNGKey(5), dtype=jnp.float64)
    return jax.tree_util.tree_map(lambda x: 3.0 * x if eqx.is_array(x) else x, mlp)


def vmapped(solve_fn, term, saveat, in_axes=(0, 0, 0, 0, 0), method=None, rtol=1e-6):
    solver = method or diffrax.Tsit5()
    ctrl = diffrax.PIDController(rtol=rtol, atol=1e-9)

    def one(y0, t0, t1, dt0, args):
        return solve_fn(term, solver, t0, t1, dt0, y0, args=args, saveat=saveat,
                        stepsize_controller=ctrl, max_steps=512)
    return jax.jit(jax.vmap(one, in_axes=in_axes))


def assert_matches_diffrax(got, ref, steps=False):
    """Exact step counts and results; saved values within the bounds of the C diffrax parity
    tests: at fixed times 1e-8, at accepted-step ends 1e-6 (where the error estimate is far below
    the tolerance, E is a difference of rounding-sized terms even in float64, so the step ends
    agree with diffrax's to ~1e-7)."""
    for key in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
        np.testing.assert_array_equal(np.asarray(got.stats[key]), np.asarray(ref.stats[key]))
    assert got.ts.shape == ref.ts.shape and got.ys.shape == ref.ys.shape
    assert got.ys.dtype == ref.ys.dtype
    fin = np.isfinite(np.asarray(ref.ts))
    np.testing.assert_array_equal(np.isfinite(np.asarray(got.ts)), fin)
    rtol = 1e-6 if steps else 1e-12
    np.testing.assert_allclose(np.asarray(got.ts)[fin], np.asarray(ref.ts)[fin], rtol=rtol)
    rtol = 1e-6 if steps else 1e-8
    np.testing.assert_allclose(np.asarray(got.ys)[fin], np.asarray(ref.ys)[fin], rtol=rtol,
                               atol=rtol * 1e-1)
    np.testing.assert_array_equal(np.asarray(got.result._value), np.asarray(ref.result._value))


TERMS = {
    "module": lambda mlp: CondFunc(mlp),
    "lambda": lambda mlp: (lambda t, y, args: mlp(jnp.concatenate([y, args]))),
}


@pytest.mark.parametrize("form", list(TERMS))
@pytest.mark.parametrize("save", ["t1", "ts", "steps"])
def test_vmap_over_spans_and_args_matches_diffrax(form, save):
    mlp = cond_mlp()
    term = diffrax.ODETerm(TERMS[form](mlp))
    saveat = {"t1": diffrax.SaveAt(t1=True),
              "ts": diffrax.SaveAt(t0=True, ts=jnp.array([0.5, 1.1, 2.0, 3.3, 4.0])),
              "steps": diffrax.SaveAt(steps=True)}[save]
    ops = (jnp.asarray(Y0), jnp.asarray(T0S), jnp.asarray(T1S), jnp.asarray(DT0S),
           jnp.asarray(ARGS))
    before = clnode.jax.tape_stats()
    got = jax.block_until_ready(vmapped(diffeqsolve, term, saveat)(*ops))
    after = clnode.jax.tape_stats()
    ref = vmapped(diffrax.diffeqsolve, term, saveat)(*ops)
    assert_matches_diffrax(got, ref, steps=save == "steps")
    # one batched clnode solve (the custom call's, jitted) with per-trajectory spans and args
    assert (after["solves"] - before["solves"], after["trajectories"] -
            before["trajectories"]) == (1, 5)


@pytest.mark.parametrize("in_axes", [(0, None, 0, None, None), (None, None, None, None, 0),
                                     (0, 0, 0, 0, None)], ids=["t1", "args", "spans"])
def test_vmap_over_some_arguments(in_axes):
    mlp = cond_mlp()
    term = diffrax.ODETerm(CondFunc(mlp))
    full = (jnp.asarray(Y0), jnp.asarray(T0S), jnp.asarray(T1S), jnp.asarray(DT0S),
            jnp.asarray(ARGS))
    unb = (jnp.asarray(Y0[1]), 0.5, 4.0, 0.05, jnp.asarray(ARGS[3]))
    ops = tuple(f if ax == 0 else u for f, u, ax in zip(full, unb, in_axes))
    saveat = diffrax.SaveAt(t1=True)
    got = vmapped(diffeqsolve, term, saveat, in_axes=in_axes, method=diffrax.Dopri5())(*ops)
    ref = vmapped(diffrax.diffeqsolve, term, saveat, in_axes=in_axes, method=diffrax.Dopri5())(*ops)
    assert_matches_diffrax(got, ref)


def test_time_and_args_input_backward_unbatched():
    """[y, t, args] (the MLP takes N + 1 + k), backwards in time, without vmap."""
    mlp = cond_mlp(time_input=True)
    term = diffrax.ODETerm(lambda t, y, args: mlp(jnp.concatenate([y, t[None], args])))
    kw = dict(args=jnp.asarray(ARGS[2]), saveat=diffrax.SaveAt(steps=True), max_steps=512,
              stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-9))
    got = diffeqsolve(term, diffrax.Dopri5(), 3.0, -1.0, -0.05, jnp.asarray(Y0[1]), **kw)
    ref = diffrax.diffeqsolve(term, diffrax.Dopri5(), 3.0, -1.0, -0.05, jnp.asarray(Y0[1]), **kw)
    assert_matches_diffrax(got, ref, steps=True)


def test_batched_solve_equals_solving_alone_bitwise():
    """The vmapped drop-in's trajectories are bit-identical to each solved by itself."""
    term = diffrax.ODETerm(CondFunc(cond_mlp()))
    ops = (jnp.asarray(Y0), jnp.asarray(T0S), jnp.asarray(T1S), jnp.asarray(DT0S),
           jnp.asarray(ARGS))
    saveat = diffrax.SaveAt(steps=True)
    got = vmapped(diffeqsolve, term, saveat)(*ops)
    ctrl = diffrax.PIDController(rtol=1e-6, atol=1e-9)
    for b in range(5):
        one = diffeqsolve(term, diffrax.Tsit5(), float(T0S[b]), float(T1S[b]), float(DT0S[b]),
                          ops[0][b], args=ops[4][b], saveat=saveat, stepsize_controller=ctrl,
                          max_steps=512)
        np.testing.assert_array_equal(np.asarray(got.ys[b]), np.asarray(one.ys))
        np.testing.assert_array_equal(np.asarray(got.ts[b]), np.asarray(one.ts))


@pytest.mark.parametrize("field, match", [
    (lambda mlp: lambda t, y, args: mlp(jnp.concatenate([args, y])),
     r"called on concatenate\(args, y\)"),
    (lambda mlp: lambda t, y, args: mlp(jnp.concatenate([y, 2.0 * args])),
     r"called on concatenate\(y, mul\(a constant, args\)\)"),
    (lambda mlp: lambda t, y, args: mlp(jnp.concatenate([y, args])) + args[0],
     r"adds a term .*a part of args"),
])
def test_other_uses_of_args_refused(field, match):
    mlp = cond_mlp()
    term = diffrax.ODETerm(field(mlp))
    with pytest.raises(ValueError, match=match):
        diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, jnp.asarray(Y0[1]),
                    args=jnp.asarray(ARGS[1]))
    # under vmap over args: refused the same way, when the call is traced
    with pytest.raises(ValueError, match=match):
        jax.vmap(lambda y, a: diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y, args=a).ys)(
            jnp.asarray(Y0), jnp.asarray(ARGS))


def test_jax_refusals():
    mlp = cond_mlp()
    term = diffrax.ODETerm(CondFunc(mlp))
    with pytest.raises(ValueError, match="takes 6 inputs"):  # args of the wrong size
        diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, jnp.asarray(Y0[1]),
                    args=jnp.zeros(3))
    # save times outside a trajectory's interval: diffrax refuses them too
    saveat = diffrax.SaveAt(ts=jnp.array([0.0, 5.0]))
    with pytest.raises(Exception, match="outside the interval of trajectory 2"):
        jax.vmap(lambda y, t1, a: diffeqsolve(term, diffrax.Tsit5(), 0.0, t1, 0.1, y, args=a,
                                              saveat=saveat).ys)(
            jnp.asarray(Y0[:3]), jnp.array([6.0, 5.5, 4.0]), jnp.asarray(ARGS[:3]))
    # mixed directions under vmap: the library's refusal, naming the trajectory
    with pytest.raises(Exception, match="direction of integration"):
        jax.vmap(lambda y, t1, a: diffeqsolve(
            term, diffrax.Tsit5(), 0.0, t1, None, y, args=a,
            stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6)).ys)(
            jnp.asarray(Y0[:2]), jnp.array([1.0, -1.0]), jnp.asarray(ARGS[:2]))
    # the model under vmap: not one model for the batch
    mlps = eqx.filter_vmap(lambda s: jax.tree_util.tree_map(
        lambda x: s * x if eqx.is_array(x) else x, mlp))(jnp.array([1.0, 2.0]))
    with pytest.raises(Exception, match="the model's parameters"):
        eqx.filter_vmap(lambda m, y, a: diffeqsolve(diffrax.ODETerm(CondFunc(m)), diffrax.Tsit5(),
                                                    0.0, 1.0, 0.1, y, args=a).ys)(
            mlps, jnp.asarray(Y0[:2]), jnp.asarray(ARGS[:2]))


def test_from_equinox_with_inputs():
    mlp = cond_mlp()
    m = clnode.from_equinox(CondFunc(mlp), inputs=2)
    assert m.num_inputs == 2 and not m.time_input and m.sizes == (6, 16, 16, 4)
    np.testing.assert_allclose(m(Y0[1], args=ARGS[1]),
                               np.asarray(mlp(jnp.concatenate([jnp.asarray(Y0[1]),
                                                               jnp.asarray(ARGS[1])]))),
                               rtol=1e-12)
    mt = clnode.from_equinox(cond_mlp(time_input=True), inputs=2)
    assert mt.time_input and mt.num_inputs == 2
    # a lambda reading the MLP from its closure is found too
    assert clnode.from_equinox(lambda t, y, args: mlp(jnp.concatenate([y, args])),
                               inputs=2) == m
