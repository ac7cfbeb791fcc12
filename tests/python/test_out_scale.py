"""The output scale of clnode.MLP (out_scale): f = s * MLP(y), a scalar or one value per
component; its arguments and errors, evaluation (s times the unscaled network), save/load in F32
and F64, from_equinox and from_torch, and a solve against diffrax.diffeqsolve of
`out_scale * mlp(y)` in float64 (the same step count, values within 1e-10)."""
import numpy as np
import pytest

import clnode


def tanh_mlp(rng, sizes=(4, 16, 16, 4), out_scale=None, **kw):
    ws = [rng.standard_normal((o, i)) / np.sqrt(i) for i, o in zip(sizes[:-1], sizes[1:])]
    bs = [rng.standard_normal(o) * 0.1 for o in sizes[1:]]
    kw.setdefault("activation", "softplus")
    kw.setdefault("final_activation", "tanh")
    return ws, bs, clnode.MLP(ws, bs, out_scale=out_scale, **kw)


def test_arguments_and_property():
    rng = np.random.default_rng(1)
    ws, bs, plain = tanh_mlp(rng)
    assert plain.out_scale is None
    for given, want in ((0.8, [0.8]), (np.float32(0.5), [0.5]), (2, [2.0]),
                        (np.array(0.25), [0.25]), ([1.5], [1.5]),
                        (np.array([0.5, 1.0, -2.0, 0.125]), [0.5, 1.0, -2.0, 0.125])):
        m = clnode.MLP(ws, bs, activation="softplus", final_activation="tanh", out_scale=given)
        assert m.out_scale.dtype == np.float64 and m.out_scale.tolist() == want
        assert m != plain and m == clnode.MLP(ws, bs, activation="softplus",
                                              final_activation="tanh", out_scale=want)
    s = clnode.MLP(ws, bs, activation="softplus", final_activation="tanh", out_scale=0.8)
    assert "out_scale=0.8" in repr(s) and "out_scale" not in repr(plain)
    per = clnode.MLP(ws, bs, activation="softplus", final_activation="tanh",
                     out_scale=[1.0, 2.0, 3.0, 4.0])
    assert "out_scale=[1.0, 2.0, 3.0, 4.0]" in repr(per) and per != s
    # a copy: changing it changes nothing
    per.out_scale[0] = 7.0
    assert per.out_scale[0] == 1.0


@pytest.mark.parametrize("bad, kind, match", [
    (True, TypeError, "out_scale must be real"),
    (np.array([True, False, True, True]), TypeError, "out_scale must be real"),
    ([1.0, 2.0], ValueError, r"out_scale must be a scalar or an array of shape \(1,\) or \(4,\)"),
    (np.ones((1, 4)), ValueError, r"not of shape \(1, 4\)"),
    (float("nan"), ValueError, "out_scale must be finite"),
    ([1.0, float("inf"), 1.0, 1.0], ValueError, "out_scale must be finite"),
    (1 + 2j, TypeError, "out_scale must be real"),
    ("0.8", TypeError, "out_scale must be real"),
])
def test_refused(bad, kind, match):
    rng = np.random.default_rng(2)
    ws, bs, _ = tanh_mlp(rng)
    with pytest.raises(kind, match=match):
        clnode.MLP(ws, bs, out_scale=bad)


def test_eval_is_s_times_the_network():
    rng = np.random.default_rng(3)
    ws, bs, plain = tanh_mlp(rng)
    y = rng.standard_normal((6, 4))
    ref = plain(y)
    for s in (0.8, np.array([0.5, -1.0 / 3.0, 7.25, 1.0])):
        m = clnode.MLP(ws, bs, activation="softplus", final_activation="tanh", out_scale=s)
        np.testing.assert_array_equal(m(y), np.asarray(s) * ref)  # one rounding each
        np.testing.assert_array_equal(m(y[2]), np.asarray(s) * ref[2])
    one = clnode.MLP(ws, bs, activation="softplus", final_activation="tanh", out_scale=1.0)
    np.testing.assert_array_equal(one(y), ref)


