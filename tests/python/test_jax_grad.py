"""float64 gradients through clnode.jax.diffeqsolve against jax.grad through diffrax.diffeqsolve.

Tolerances (the largest difference per leaf over that leaf's largest value):
  (a) 1e-11 against diffrax stepping at clnode's own step ends (diffrax.StepTo(ts=...) with the
      accepted steps of a forward clnode solve with SaveAt(steps=True)), or with constant steps
      against diffrax's ConstantStepSize itself;
  (b) 1e-7 against diffrax's own adaptive PIDController solve, where both take the same steps
      (asserted).
The loss is sum(w * ys) with fixed random weights w, so every saved point and component counts;
gradients are taken w.r.t. the field module (eqx.filter_grad: its MLP and its output scale),
y0 and args. The matrix: the forms mlp(y), mlp([y, t]), mlp([y, args]), mlp([y, t, args]),
each without a scale and with `s * mlp(...)` (s a scalar, one value per component, or
exp(log_s)); Tsit5, Dopri5, Bosh3, Dopri8 adaptive, Euler and Heun with constant steps;
SaveAt(t0, t1), SaveAt(ts), SaveAt(t1); backward time; eager, jax.jit and eqx.filter_jit; vmap
over y0, over args (nested) and over save times; per-example gradients (vmap of grad). Then the
refusals: gradients w.r.t. t0/t1/SaveAt ts, second-order derivatives, other adjoints; and the
gradient's structure, which an SGD step applies to.

diffrax's compilation dominates the time, so the reference is one eqx.filter_jit function per
solver and save layout, and the constant-step cases of one form share it: the field without a
scale and with a scalar scale are solved by diffrax as the same field with one value per
component (ones, or s repeated: the same products, bit for bit), their scale's gradient the sum
of the components'."""
import dataclasses
import importlib.util
import pathlib
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402

F64 = jnp.float64
N, K = 2, 2  # state size, args size
TOL_A, TOL_B = 1e-11, 1e-7
WORST = {"a": 0.0, "b": 0.0}  # the largest relative difference met per tolerance class


