"""The vector field taken for what it computes, never for its values (float64, against jax.grad
through diffrax.diffeqsolve).

Fields whose values equal s * MLP(...) at some parameter values but which compute something
else (a term added, the network's input scaled, a factor depending on y, an activation equal to
a supported one on [-6, 6] only) are refused naming the construct (fallback="error", as the
whole suite runs: CLNODE_JAX_FALLBACK=error in conftest.py) or handed to diffrax with a
FallbackWarning (CLNODE_JAX_FALLBACK=warn): the same bits as diffrax's, value and gradient, at
zero and away from it. Fields that are one of the forms with parameters made inside the field
(a mask on a weight, frozen weights, biases or scale by jax.lax.stop_gradient) are clnode's,
with diffrax's gradient: zero for what is frozen."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

import clnode  # noqa: E402
import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402

F64 = jnp.float64
N = 2
Y0 = jnp.asarray([0.6, -0.4], F64)
TS = jnp.asarray([0.0, 0.4, 0.7, 1.0], F64)
W = jnp.asarray([[0.3, -1.1], [0.7, 0.2], [-0.5, 0.9], [1.3, 0.4]], F64)
PID = diffrax.PIDController(rtol=1e-6, atol=1e-8)


def mlp(activation=jax.nn.softplus, final=jnp.tanh, key=0, gain=1.0):
    m = eqx.nn.MLP(N, N, 8, 2, activation=activation, final_activation=final,
                   key=jax.random.PRNGKey(key), dtype=F64)
    return jax.tree_util.tree_map(lambda x: gain * x if eqx.is_array(x) else x, m)


class Field(eqx.Module):
    """A field with extra parameters p (a dict of arrays) and a body fn(self, t, y)."""
    mlp: eqx.nn.MLP
    p: dict
    fn: object = eqx.field(static=True)

    def __call__(self, t, y, args):
        return self.fn(self, t, y)


def loss(field, y0, solve):
    sol = solve(diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 1.0, 0.1, y0, max_steps=256,
                saveat=diffrax.SaveAt(ts=TS), stepsize_controller=PID)
    return jnp.sum(W * sol.ys), sol.stats["num_steps"]


def value_and_grad(field, solve):
    return eqx.filter_value_and_grad(lambda d: loss(d[0], d[1], solve), has_aux=True)(
        (field, Y0))


def leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


# every case: (the field's body, its extra parameters at zero / at one / away from both, what
# the refusal names)
REFUSED = {
    "k*y in, c*y added": (lambda f, t, y: f.mlp(f.p["k"] * y) + f.p["c"] * y,
                          {"k": 1.0, "c": 0.0}, {"k": 1.3, "c": 0.2}, "adds a term"),
    "k*y in": (lambda f, t, y: f.mlp(f.p["k"] * y), {"k": 1.0}, {"k": 0.7},
               r"called on mul\(the leaf .p\['k'\], y\)"),
    "vector k*y in": (lambda f, t, y: f.mlp(f.p["k"] * y), {"k": [1.0, 1.0]},
                      {"k": [0.7, 1.2]}, "called on mul"),
    "+ b": (lambda f, t, y: f.mlp(y) + f.p["b"], {"b": [0.0, 0.0]}, {"b": [0.1, -0.3]},
            "adds a term"),
    "s * mlp + b": (lambda f, t, y: f.p["s"] * f.mlp(y) + f.p["b"], {"s": 0.9, "b": [0.0, 0.0]},
                    {"s": 0.9, "b": [0.1, -0.3]}, "adds a term"),
    "- y": (lambda f, t, y: f.mlp(y) - f.p["c"] * y, {"c": 0.0}, {"c": 0.5},
            "subtracts a term"),
    "* (1 + w sum y)": (lambda f, t, y: f.mlp(y) * (1.0 + f.p["w"] * jnp.sum(y)), {"w": 0.0},
                        {"w": 0.3}, "depends on t, y or args"),
    "* (1 + w t)": (lambda f, t, y: (1.0 + f.p["w"] * t) * f.mlp(y), {"w": 0.0}, {"w": 0.3},
                    "depends on t, y or args"),
    "tanh after": (lambda f, t, y: jnp.tanh(f.p["g"] * f.mlp(y)), {"g": 1.0}, {"g": 0.5},
                   "rather than its network's output"),
    "/ d": (lambda f, t, y: f.mlp(y) / f.p["d"], {"d": 1.0}, {"d": 2.0}, "divides"),
}


def make(case, params):
    body = REFUSED[case][0]
    return Field(mlp(), {k: jnp.asarray(v, F64) for k, v in params.items()}, body)


# the cases of the report, handed over and compared with diffrax (each costs two compilations
# of diffrax's gradient); every case is refused at both parameter values
COMPARED = ("k*y in, c*y added", "+ b", "* (1 + w sum y)")


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_other_computations_are_refused_or_diffrax(case, monkeypatch):
    """Refused naming the construct at the parameters where its values are the network's and
    away from them (under jax.grad, where the refusal is met); handed over with a warning,
    diffrax's bits (value, step count, gradient)."""
    for params in REFUSED[case][1:3]:
        with pytest.raises(clnode.jax.UnsupportedArgument, match=REFUSED[case][3]):
            value_and_grad(make(case, params), diffeqsolve)
    if case not in COMPARED:
        return
    field = make(case, REFUSED[case][1])
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "warn")
    (ref, n_ref), g_ref = value_and_grad(field, diffrax.diffeqsolve)
    with pytest.warns(clnode.jax.FallbackWarning, match=REFUSED[case][3]):
        (val, n), g = value_and_grad(field, diffeqsolve)
        assert int(n) == int(n_ref)
        np.testing.assert_array_equal(np.asarray(val), np.asarray(ref))
        for a, b in zip(leaves(g), leaves(g_ref)):
            np.testing.assert_array_equal(a, b)


