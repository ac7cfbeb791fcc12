"""Every argument of the package is taken as what it says or refused by name: booleans that are
not bool, numbers that are strings or not integers, arrays with more dimensions than the
argument takes, None or "" for a named choice. clnode.jax follows diffrax's dtype promotion and
raises its errors in Python (or through eqx.error_if under jit), not as XLA's callback error.
Each test here guards a coercion the package once made silently."""
import re

import numpy as np
import pytest

import clnode

RNG = np.random.default_rng(7)
W0, B0 = 0.5 * RNG.standard_normal((8, 3)), 0.1 * RNG.standard_normal(8)
W1, B1 = 0.5 * RNG.standard_normal((3, 8)), 0.1 * RNG.standard_normal(3)
MODEL = clnode.MLP([W0, W1], [B0, B1], activation="tanh")
Y0 = np.array([0.3, -0.2, 0.1])


def solve(**kw):
    base = dict(t0=0.0, t1=1.0, dt0=0.1)
    base.update(kw)
    return clnode.solve(MODEL, Y0, **base)


def same(a, b):
    assert a.ts.dtype == b.ts.dtype and a.ys.dtype == b.ys.dtype
    np.testing.assert_array_equal(a.ts, b.ts)
    np.testing.assert_array_equal(a.ys, b.ys)
    assert a.stats == b.stats and a.result == b.result


# ------------------------------------------------------------------------------------------------
# arrays with more dimensions than the argument takes: refused, never flattened


def test_saveat_ts_of_other_ndim_is_refused_not_flattened():
    # (T,) shared by the batch and (B, T) per trajectory (tests/python/test_save_rows.py)
    assert clnode.SaveAt(ts=[[0.1, 0.2], [0.3, 0.4]]).ts.shape == (2, 2)
    with pytest.raises(ValueError, match=r"SaveAt\(ts=\.\.\.\) must be an array of shape \(T,\)"
                                         r".*or \(B, T\).*not of shape \(1, 1, 1\)"):
        clnode.SaveAt(ts=[[[0.5]]])
    with pytest.raises(ValueError, match=r"SaveAt\(ts=\.\.\.\) must be an array of shape"):
        clnode.SaveAt(ts=0.5)  # not a list of one time (nor "0.5 points")


def test_mlp_layer_arrays_of_the_wrong_ndim_are_refused_by_name():
    with pytest.raises(ValueError, match=r"weights\[1\] must be a 2-d array"):
        clnode.MLP([W0, W1[None]], [B0, B1])
    with pytest.raises(ValueError, match=r"biases\[0\] must be a 1-d array"):
        clnode.MLP([W0, W1], [B0[None], B1])
    with pytest.raises(TypeError, match=r"weights\[0\] must be real numbers"):
        clnode.MLP([W0.astype(bool), W1])
    with pytest.raises(TypeError, match=r"weights\[0\] must be real numbers"):
        clnode.MLP([W0.astype(str), W1])


def test_mlp_layer_sequences():
    assert clnode.MLP(iter([W0, W1]), (B0, B1), activation="tanh") == MODEL
    with pytest.raises(TypeError, match="weights must be a list of arrays"):
        clnode.MLP(np.stack([W1 @ W0, W1 @ W0]))  # one array of two (3, 3) layers
    with pytest.raises(TypeError, match="path must be a file path"):
        clnode.MLP.load(None)


def test_model_call_arrays_checked_and_t_refused_without_time_input():
    with pytest.raises(ValueError, match="time_input=False.*t must be None"):
        MODEL(Y0, t=1.0)
    with pytest.raises(ValueError, match=r"y must have shape"):
        MODEL(Y0[None, None])
    with pytest.raises(TypeError, match="y must be real numbers"):
        MODEL(["0.3", "-0.2", "0.1"])
    timed = clnode.MLP([np.hstack([W0, np.ones((8, 1))]), W1], time_input=True)
    with pytest.raises(ValueError, match=r"t must be a scalar or one time per point"):
        timed(np.zeros((2, 3)), t=np.zeros((2, 1)))
    np.testing.assert_array_equal(timed(np.zeros((2, 3)), t=0.5), timed(np.zeros((2, 3)),
                                                                        t=np.array([0.5, 0.5])))


# ------------------------------------------------------------------------------------------------
# booleans must be bool (or numpy.bool_)