def _reference_jvp():
    """scripts/reference_jvp.py: the vector field's forms, shared with the forward mode's data."""
    spec = importlib.util.spec_from_file_location(
        "reference_jvp", pathlib.Path(__file__).resolve().parents[2] / "scripts" /
        "reference_jvp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_REF = _reference_jvp()
# y' = [s *] mlp(x), x = y, [y, t], [y, args] or [y, t, args] (form "y", "yt", "yc", "ytc");
# scale None (no factor), a scalar, one value per component, or with exp=True the factor
# exp(scale)
Field = _REF.field_class()
SCALES = _REF.SCALES


def make_field(form, scale, key, depth=2):
    n_in = N + ("t" in form) + K * ("c" in form)
    act = (jnp.tanh, jax.nn.identity) if depth == 1 else (jax.nn.softplus, jnp.tanh)
    mlp = eqx.nn.MLP(n_in, N, 8, depth, activation=act[0], final_activation=act[1],
                     key=jax.random.PRNGKey(key), dtype=F64)
    # twice equinox's initial weights: livelier dynamics, adaptive steps that get rejected
    mlp = jax.tree_util.tree_map(lambda x: 2.0 * x if eqx.is_array(x) else x, mlp)
    s = SCALES[scale]
    return Field(mlp, None if s is None else jnp.asarray(s, F64), form, exp=scale == "exp")


def as_reference(field):
    """The same vector field with the scale as one value per component (the same bits)."""
    if field.exp:
        return field
    s = jnp.ones(N, F64) if field.scale is None else jnp.broadcast_to(field.scale, (N,))
    return Field(field.mlp, s, field.form)


def from_reference(g_ref, field):
    """The reference gradient (w.r.t. as_reference(field)) w.r.t. field itself."""
    if field.exp or (field.scale is not None and field.scale.ndim):
        return g_ref
    s = None if field.scale is None else jnp.sum(g_ref.scale)
    return Field(g_ref.mlp, s, field.form)


def inputs(key, batch=()):
    k1, k2 = jax.random.split(jax.random.PRNGKey(100 + key))
    y0 = jax.random.uniform(k1, batch + (N,), F64, -1.0, 1.0)
    args = jax.random.uniform(k2, batch + (K,), F64, -1.0, 1.0)
    return y0, args


def saveat_of(kind, t0, t1):
    if kind == "t0t1":
        return diffrax.SaveAt(t0=True, t1=True)
    if kind == "t1":
        return diffrax.SaveAt(t1=True)
    return diffrax.SaveAt(ts=t0 + (t1 - t0) * jnp.asarray([0.0, 0.3, 0.65, 1.0], F64))


def n_saved(kind):
    return {"t0t1": 2, "t1": 1, "ts": 4}[kind]


def weights(key, shape):
    return jax.random.normal(jax.random.PRNGKey(200 + key), shape, F64)


# ------------------------------------------------------------------------------------------------
# the loss, through either solver


def loss(diff, solve, solver, t0, t1, dt0, saveat, ctrl, w, adjoint=None):
    """sum(w * ys) of one solve, and (aux) the numbers of steps and of accepted steps.
    diff = (field, y0, args)."""
    field, y0, args = diff
    kw = {} if adjoint is None else {"adjoint": adjoint}
    sol = solve(diffrax.ODETerm(field), solver, t0, t1, dt0, y0, args=args, saveat=saveat,
                stepsize_controller=ctrl, max_steps=64, **kw)
    return jnp.sum(w * sol.ys), (sol.stats["num_steps"], sol.stats["num_accepted_steps"])


def _reference(diff, solver, t0, t1, dt0, saveat, ctrl, w):
    return eqx.filter_value_and_grad(loss, has_aux=True)(
        diff, diffrax.diffeqsolve, solver, t0, t1, dt0, saveat, ctrl, w)


# one compilation per solver, controller and save layout (and shapes): every call's numbers are
# arguments
reference = eqx.filter_jit(_reference)


def clnode_grad(mode, diff, solver, t0, t1, dt0, saveat, ctrl, w, adjoint=None):
    """value, aux and gradient through clnode, eagerly, under jax.jit (the module's arrays as
    the jitted function's arguments) or under eqx.filter_jit."""
    def vg(d):
        return eqx.filter_value_and_grad(loss, has_aux=True)(
            d, diffeqsolve, solver, t0, t1, dt0, saveat, ctrl, w, adjoint)

    if mode == "eager":
        return vg(diff)
    if mode == "filter_jit":
        return eqx.filter_jit(vg)(diff)
    arrays, static = eqx.partition(diff, eqx.is_array)
    return jax.jit(lambda a: vg(eqx.combine(a, static)))(arrays)


def rel_err(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.all(np.isfinite(got)), got
    return float(np.max(np.abs(got - ref), initial=0.0)) / max(
        float(np.max(np.abs(ref), initial=0.0)), 1e-300)


def assert_grads_close(got, ref, cls, what=""):
    """Every leaf within the tolerance of class cls ("a" or "b"); the same tree structure."""
    tol = {"a": TOL_A, "b": TOL_B}[cls]
    gl, gdef = jax.tree_util.tree_flatten_with_path(got)
    rl, rdef = jax.tree_util.tree_flatten_with_path(ref)
    assert gdef == rdef, f"{what}: gradient structure {gdef} is not the reference's {rdef}"
    worst = 0.0
    for (path, g), (_, r) in zip(gl, rl):
        e = rel_err(g, r)
        worst = max(worst, e)
        assert e <= tol, (f"{what}: gradient at {jax.tree_util.keystr(path)} differs by {e:.3g} "
                          f"of its largest value (tolerance {tol:g})")
    WORST[cls] = max(WORST[cls], worst)
    return worst


@pytest.fixture(scope="module", autouse=True)
def report_worst():
    yield
    print(f"\ntest_jax_grad: worst relative gradient difference (a) {WORST['a']:.3g} "
          f"(tolerance {TOL_A:g}), (b) {WORST['b']:.3g} (tolerance {TOL_B:g})")


def step_ends(field, y0, args, solver, t0, t1, ctrl):
    """clnode's accepted step ends, t0 first (a forward solve with SaveAt(steps=True))."""
    sol = diffeqsolve(diffrax.ODETerm(field), solver, t0, t1, 0.5 * np.sign(t1 - t0), y0,
                      args=args, saveat=diffrax.SaveAt(steps=True), stepsize_controller=ctrl,
                      max_steps=64)
    ts = np.asarray(sol.ts)
    ts = ts[np.isfinite(ts)]
    assert ts.size >= 3 and ts[-1] == t1
    return jnp.asarray(np.concatenate([[t0], ts]), F64)


# ------------------------------------------------------------------------------------------------
# (a) adaptive clnode against diffrax stepping at clnode's step ends, and (b) against diffrax's
# own adaptive solve


@dataclasses.dataclass(frozen=True)
class Case:
    form: str
    scale: str
    solver: Any
    save: str
    backward: bool
    mode: str
    depth: int = 2
    adaptive_too: bool = False  # also (b) against diffrax's PIDController

    def __str__(self):
        return (f"{self.form}-{self.scale}-{type(self.solver).__name__}-{self.save}-"
                f"{'bwd' if self.backward else 'fwd'}-{self.mode}")


ADAPTIVE = [
    Case("y", "vector", diffrax.Tsit5(), "ts", False, "filter_jit", adaptive_too=True),
    Case("yt", "scalar", diffrax.Dopri5(), "t0t1", True, "jit"),
    Case("yc", "none", diffrax.Bosh3(), "t1", False, "eager", depth=1),
    Case("ytc", "exp", diffrax.Dopri8(), "ts", True, "eager"),
]
PID = diffrax.PIDController(rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", ADAPTIVE, ids=str)
def test_adaptive_against_diffrax_at_clnode_steps(case):
    key = ADAPTIVE.index(case)
    field = make_field(case.form, case.scale, key, case.depth)
    y0, args = inputs(key)
    args = args if "c" in case.form else None
    t0, t1 = (2.0, 0.0) if case.backward else (0.0, 2.0)
    saveat = saveat_of(case.save, t0, t1)
    w = weights(key, (n_saved(case.save), N))
    dt0 = 0.5 * np.sign(t1 - t0)
    steps = step_ends(field, y0, args, case.solver, t0, t1, PID)
    (val, (n, na)), g = clnode_grad(case.mode, (field, y0, args), case.solver, t0, t1, dt0,
                                    saveat, PID, w)
    assert int(na) == steps.size - 1
    (rval, (rn, _)), rg = reference((field, y0, args), case.solver, jnp.asarray(t0),
                                    jnp.asarray(t1), None, saveat, diffrax.StepTo(ts=steps), w)
    assert int(rn) == int(na)
    assert rel_err(val, rval) <= TOL_A
    assert_grads_close(g, rg, "a", str(case))
    if case.adaptive_too:
        (pval, pn), pg = reference((field, y0, args), case.solver, jnp.asarray(t0),
                                   jnp.asarray(t1), jnp.asarray(dt0), saveat, PID, w)
        assert (int(pn[0]), int(pn[1])) == (int(n), int(na)), \
            "diffrax's adaptive solve took other steps"
        assert_grads_close(g, pg, "b", str(case))


# ------------------------------------------------------------------------------------------------
# (a) constant steps against diffrax's ConstantStepSize: every form without and with a scale


CONSTANT = [  # (form, solver, save, backward, depth); each with the scales none, scalar, vector
    ("y", diffrax.Euler(), "ts", False, 1),
    ("yt", diffrax.Heun(), "t0t1", True, 2),
    ("yc", diffrax.Euler(), "t1", True, 2),
    ("ytc", diffrax.Heun(), "ts", False, 1),
]
MODES = ("eager", "jit", "filter_jit")


@pytest.mark.parametrize("form, solver, save, backward, depth", CONSTANT,
                         ids=[c[0] for c in CONSTANT])
def test_constant_steps_every_form_and_scale(form, solver, save, backward, depth):
    t0, t1, dt0 = (1.5, 0.0, -0.125) if backward else (0.0, 1.5, 0.125)
    saveat = saveat_of(save, t0, t1)
    ctrl = diffrax.ConstantStepSize()
    for i, scale in enumerate(("none", "scalar", "vector")):
        key = 10 + 3 * [c[0] for c in CONSTANT].index(form) + i
        field = make_field(form, scale, key, depth)
        y0, args = inputs(key)
        args = args if "c" in form else None
        w = weights(key, (n_saved(save), N))
        (val, (n, _)), g = clnode_grad(MODES[i], (field, y0, args), solver, t0, t1, dt0, saveat,
                                       ctrl, w)
        (rval, (rn, _)), rg = reference((as_reference(field), y0, args), solver, jnp.asarray(t0),
                                   jnp.asarray(t1), jnp.asarray(dt0), saveat, ctrl, w)
        assert int(n) == int(rn) == 12
        assert rel_err(val, rval) <= TOL_A
        assert_grads_close(g, (from_reference(rg[0], field),) + tuple(rg[1:]), "a",
                           f"{form}-{scale}-{type(solver).__name__}")


# ------------------------------------------------------------------------------------------------
# under jax.vmap: the gradient of a batch's loss, and per-example gradients (vmap of grad)


def per_example(one, solve, params, static, y0s, rest, axes):
    """vmap(grad(loss of one example), in_axes=(None, 0, *axes)) w.r.t. the module's arrays and
    the example's y0: ((params' gradient, y0's gradient), num_steps), one per example."""
    def lo(p, y0, *r):
        return one(eqx.combine(p, static), y0, *r, solve)

    return jax.vmap(jax.grad(lo, argnums=(0, 1), has_aux=True),
                    in_axes=(None, 0) + tuple(axes))(params, y0s, *rest)


def batch(one, solve, field, y0s, rest, axes):
    """grad of the batch's summed loss, vmap(one, in_axes=(0, *axes)) inside: (the field's
    gradient, y0s'), num_steps."""
    def lo(d):
        f, y = d
        v, n = jax.vmap(lambda *e: one(f, *e, solve), in_axes=(0,) + tuple(axes))(y, *rest)
        return jnp.sum(v), n
    return eqx.filter_grad(lo, has_aux=True)((field, y0s))


def summed(g):
    return jax.tree_util.tree_map(lambda x: jnp.sum(x, axis=0), g)


def neural_ode_one(field, y0, ts, w, solve):
    """The neural ODE example's solve: t0, t1, dt0 and ts all from the (traced) ts."""
    sol = solve(diffrax.ODETerm(field), diffrax.Tsit5(), ts[0], ts[-1], ts[1] - ts[0], y0,
                saveat=diffrax.SaveAt(ts=ts), max_steps=64, stepsize_controller=PID)
    return jnp.sum(w * sol.ys), sol.stats["num_steps"]


def test_vmap_over_y0_adaptive_and_per_example():
    """out_scale * mlp(y) under eqx.filter_jit, vmap over y0 with traced ts (b): the batch's
    gradient, and per-example gradients, against diffrax's (the same steps per example)."""
    field = make_field("y", "scalar", 30)
    y0s, _ = inputs(30, (3,))
    ts = jnp.linspace(0.0, 10.0, 6, dtype=F64)
    ws = weights(30, (3, 6, N))
    params, static = eqx.partition(field, eqx.is_inexact_array)
    rest, axes = (ts, ws), (None, 0)
    (rgp, rgy), rn = eqx.filter_jit(per_example)(neural_ode_one, diffrax.diffeqsolve, params,
                                                 static, y0s, rest, axes)
    (gf, gy), n = eqx.filter_jit(batch)(neural_ode_one, diffeqsolve, field, y0s, rest, axes)
    np.testing.assert_array_equal(np.asarray(n), np.asarray(rn))
    assert int(np.min(n)) >= 3
    assert_grads_close((eqx.filter(gf, eqx.is_inexact_array), gy), (summed(rgp), rgy), "b",
                       "vmap over y0")
    (pgp, pgy), pn = eqx.filter_jit(per_example)(neural_ode_one, diffeqsolve, params, static,
                                                 y0s, rest, axes)
    np.testing.assert_array_equal(np.asarray(pn), np.asarray(rn))
    assert_grads_close((pgp, pgy), (rgp, rgy), "b", "per-example, adaptive")


def nested_one(field, y0, args, w, solve):
    sol = solve(diffrax.ODETerm(field), diffrax.Tsit5(), 1.5, 0.0, -0.25, y0, args=args,
                saveat=diffrax.SaveAt(t0=True, t1=True), max_steps=64)
    return jnp.sum(w * sol.ys), sol.stats["num_steps"]


def test_nested_vmap_over_args_and_y0_constant_steps():
    """[y, t, args] with one scale per component, backward in time with constant steps, under
    jax.jit(grad(vmap over args (vmap over y0))) (a): the gradient w.r.t. the field, y0 and
    args."""
    field = make_field("ytc", "vector", 31)
    y0s, args = inputs(31, (2, 3))
    args = args[:, 0]  # one args per outer example
    ws = weights(31, (2, 3, 2, N))

    def total(d, solve):
        f, y, c = d
        inner = jax.vmap(lambda yy, cc, ww: nested_one(f, yy, cc, ww, solve),
                         in_axes=(0, None, 0))
        v, n = jax.vmap(inner)(y, c, ws)
        return jnp.sum(v), n

    arrays, static = eqx.partition((field, y0s, args), eqx.is_array)
    got, n = jax.jit(lambda a: jax.grad(lambda x: total(eqx.combine(x, static), diffeqsolve),
                                        has_aux=True)(a))(arrays)
    ref, rn = eqx.filter_jit(eqx.filter_grad(total, has_aux=True))((field, y0s, args),
                                                                    diffrax.diffeqsolve)
    np.testing.assert_array_equal(np.asarray(n), np.asarray(rn))
    assert np.all(np.asarray(n) == 6)
    assert_grads_close(got, eqx.filter(ref, eqx.is_array), "a", "nested vmap over args, y0")


def latent_one(field, y0, ts, w, solve):
    """The latent ODE example's decoder: each sample its own save times, constant steps of
    0.4."""
    sol = solve(diffrax.ODETerm(field), diffrax.Tsit5(), ts[0], ts[-1], 0.4, y0,
                saveat=diffrax.SaveAt(ts=ts), max_steps=64)
    return jnp.sum(w * sol.ys), sol.stats["num_steps"]


def test_vmap_over_save_times_and_per_example():
    """scale * mlp(y) with per-sample save times under eqx.filter_jit (a): the batch's gradient
    and the per-example gradients (vmap of grad) against diffrax's."""
    field = make_field("y", "scalar", 32)
    y0s, _ = inputs(32, (3,))
    rng = np.random.default_rng(32)
    ts = np.sort(rng.uniform(0.0, 3.0, (3, 5)), axis=1)
    ts[:, 0] = rng.uniform(0.0, 0.5, 3)
    ts = jnp.asarray(ts, F64)
    ws = weights(32, (3, 5, N))
    params, static = eqx.partition(field, eqx.is_inexact_array)
    rest, axes = (ts, ws), (0, 0)
    (rgp, rgy), rn = eqx.filter_jit(per_example)(latent_one, diffrax.diffeqsolve, params, static,
                                                 y0s, rest, axes)
    (gf, gy), n = eqx.filter_jit(batch)(latent_one, diffeqsolve, field, y0s, rest, axes)
    np.testing.assert_array_equal(np.asarray(n), np.asarray(rn))
    assert len(set(np.asarray(n).tolist())) > 1  # the samples' own intervals
    assert_grads_close((eqx.filter(gf, eqx.is_inexact_array), gy), (summed(rgp), rgy), "a",
                       "vmap over save times")
    (pgp, pgy), pn = eqx.filter_jit(per_example)(latent_one, diffeqsolve, params, static, y0s,
                                                 rest, axes)
    assert_grads_close((pgp, pgy), (rgp, rgy), "a", "per-example, constant steps")


# ------------------------------------------------------------------------------------------------
# refusals, and what the gradient is


def small_field():
    return make_field("y", "scalar", 40, depth=1)


def simple_loss(field, y0, t0=0.0, t1=1.0, ts=None, dt0=0.1, **kw):
    saveat = diffrax.SaveAt(t1=True) if ts is None else diffrax.SaveAt(ts=ts)
    return jnp.sum(diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), t0, t1, dt0, y0,
                               saveat=saveat, stepsize_controller=PID, max_steps=64,
                               **kw).ys)


Y0 = jnp.asarray([0.3, -0.2], F64)
TS = jnp.asarray([0.25, 0.5, 1.0], F64)


@pytest.mark.parametrize("name, f, x", [
    ("t1", lambda t: simple_loss(small_field(), Y0, t1=t), 1.0),
    ("t0", lambda t: simple_loss(small_field(), Y0, t0=t), 0.0),
    ("ts", lambda ts: simple_loss(small_field(), Y0, ts=ts), TS),
    ("dt0", lambda d: simple_loss(small_field(), Y0, dt0=d), 0.1),
], ids=["t1", "t0", "ts", "dt0"])
def test_gradient_wrt_times_refused(name, f, x):
    """Asked for, the gradient w.r.t. a time argument is a TypeError naming it (eagerly and under
    jax.jit); not asked for, the same times traced are no obstacle."""
    with pytest.raises(TypeError, match=rf"\b{name}\b"):
        jax.grad(f)(x)
    with pytest.raises(TypeError, match=rf"\b{name}\b"):
        jax.jit(jax.grad(f))(x)
    # asked for y0 only, the same solve with traced times gives its gradient
    g = jax.jit(jax.grad(lambda y, t: simple_loss(small_field(), y, **{name: t})))(Y0, x)
    assert np.all(np.isfinite(np.asarray(g))) and np.any(np.asarray(g) != 0)


@pytest.mark.parametrize("transform", [
    lambda f: jax.hessian(f)(Y0),
    lambda f: jax.jacfwd(jax.grad(f))(Y0),
    lambda f: jax.grad(lambda y: jnp.sum(jax.grad(f)(y)))(Y0),
], ids=["hessian", "jacfwd-of-grad", "grad-of-grad"])
def test_second_order_refused(transform):
    with pytest.raises(TypeError, match="second-order"):
        transform(lambda y: simple_loss(small_field(), y))


@pytest.mark.parametrize("adjoint", [diffrax.BacksolveAdjoint(), diffrax.DirectAdjoint()],
                         ids=lambda a: type(a).__name__)
def test_other_adjoints_refused_by_name(adjoint):
    name = type(adjoint).__name__
    with pytest.raises(clnode.jax.UnsupportedArgument, match=name):
        jax.grad(lambda y: simple_loss(small_field(), y, adjoint=adjoint))(Y0)
    with pytest.raises(clnode.jax.UnsupportedArgument, match=name):
        simple_loss(small_field(), Y0, adjoint=adjoint)


def test_checkpoints_give_the_same_bits():
    field = small_field()

    def g(adjoint):
        kw = {} if adjoint is None else {"adjoint": adjoint}
        return eqx.filter_grad(lambda d: simple_loss(d[0], d[1], ts=TS, **kw))((field, Y0))

    a = g(None)
    b = g(diffrax.RecursiveCheckpointAdjoint(checkpoints=3))
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


class Scaled(eqx.Module):
    mlp: eqx.nn.MLP
    s: jax.Array

    def __call__(self, t, y, args):
        return self.s * self.mlp(y)


def test_error_inside_jit_keeps_the_message():
    """A field whose factor is not finite, its leaves traced: the library's refusal is met
    inside the callback, and the gradient's caller sees its message."""
    f = Scaled(small_field().mlp, jnp.asarray([jnp.inf, 1.0], F64))
    lo = eqx.filter_grad(lambda d: simple_loss(d[0], d[1]))
    msg = "finite"
    with pytest.raises(Exception, match=msg):
        jax.block_until_ready(eqx.filter_jit(lo)((f, Y0)))
    arrays, static = eqx.partition((f, Y0), eqx.is_array)
    with pytest.raises(Exception, match=msg):
        jax.block_until_ready(jax.jit(lambda a: lo(eqx.combine(a, static)))(arrays))
    with pytest.raises(ValueError, match=msg):
        lo((f, Y0))


def test_gradient_is_the_module_and_a_step_applies():
    """eqx.filter_grad returns the module's structure (every inexact array, its shape and
    dtype); a plain SGD step with it lowers the loss by lr |g|^2 to first order, and optax's
    SGD applies it the same way."""
    field = make_field("yt", "vector", 41)
    ts = jnp.linspace(0.0, 2.0, 5, dtype=F64)
    w = weights(41, (5, N))

    def lo(f, solve=diffeqsolve):
        sol = solve(diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, 2.0, 0.1, Y0, max_steps=64,
                    saveat=diffrax.SaveAt(ts=ts), stepsize_controller=PID)
        return jnp.sum(w * sol.ys)

    params, static = eqx.partition(field, eqx.is_inexact_array)
    g = eqx.filter_jit(eqx.filter_grad(lo))(field)
    assert jax.tree_util.tree_structure(g) == jax.tree_util.tree_structure(params)
    for x, p in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(params)):
        assert x.shape == p.shape and x.dtype == p.dtype
    lr = 1e-3
    new = eqx.combine(jax.tree_util.tree_map(lambda p, d: p - lr * d, params, g), static)
    before, after = float(lo(field)), float(lo(new))
    sq = sum(float(jnp.sum(x * x)) for x in jax.tree_util.tree_leaves(g))
    assert after < before
    # first order: the decrease is lr * |g|^2 to within a few per cent
    assert abs((before - after) / (lr * sq) - 1.0) < 0.05
    optax = pytest.importorskip("optax")
    opt = optax.sgd(lr)
    updates, _ = opt.update(g, opt.init(params))
    new2 = eqx.apply_updates(field, updates)
    np.testing.assert_allclose(float(lo(new2)), after, rtol=1e-14)