def test_the_keyword_overrides_the_environment(monkeypatch):
    field = make("+ b", REFUSED["+ b"][1])
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "warn")
    kw = dict(max_steps=256, stepsize_controller=PID)
    with pytest.raises(clnode.jax.UnsupportedArgument, match="adds a term"):
        diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0,
                    fallback="error", **kw)
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "error")
    with pytest.warns(clnode.jax.FallbackWarning):
        diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0,
                    fallback="warn", **kw)
    with pytest.raises(ValueError, match="fallback must be one of"):
        diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0,
                    fallback="quiet", **kw)
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "loud")
    with pytest.raises(ValueError, match="CLNODE_JAX_FALLBACK must be one of"):
        diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0, **kw)


# ------------------------------------------------------------------------------------------------
# activations equal to a supported one on [-6, 6] but not beyond


def _tanh_clipped(x):
    return jnp.where(jnp.abs(x) < 6.5, jnp.tanh(x), jnp.sign(x))


ACTIVATIONS = {
    "relu6": (jax.nn.relu6, jax.nn.relu),
    "relu min 6": (lambda x: jnp.minimum(jax.nn.relu(x), 6.0), jax.nn.relu),
    "tanh clipped": (_tanh_clipped, jnp.tanh),
    "hard_tanh final": (jax.nn.hard_tanh, None),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS), ids=list(ACTIVATIONS))
def test_activations_equal_on_a_grid_are_not_taken(name, monkeypatch):
    """Activations that a check of values on [-6, 6] takes for a supported one: refused by what
    they compute; handed over, diffrax's bits with pre-activations beyond 6 (gain 12)."""
    act, _ = ACTIVATIONS[name]
    if name.endswith("final"):
        net = mlp(activation=jnp.tanh, final=act, gain=3.0)
    else:
        net = mlp(activation=act, final=jnp.tanh, gain=12.0)
    field = Field(net, {}, lambda f, t, y: f.mlp(y))
    with pytest.raises(clnode.jax.UnsupportedArgument, match="activation"):
        value_and_grad(field, diffeqsolve)
    with pytest.raises(ValueError, match="none of the library's activations"):
        clnode.from_equinox(net)
    if name not in ("relu6", "tanh clipped"):
        return  # handed over and compared for two of them (two compilations of diffrax each)
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "warn")
    (ref, _), g_ref = value_and_grad(field, diffrax.diffeqsolve)
    with pytest.warns(clnode.jax.FallbackWarning, match="activation"):
        (val, _), g = value_and_grad(field, diffeqsolve)
    np.testing.assert_array_equal(np.asarray(val), np.asarray(ref))
    for a, b in zip(leaves(g), leaves(g_ref)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fn, name", [
    (jax.nn.relu, "relu"), (lambda x: jax.nn.relu(x), "relu"), (jnp.tanh, "tanh"),
    (jax.nn.tanh, "tanh"), (jax.nn.sigmoid, "sigmoid"), (jax.nn.softplus, "softplus"),
    (jax.nn.silu, "silu"), (jax.nn.swish, "silu"), (jax.nn.gelu, "gelu"),
    (lambda x: jax.nn.gelu(x, approximate=True), "gelu"), (lambda x: x, "identity"),
    (jax.nn.identity, "identity"), (jax.nn.relu6, None), (jax.nn.hard_tanh, None),
    (lambda x: jax.nn.gelu(x, approximate=False), None), (jnp.sin, None),
    (lambda x: jnp.log1p(jnp.exp(x)), None), (jax.nn.leaky_relu, None),
    (jax.nn.elu, None), (jax.nn.hard_sigmoid, None),
], ids=lambda v: v if isinstance(v, str) else None)
def test_activation_identified_by_what_it_computes(fn, name):
    from clnode.jax import _field as _jax_field
    for dtype in (np.float32, np.float64):
        assert _jax_field.activation_name(fn, dtype) == name