@pytest.mark.parametrize("key", ["constant_step", "force_dtmin", "certify"])
@pytest.mark.parametrize("value", ["False", "no", 0, 1, 1.0, None])
def test_solve_boolean_keywords_refuse_non_bools(key, value):
    with pytest.raises(TypeError, match=f"{key} must be a bool"):
        solve(**{key: value})


@pytest.mark.parametrize("key", ["t0", "t1", "steps"])
def test_saveat_booleans_refuse_strings(key):
    with pytest.raises(TypeError, match=f"SaveAt {key} must be a bool"):
        clnode.SaveAt(**{key: "False"}, ts=[0.5])


def test_mlp_time_input_refuses_strings():
    with pytest.raises(TypeError, match="time_input must be a bool"):
        clnode.MLP([W0, W1], time_input="false")


def test_numpy_bools_are_bools():
    same(solve(constant_step=np.bool_(True), saveat=clnode.SaveAt(t0=np.bool_(True),
                                                                  t1=np.True_)),
         solve(constant_step=True, saveat=clnode.SaveAt(t0=True, t1=True)))


def test_model_file_dtype_none_is_refused():
    with pytest.raises(ValueError, match="dtype must be float64 or float32"):
        MODEL.to_bytes(dtype=None)
    assert MODEL.to_bytes(np.float32) == MODEL.to_bytes("float32")


# ------------------------------------------------------------------------------------------------
# numbers: integers where integers are meant, never strings; named choices never None or ""


def test_precision_none_is_refused():
    with pytest.raises(ValueError, match="precision must be 'fp32' or 'fp64'"):
        solve(precision=None)
    same(solve(precision=np.float64), solve(precision="fp64"))


def test_empty_device_is_refused():
    with pytest.raises(ValueError, match="device must be a device string"):
        solve(device="")
    with pytest.raises(ValueError, match="device must be a device string"):
        clnode.Context("")
    with pytest.raises(TypeError, match="device must be a device string"):
        solve(device=0)


@pytest.mark.parametrize("value", [2.9, 3.0, True, "3", None, np.float64(3.0)])
def test_max_steps_must_be_an_integer(value):
    with pytest.raises(TypeError, match="max_steps must be an integer"):
        solve(max_steps=value)


@pytest.mark.parametrize("value", [0, -1, 2 ** 31, 2 ** 70, np.int64(2 ** 62)])
def test_max_steps_outside_its_range_is_refused_by_name(value):
    # beyond a C long the extension's argument parser raised an unnamed OverflowError
    with pytest.raises(ValueError, match=r"max_steps must be an integer in \[1, 2147483647\]"):
        solve(max_steps=value)


def test_numpy_integers_are_integers():
    same(solve(max_steps=np.int64(3)), solve(max_steps=3))
    same(solve(certify=True, certify_seed=np.uint64(5)), solve(certify=True, certify_seed=5))


@pytest.mark.parametrize("value", [-1, 2 ** 64, 1.0, "1", True])
def test_certify_seed_must_be_a_non_negative_integer(value):
    with pytest.raises((TypeError, ValueError), match="certify_seed must be an integer"):
        solve(certify=True, certify_seed=value)


@pytest.mark.parametrize("key", ["rtol", "atol", "pcoeff", "icoeff", "dcoeff", "dtmin", "dtmax",
                                 "factormin", "factormax", "safety", "certify_fraction", "t0",
                                 "t1", "dt0"])
def test_numeric_keywords_refuse_strings_and_bools(key):
    for value in ("0.5", True, [0.5]):
        with pytest.raises((TypeError, ValueError), match=key):
            solve(**{key: value})


def test_numeric_keywords_take_numpy_scalars_exactly():
    same(solve(rtol=np.float32(1e-3), atol=np.array(1e-6), factormax=np.int64(10)),
         solve(rtol=float(np.float32(1e-3)), atol=1e-6, factormax=10.0))


def test_context_must_be_a_context():
    with pytest.raises(TypeError, match="context must be a clnode.Context"):
        solve(context="host")


# ------------------------------------------------------------------------------------------------
# clnode.jax: diffrax's dtype rules; arguments refused by name; errors raised as the library's


jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

from clnode.jax import diffeqsolve  # noqa: E402


class Func(eqx.Module):
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.mlp(y)


def jax_func(dtype=jnp.float32):
    return Func(eqx.nn.MLP(3, 3, 8, 1, activation=jnp.tanh, key=jax.random.PRNGKey(1),
                           dtype=dtype))