def test_eval_with_inputs_by_the_library():
    """A model with conditioning inputs evaluates through the C library (no numpy forward): the
    values of a network on [y, t, c] written out here."""
    rng = np.random.default_rng(4)
    w0, b0 = rng.standard_normal((8, 3 + 1 + 2)), rng.standard_normal(8)
    w1, b1 = rng.standard_normal((3, 8)), rng.standard_normal(3)
    m = clnode.MLP([w0, w1], [b0, b1], activation="tanh", time_input=True, inputs=2,
                   out_scale=[0.5, 2.0, -1.0])
    y, t, c = rng.standard_normal((5, 3)), rng.standard_normal(5), rng.standard_normal((5, 2))
    x = np.concatenate([y, t[:, None], c], axis=1)
    want = np.array([0.5, 2.0, -1.0]) * (np.tanh(x @ w0.T + b0) @ w1.T + b1)
    np.testing.assert_allclose(m(y, t, c), want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(m(y[1], t[1], c[1]), want[1], rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(m(y, t, c[0]), m(y, t, np.tile(c[0], (5, 1))))
    with pytest.raises(ValueError, match="pass args"):
        m(y, t)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("scale", [0.8, [0.5, 1.25, -0.75, 2.0], [0.3]])
def test_round_trips(tmp_path, dtype, scale):
    rng = np.random.default_rng(5)
    ws, bs, m = tanh_mlp(rng, out_scale=scale)
    p = tmp_path / "m.safetensors"
    m.save(p, dtype)
    back = clnode.MLP.load(p)
    want = np.asarray(scale, dtype=np.float64).reshape(-1).astype(dtype).astype(np.float64)
    np.testing.assert_array_equal(back.out_scale, want)
    assert back._m.out_scale_dtype == ("F64" if dtype == "float64" else "F32")
    assert clnode.MLP.from_bytes(m.to_bytes(dtype)) == back
    if dtype == "float64":
        assert back == m
    # the header: a tensor "out_scale", shape [] for one value, [N] for one per component
    import json
    import struct
    raw = m.to_bytes(dtype)
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    assert header["out_scale"]["dtype"] == ("F64" if dtype == "float64" else "F32")
    assert header["out_scale"]["shape"] == ([] if np.size(scale) == 1 else [4])
    # without a scale: no tensor
    plain = clnode.MLP(ws, bs, activation="softplus", final_activation="tanh")
    raw = plain.to_bytes(dtype)
    assert "out_scale" not in json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])


def test_solve_scaled_against_unscaled_linear():
    """y' = s * (W y), W = -I: y(t) = y0 exp(-s t) per component."""
    m = clnode.MLP([-np.eye(3)], activation="identity", out_scale=[0.5, 0.8, 1.25])
    y0 = np.array([1.0, -2.0, 0.5])
    sol = clnode.solve(m, y0, t0=0.0, t1=2.0, dt0=0.01, rtol=1e-10, atol=1e-12,
                       precision="fp64")
    np.testing.assert_allclose(sol.ys[-1], y0 * np.exp(-np.array([0.5, 0.8, 1.25]) * 2.0),
                               rtol=1e-8, atol=1e-10)


class _FakeModule:  # duck-typed torch modules: from_torch never imports torch
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _fake(name, **kw):
    return type(name, (_FakeModule,), {})(**kw)


class Sequential:
    def __init__(self, *mods):
        self.mods = mods

    def children(self):
        return iter(self.mods)


class ScaledNet:  # a custom nn.Module: a Sequential and a parameter beside it
    def __init__(self, net, **params):
        self.net, self.params = net, params

    def named_children(self):
        return iter([("net", self.net)])

    def named_parameters(self, recurse=True):
        return iter(self.params.items())

    def children(self):
        return iter([self.net])


def test_from_torch_finds_the_scale():
    rng = np.random.default_rng(6)
    ws, bs, _ = tanh_mlp(rng, (3, 5, 3), activation="tanh", final_activation="identity")
    for scale in (np.array(0.8), np.array([0.8]), np.array([0.5, 1.0, 2.0])):
        want = clnode.MLP(ws, bs, activation="tanh", out_scale=scale)
        sd = {"out_scale": scale, "net.0.weight": ws[0], "net.0.bias": bs[0],
              "net.2.weight": ws[1], "net.2.bias": bs[1]}
        assert clnode.from_torch(sd, activation="tanh") == want
        seq = Sequential(_fake("Linear", weight=ws[0], bias=bs[0]), _fake("Tanh"),
                         _fake("Linear", weight=ws[1], bias=bs[1]))
        assert clnode.from_torch(ScaledNet(seq, out_scale=scale)) == want
        assert clnode.from_torch(ScaledNet(seq, scale=scale)) == want
        assert clnode.from_torch(seq).out_scale is None
        assert clnode.from_torch(ScaledNet(seq)).out_scale is None
    with pytest.raises(ValueError, match="out_scale must be a scalar or an array of shape"):
        clnode.from_torch(dict(sd, out_scale=np.ones(2)), activation="tanh")
    with pytest.raises(ValueError, match="more than one output scale"):
        clnode.from_torch(ScaledNet(seq, out_scale=0.5, in_scale=np.ones(3)))
    with pytest.raises(ValueError, match="more than one output scale"):
        clnode.from_torch(dict(sd, **{"a.scale": np.array(1.0)}), activation="tanh")


jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402


class Func(eqx.Module):  # diffrax's neural ODE example's field
    out_scale: jax.Array
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.out_scale * self.mlp(y)