# ------------------------------------------------------------------------------------------------
# one of the forms, its parameters made inside the field: clnode's, with diffrax's gradient


def _masked(f, t, y):
    w = f.mlp.layers[0].weight
    net = eqx.tree_at(lambda m: m.layers[0].weight, f.mlp, w * f.p["mask"])
    return f.p["s"] * net(y)


def _frozen_biases(f, t, y):
    net = eqx.tree_at(lambda m: [layer.bias for layer in m.layers], f.mlp,
                      [jax.lax.stop_gradient(layer.bias) for layer in f.mlp.layers])
    return net(y)


TAKEN = {
    "frozen network": (lambda f, t, y: jax.tree_util.tree_map(
        lambda x: jax.lax.stop_gradient(x) if eqx.is_array(x) else x, f.mlp)(y), {}),
    "frozen weights, learnt scale": (
        lambda f, t, y: f.p["s"] * eqx.tree_at(
            lambda m: [layer.weight for layer in m.layers], f.mlp,
            [jax.lax.stop_gradient(layer.weight) for layer in f.mlp.layers])(y), {"s": 0.8}),
    "frozen biases": (_frozen_biases, {}),
    "frozen scale": (lambda f, t, y: jax.lax.stop_gradient(f.p["s"]) * f.mlp(y),
                     {"s": [0.8, -1.1]}),
    "masked weight, scale": (_masked, {"mask": np.tril(np.ones((8, N))), "s": 1.2}),
    "exp scale": (lambda f, t, y: jnp.exp(f.p["l"]) * f.mlp(y), {"l": [-0.2, 0.3]}),
}


@pytest.mark.parametrize("case", list(TAKEN), ids=list(TAKEN))
def test_parameters_made_inside_the_field_are_differentiated_by_jax(case, monkeypatch):
    """Taken by clnode (no warning: every refusal is an error in this suite), the same steps as
    diffrax and its gradient within 1e-7 (class (b) of test_jax_grad.py), exactly zero where
    jax.lax.stop_gradient freezes a leaf."""
    body, params = TAKEN[case]
    field = Field(mlp(), {k: jnp.asarray(v, F64) for k, v in params.items()}, body)
    calls = []
    real = clnode._solve.solve
    monkeypatch.setattr(clnode._solve, "solve", lambda *a, **k: calls.append(1) or real(*a, **k))
    (val, n), g = value_and_grad(field, diffeqsolve)
    assert calls, "not solved by clnode"
    (ref, n_ref), g_ref = value_and_grad(field, diffrax.diffeqsolve)
    assert int(n) == int(n_ref)
    np.testing.assert_allclose(float(val), float(ref), rtol=1e-10)
    for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(g)[0], leaves(g_ref)):
        a = np.asarray(a)
        if not np.any(b):
            np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))
        else:
            err = np.max(np.abs(a - b)) / np.max(np.abs(b))
            assert err <= 1e-7, (jax.tree_util.keystr(path), err)
    if case.startswith("frozen"):
        assert any(not np.any(b) for b in leaves(g_ref)), "nothing frozen"


# ------------------------------------------------------------------------------------------------
# messages that name what was written