def jsolve(t1=1.0, y0=None, saveat=diffrax.SaveAt(t1=True), dt0=0.1, **kw):
    y0 = jnp.asarray(Y0, jnp.float32) if y0 is None else y0
    return diffeqsolve(diffrax.ODETerm(jax_func()), diffrax.Tsit5(), 0.0, t1, dt0, y0,
                       saveat=saveat, **kw)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("times", ["python", "int", "float32"])
def test_jax_promotes_dtypes_as_diffrax(x64, times):
    """y0 float32 with Python-float times under x64: diffrax promotes y0 to float64 (and solves
    in float64); clnode.jax returns the same dtypes and the same steps."""
    t0, t1, dt0 = {"python": (0.0, 4.0, 0.5), "int": (0, 4, None),
                   "float32": (np.float32(0), np.float32(4), np.float32(0.5))}[times]
    ctrl = diffrax.PIDController(rtol=1e-3, atol=1e-6)
    with jax.enable_x64(x64):
        func = jax_func()
        y0 = jnp.asarray(Y0, jnp.float32)
        kw = dict(y0=y0, stepsize_controller=ctrl, saveat=diffrax.SaveAt(t0=True, steps=True),
                  max_steps=32)
        ref = diffrax.diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), t0, t1, dt0, **kw)
        got = diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), t0, t1, dt0, **kw)
    assert (got.ts.dtype, got.ys.dtype) == (ref.ts.dtype, ref.ys.dtype)
    assert got.ys.dtype == (jnp.float64 if x64 and times != "float32" else jnp.float32)
    for k in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
        assert int(got.stats[k]) == int(ref.stats[k]), k


def test_jax_saveat_ts_2d_is_refused():
    # as diffrax refuses it: per-trajectory save times come through jax.vmap
    with pytest.raises(ValueError, match=r"1-d array of times, not of shape \(2, 2\).*jax.vmap"):
        jsolve(saveat=diffrax.SaveAt(ts=jnp.array([[0.5, 0.6], [0.5, 0.6]])))


@pytest.mark.parametrize("name", ["t0", "t1", "dt0"])
def test_jax_times_must_be_scalars(name):
    kw = dict(t0=0.0, t1=1.0, dt0=0.1)
    kw[name] = jnp.array([kw[name]])
    with pytest.raises(ValueError, match=f"{name} must be a scalar"):
        diffeqsolve(diffrax.ODETerm(jax_func()), diffrax.Tsit5(), y0=jnp.asarray(Y0), **kw)


def test_jax_booleans_and_integers():
    with pytest.raises(TypeError, match=r"SaveAt\(t0=...\) must be a bool"):
        jsolve(saveat=diffrax.SaveAt(t0="False", t1=True))
    with pytest.raises(TypeError, match="throw must be a bool"):
        jsolve(throw="no")
    with pytest.raises(TypeError, match=r"force_dtmin=...\) must be a bool"):
        jsolve(stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6,
                                                         force_dtmin="False"))
    with pytest.raises(TypeError, match="max_steps must be an integer"):
        jsolve(max_steps=2.9)
    with pytest.raises(TypeError, match="rtol"):
        jsolve(stepsize_controller=diffrax.PIDController(rtol="1e-3", atol=1e-6))
    with pytest.raises(ValueError, match="device must be a device string"):
        jsolve(device="")


def test_from_equinox_time_input_refuses_strings():
    with pytest.raises(TypeError, match="time_input must be a bool"):
        clnode.from_equinox(jax_func(), time_input="false")
    assert clnode.from_equinox(jax_func(), time_input=np.False_) == clnode.from_equinox(
        jax_func())


def test_jax_pytree_y0_is_refused_clearly():
    y = jnp.asarray(Y0, jnp.float32)
    for tree in ((y, y), {"y": y}, [0.3, -0.2, 0.1]):
        with pytest.raises(ValueError, match="one array, not a pytree"):
            jsolve(y0=tree)


OUTSIDE = diffrax.SaveAt(ts=jnp.array([0.5, 2.0]))


def test_jax_save_ts_outside_raised_before_the_callback(monkeypatch):
    calls = []
    real = jax.pure_callback
    monkeypatch.setattr(jax, "pure_callback", lambda *a, **k: calls.append(1) or real(*a, **k))
    with pytest.raises(ValueError, match="outside the interval") as e:
        jsolve(saveat=OUTSIDE)
    assert not isinstance(e.value, jax.errors.JaxRuntimeError) and calls == []