def neural_ode_func(scale):
    mlp = eqx.nn.MLP(4, 4, 16, 2, activation=jax.nn.softplus, final_activation=jnp.tanh,
                     key=jax.random.PRNGKey(7), dtype=jnp.float64)
    return Func(jnp.asarray(scale, dtype=jnp.float64), mlp)


@pytest.mark.parametrize("scale", [0.8, 1.0, [0.5, 1.5, -0.7, 1.1]])
def test_from_equinox_and_diffrax(scale):
    with jax.enable_x64(True):
        func = neural_ode_func(scale)
        m = clnode.from_equinox(func)
        np.testing.assert_array_equal(m.out_scale, np.asarray(scale, np.float64).reshape(-1))
        assert m == clnode.from_equinox(func, out_scale=scale)
        assert clnode.from_equinox(func.mlp).out_scale is None
        y = np.linspace(-1.0, 1.0, 4)
        np.testing.assert_allclose(m(y), np.asarray(func(0.0, jnp.asarray(y), None)),
                                   rtol=1e-14, atol=1e-15)
        y0 = jnp.array([0.6, -0.4, 0.2, 1.0], dtype=jnp.float64)
        ts = jnp.linspace(0.0, 4.0, 9)
        ref = diffrax.diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 4.0, 0.1, y0,
                                  stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
                                  saveat=diffrax.SaveAt(ts=ts), max_steps=4096)
        sol = clnode.solve(m, np.asarray(y0), t0=0.0, t1=4.0, dt0=0.1, rtol=1e-8, atol=1e-8,
                           precision="fp64", method="tsit5", max_steps=4096,
                           saveat=clnode.SaveAt(ts=np.asarray(ts)))
        assert int(sol.stats["num_steps"]) == int(ref.stats["num_steps"])
        assert int(sol.stats["num_accepted_steps"]) == int(ref.stats["num_accepted_steps"])
        np.testing.assert_allclose(sol.ys, np.asarray(ref.ys), rtol=0, atol=1e-10)


def test_from_equinox_scale_candidates():
    class Two(eqx.Module):
        out_scale: jax.Array
        in_scale: jax.Array
        mlp: eqx.nn.MLP

    class Lambda(eqx.Module):  # a float field and a lambda's closure
        scale: float
        mlp: eqx.nn.MLP

    with jax.enable_x64(True):
        func = neural_ode_func(0.8)
        two = Two(func.out_scale, jnp.ones(4), func.mlp)
        with pytest.raises(ValueError, match="more than one output scale candidate"):
            clnode.from_equinox(two)
        assert clnode.from_equinox(two, out_scale=0.8) == clnode.from_equinox(func)
        assert clnode.from_equinox(Lambda(0.25, func.mlp)).out_scale.tolist() == [0.25]
        mlp, s = func.mlp, jnp.asarray([1.0, 2.0, 3.0, 4.0])
        # a vector field f(t, y, args): the factor it multiplies the network by, as the drop-in
        # reads it, whatever its leaves are named
        assert clnode.from_equinox(lambda t, y, args: s * mlp(y)).out_scale.tolist() == \
            [1.0, 2.0, 3.0, 4.0]
        assert clnode.from_equinox(lambda t, y, args: mlp(y)).out_scale is None
        wide = Two(jnp.ones(3), jnp.ones((4, 4)), func.mlp)  # neither a scalar nor (N,)
        assert clnode.from_equinox(wide).out_scale is None


def test_from_equinox_reads_the_fields_factor():
    """A field's factor is read from its computation (clnode.jax's recogniser): an expression
    of leaves (exp(log_scale), whose leaf is named like a scale but is not the factor), with a
    time input; a factor that depends on y is refused."""
    class ExpScale(eqx.Module):
        log_scale: jax.Array
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return jnp.exp(self.log_scale) * self.mlp(jnp.concatenate([y, t[None]]))

    class Times(eqx.Module):
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return y[0] * self.mlp(y)

    with jax.enable_x64(True):
        mlp = eqx.nn.MLP(5, 4, 8, 1, activation=jnp.tanh, key=jax.random.PRNGKey(1),
                         dtype=jnp.float64)
        m = clnode.from_equinox(ExpScale(jnp.asarray(-0.5, jnp.float64), mlp))
        assert m.time_input
        np.testing.assert_array_equal(m.out_scale, [float(np.exp(np.float64(-0.5)))])
        y, t = np.linspace(-1.0, 1.0, 4), 0.3
        f = ExpScale(jnp.asarray(-0.5, jnp.float64), mlp)
        np.testing.assert_allclose(m(y, t), np.asarray(f(jnp.asarray(t), jnp.asarray(y), None)),
                                   rtol=1e-14)
        with pytest.raises(ValueError, match="factor that depends on t, y or args"):
            clnode.from_equinox(Times(neural_ode_func(1.0).mlp))