def test_refusals_name_what_was_written(monkeypatch):
    net = mlp()
    kw = dict(max_steps=64)

    def refused(match, *a, **k):
        with pytest.raises(clnode.jax.UnsupportedArgument, match=match):
            diffeqsolve(*a, **{**kw, **k})

    # a controlled differential equation: the ControlTerm, not the network's width
    cde_net = eqx.nn.MLP(N, N * 3, 8, 1, key=jax.random.PRNGKey(3), dtype=F64)
    control = diffrax.LinearInterpolation(ts=jnp.linspace(0.0, 1.0, 5, dtype=F64),
                                          ys=jnp.ones((5, 3), F64))
    term = diffrax.ControlTerm(lambda t, y, args: cde_net(y).reshape(N, 3), control)
    refused("ControlTerm", term.to_ode(), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0)
    refused("ControlTerm", term, diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0)
    refused("MultiTerm", diffrax.MultiTerm(diffrax.ODETerm(lambda t, y, a: net(y)),
                                           diffrax.ODETerm(lambda t, y, a: net(y))),
            diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0)
    # a pytree state
    refused("pytree state", diffrax.ODETerm(lambda t, y, a: {"a": net(y["a"])}),
            diffrax.Tsit5(), 0.0, 1.0, 0.1, {"a": Y0})
    # an added term is not called a factor
    with pytest.raises(clnode.jax.UnsupportedArgument) as e:
        diffeqsolve(diffrax.ODETerm(lambda t, y, args: net(y) - y), diffrax.Tsit5(), 0.0, 1.0,
                    0.1, Y0, **kw)
    assert "subtracts a term from" in str(e.value) and "factor of" not in str(e.value).split(
        "solves")[0]
    # step_ts / jump_ts of the controller, as written (diffrax makes a ClipStepSizeController)
    for name in ("step_ts", "jump_ts"):
        ctrl = diffrax.PIDController(rtol=1e-6, atol=1e-8, **{name: jnp.asarray([0.5], F64)})
        refused(rf"PIDController\(step_ts=..., jump_ts=...\)",
                diffrax.ODETerm(lambda t, y, a: net(y)), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0,
                stepsize_controller=ctrl)
    # each falls back with its warning and diffrax's solution
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "warn")
    with pytest.warns(clnode.jax.FallbackWarning, match="ControlTerm"):
        got = diffeqsolve(term.to_ode(), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0)
    ref = diffrax.diffeqsolve(term.to_ode(), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0)
    np.testing.assert_array_equal(np.asarray(got.ys), np.asarray(ref.ys))


def test_warning_once_per_call_site(monkeypatch):
    """Python's default filter shows a FallbackWarning once per call site and reason."""
    import warnings
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "warn")
    field = make("+ b", REFUSED["+ b"][2])

    def site():
        return diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 1.0, 0.1, Y0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for _ in range(3):
            site()
    fallbacks = [w for w in caught if issubclass(w.category, clnode.jax.FallbackWarning)]
    assert len(fallbacks) == 1 and fallbacks[0].filename == __file__


def test_differentiation_time_refusals_stay_errors(monkeypatch):
    """A call clnode takes is never handed over: a gradient w.r.t. t1 is still a TypeError with
    fallback="warn"."""
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "warn")
    net = mlp()

    def lo(t1):
        return diffeqsolve(diffrax.ODETerm(lambda t, y, a: net(y)), diffrax.Tsit5(), 0.0, t1,
                           0.1, Y0).ys.sum()

    with pytest.raises(TypeError, match="t1"):
        jax.grad(lo)(1.0)


def test_from_equinox_uses_the_same_recogniser():
    """clnode.from_equinox reads a field as the drop-in does: a term added is refused at b == 0
    (its factor once read as 1), a factor made of leaves is the model's out_scale, a
    relu6 network is refused (test_activations_equal_on_a_grid_are_not_taken)."""
    net = mlp()
    with pytest.raises(ValueError, match="adds a term"):
        clnode.from_equinox(make("+ b", REFUSED["+ b"][1]))
    with pytest.raises(ValueError, match="depends on t, y or args"):
        clnode.from_equinox(make("* (1 + w sum y)", REFUSED["* (1 + w sum y)"][1]))
    m = clnode.from_equinox(Field(net, {"l": jnp.asarray([-0.2, 0.3], F64)},
                                  TAKEN["exp scale"][0]))
    np.testing.assert_array_equal(m.out_scale, np.exp(np.asarray([-0.2, 0.3])))
    y = np.asarray([0.3, -0.7])
    np.testing.assert_allclose(m(y), np.exp([-0.2, 0.3]) * np.asarray(net(jnp.asarray(y))),
                               rtol=1e-14)