def test_jax_callback_errors_are_the_librarys_own():
    # eager, vmapped over t1: checked in the callback (per trajectory), raised as itself
    with pytest.raises(ValueError, match="outside the interval of trajectory 0") as e:
        jax.vmap(lambda t1: jsolve(t1=t1, saveat=OUTSIDE))(jnp.array([1.0, 3.0]))
    assert not isinstance(e.value, jax.errors.JaxRuntimeError)
    with pytest.raises(clnode.InvalidArgumentError, match="dt0 = -0.1 has the wrong sign"):
        jsolve(dt0=-0.1)


def test_jax_traced_checks_under_jit_come_first():
    """Under jit (traced t1, dt0), the checks JAX can make run before the callback through
    eqx.error_if: under equinox.filter_jit the message is the error, not XLA's CpuCallback
    error; under jax.jit it is inside JAX's runtime error (as diffrax's own)."""
    for fn, arg in ((lambda t1: jsolve(t1=t1, saveat=OUTSIDE), 1.0),
                    (lambda d: jsolve(dt0=d), -0.1)):
        with pytest.raises(Exception) as e:
            jax.block_until_ready(eqx.filter_jit(fn)(jnp.asarray(arg)))
        msg = str(e.value)
        assert "outside the interval" in msg or "wrong sign" in msg
        assert "CpuCallback" not in msg
        with pytest.raises(jax.errors.JaxRuntimeError, match="outside the interval|wrong sign"):
            jax.block_until_ready(jax.jit(fn)(jnp.asarray(arg)))


def test_jax_traced_checks_are_one_conditional():
    """Under jit, the three checks of traced times (dt0's sign, save times inside [t0, t1],
    save times monotone) are one conditional of the program, not one each: each costs tracing
    and compile time and a step of the compiled program before the solve."""
    def fn(t1, dt0, ts):
        return jsolve(t1=t1, dt0=dt0, saveat=diffrax.SaveAt(ts=ts)).ys

    def conditionals(f, *args):
        return len(re.findall(r"stablehlo\.(?:case|if)\b", jax.jit(f).lower(*args).as_text()))

    # with concrete times and no save times: the solution's own check alone
    alone = conditionals(lambda y0: jsolve(y0=y0).ys, jnp.asarray(Y0, jnp.float32))
    assert conditionals(fn, 1.0, 0.1, jnp.array([0.2, 0.5])) == alone + 1


def test_jax_traced_save_time_checks_are_one_reduction():
    """Under jit, the two checks of traced save times (inside [t0, t1], monotone) are one
    element-wise code and one reduction of the program, not a reduction each: each reduction
    is a few steps of the compiled program before the solve, on every training step."""
    def fn(t1, dt0, ts):
        return jsolve(t1=t1, dt0=dt0, saveat=diffrax.SaveAt(ts=ts)).ys

    def reductions(f, *args):
        return len(re.findall(r"stablehlo\.reduce\b", jax.jit(f).lower(*args).as_text()))

    # the same traced t1 and dt0 (dt0's sign checked) without save times: one reduction more
    without = reductions(lambda t1, dt0: jsolve(t1=t1, dt0=dt0).ys, 1.0, 0.1)
    assert reductions(fn, 1.0, 0.1, jnp.array([0.2, 0.5])) == without + 1


def test_jax_traced_checks_name_the_first_failing():
    """Under jit and vmap, where trajectories fail different checks the first check in order
    (dt0's sign, then the interval, then monotone) is named, as before they were one."""
    def fn(t1, dt0, ts):
        return jsolve(t1=t1, dt0=dt0, saveat=diffrax.SaveAt(ts=ts)).ys

    run = eqx.filter_jit(jax.vmap(fn))
    t1 = jnp.array([1.0, 1.0, 1.0])
    good = jnp.array([0.2, 0.5])
    cases = (([0.1, 0.1, -0.1], [good, [0.5, 2.0], [0.5, 0.2]], "wrong sign"),
             ([0.1, 0.1, 0.1], [good, [0.5, 0.2], [0.5, 2.0]], "outside the interval"),
             ([0.1, 0.1, 0.1], [good, [0.5, 0.2], good], "not monotone"))
    for dt0, ts, what in cases:
        with pytest.raises(eqx.EquinoxRuntimeError, match=what):
            jax.block_until_ready(run(t1, jnp.array(dt0), jnp.array(ts)))
    assert np.all(np.isfinite(run(t1, jnp.array([0.1] * 3), jnp.array([good] * 3))))


def test_jax_library_errors_under_filter_jit_are_the_message():
    """A refusal only the callback can make (one solve, two directions of integration, under
    jit and vmap): under equinox.filter_jit its message is the error (EquinoxRuntimeError), not
    XLA's `INTERNAL: CpuCallback error`; under jax.jit it is inside XLA's error."""
    def solve(t1):
        return jsolve(t1=t1, dt0=None,
                      stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6))
    t1s = jnp.array([1.0, -1.0])
    with pytest.raises(Exception, match="one direction of integration") as e:
        jax.block_until_ready(eqx.filter_jit(jax.vmap(solve))(t1s))
    assert "CpuCallback" not in str(e.value) and "InvalidArgumentError" in str(e.value)
    with pytest.raises(jax.errors.JaxRuntimeError, match="one direction of integration"):
        jax.block_until_ready(jax.jit(jax.vmap(solve))(t1s))
    with pytest.raises(clnode.InvalidArgumentError, match="one direction of integration"):
        jax.vmap(solve)(t1s)  # eager: the library's exception itself


def test_jax_x64_context_reaches_the_check():
    """`with jax.enable_x64(True)` while the global flag is off (the check of the vector field
    runs in a fresh thread, where the context does not hold unless carried there)."""
    jax.config.update("jax_enable_x64", False)
    try:
        with jax.enable_x64(True):
            func = jax_func(jnp.float64)
            kw = dict(stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9))
            y0 = jnp.asarray(Y0, jnp.float64)
            got = diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 1.0, 0.1, y0, **kw)
            ref = diffrax.diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 1.0, 0.1, y0,
                                      **kw)
    finally:
        jax.config.update("jax_enable_x64", True)
    assert got.ys.dtype == ref.ys.dtype == jnp.float64
    assert int(got.stats["num_steps"]) == int(ref.stats["num_steps"])


def test_context_supports_takes_precision_names():
    ctx = clnode.Context("host")
    assert ctx.supports("fp64") is True and ctx.supports(64) is True
    with pytest.raises(ValueError, match="precision must be"):
        ctx.supports(True)


def test_saveat_is_immutable():
    """A field set after construction would bypass its check (SaveAt.t0 = "False")."""
    sa = clnode.SaveAt(t1=True, ts=np.array([0.5]))
    with pytest.raises(AttributeError, match="immutable"):
        sa.t0 = "False"
    with pytest.raises(ValueError, match="read-only"):
        sa.ts[0] = 2.0
    import copy
    import pickle
    for other in (copy.deepcopy(sa), pickle.loads(pickle.dumps(sa))):
        same(solve(saveat=other), solve(saveat=sa))


# The library refuses values that collapse or overflow in the working precision; through the
# package its message names the argument (on the old code each of these solved: 0 steps, or a
# non-finite result at t0, or 4096 zero-length steps).
@pytest.mark.parametrize("kw, named", [
    (dict(t0=1.7e9, t1=1700000060.0, dt0=0.02), "t1 = 1700000060 differ, but in fp32"),
    (dict(t1=1e308), "t1 = 1e+308 is beyond the fp32 range"),
    (dict(dt0=1e-50), "dt0 = 1e-50 rounds to 0 in fp32"),
    (dict(t0=1e6, t1=1e6 + 1.0, dt0=1e-3), "does not move t0"),
])
def test_values_that_change_in_fp32_are_refused_by_name(kw, named):
    with pytest.raises(clnode.InvalidArgumentError, match=re.escape(named)):
        solve(precision="fp32", **kw)
    if "t1" not in kw or kw["t1"] < 1e300:
        solve(precision="fp64", **kw)  # the same problem is solved where the values hold


def test_y0_beyond_the_float_range_is_refused_in_fp32():
    with pytest.raises(clnode.InvalidArgumentError, match=r"y0 of trajectory 0, component 1, is"):
        clnode.solve(MODEL, np.array([0.0, 1e39, 0.0]), t0=0.0, t1=1.0, dt0=0.1, precision="fp32")
