"""Forward mode through clnode.jax.diffeqsolve (jax.jvp, jax.jacfwd, jax.linearize) against
diffrax's ForwardMode in float64, and its own properties.

Oracle: tests/data/diffrax/jvp-fp64.npz, written by `scripts/make_reference.py --only-jvp`
(scripts/reference_jvp.py: the cases, their vector fields, the members). Per case two random
directions (every differentiable leaf: the MLP's weights and biases, the factor s, y0, args),
taken by clnode as one jax.vmap over the tangents of jax.jvp under jax.jit (one tangent pass
with two directions). Bounds (the largest difference over the largest value of the case):
  (a) 1e-12 against diffrax's ForwardMode stepping at clnode's own step ends (StepTo), and the
      primal values too; clnode's accepted steps must be the file's (else the data is stale);
  (b) 1e-12 against diffrax's ForwardMode with its own controller, whose step counts must be
      clnode's (asserted), in every case but SaveAt(steps=True) with a PIDController: there the
      saved rows are at diffrax's own step ends, which lie off clnode's by rounding (up to ~1e-7
      in time here, recorded: ends_own), and the bound is OWN_STEPS_BOUND.
A live diffrax sample of two cases recomputes both against the file. Then: <ybar, J v> =
<J^T ybar, v> against clnode's own reverse pass to 1e-13; jax.jacfwd under jax.jit and jax.vmap,
the same bits per trajectory at batch 1 and 7, eager and jitted, with one direction or several;
adjoint=diffrax.ForwardMode() the same bits; jax.linearize called twice; float32; the
refusals (tangents of t0, t1, dt0 and the save times, second-order derivatives);
clnode.Solution.jvp."""
import importlib.util
import pathlib

import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

import clnode  # noqa: E402
import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("reference_jvp", REPO / "scripts" /
                                               "reference_jvp.py")
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)

BOUND = 1e-12
OWN_STEPS_BOUND = 1e-6
ADJOINT_BOUND = 1e-13
CASES = {c[0]: (i, c) for i, c in enumerate(ref.JVP_CASES)}


@pytest.fixture(scope="module")
def data():
    return np.load(REPO / "tests" / "data" / "diffrax" / "jvp-fp64.npz")


def case_inputs(name, data):
    """The case's problem and directions from the file, and its field with the file's
    parameters."""
    i, case = CASES[name]
    inp = ref.case_inputs(i, case)
    for key in ("params", "y0", "args", "t0s", "t1s", "dt0s", "ts", "dparams", "dy0", "dargs"):
        inp[key] = data[f"{name}__{key}"]
    inp["field"] = ref.with_params(inp["field"], inp["params"])
    return case, inp


def clnode_jvps(case, inp, solve=diffeqsolve, jit=True, dtype=jnp.float64):
    """clnode's ys (B, T, N), tangents (D, B, T, N) and accepted steps (B,): one jax.vmap over
    the directions of jax.jvp."""
    field = ref.with_params(inp["field"], inp["params"], dtype)
    arrays, static = eqx.partition(field, eqx.is_array)
    fn = ref.solve_fn(case, solve, static)
    args = ref.batch_args(case, inp, dtype)
    tans = [ref.tangent_args(case, inp, d, arrays) for d in range(ref.NDIR)]
    stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x).astype(dtype), *tans)

    def run(a, y, c, t):
        def f(p, yy, cc):
            return fn(p, yy, cc, *args[2:])[0]
        ys, _, na, _ = fn(a, y, c, *args[2:])
        return ys, jax.vmap(lambda tt: jax.jvp(f, (a, y, c), tt)[1])(t), na

    ys, jv, na = (jax.jit(run) if jit else run)(arrays, args[0], args[1], stacked)
    lead = (1,) if case[6] == "one" else ()
    ys = np.reshape(np.asarray(ys, np.float64), lead + np.shape(ys))
    jv = np.reshape(np.asarray(jv, np.float64), (ref.NDIR,) + ys.shape)
    return ys, jv, np.reshape(np.asarray(na), -1)


def rows(x, n):
    """The first n saved rows (SaveAt(steps): the accepted steps'), NaN beyond a trajectory's."""
    out = np.array(x[..., :n, :], np.float64)
    out[~np.isfinite(out)] = np.nan
    return out


def rel(got, want):
    assert got.shape == want.shape, (got.shape, want.shape)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got)), "the saved points differ"
    return float(np.max(np.abs(got[fin] - want[fin])) / np.max(np.abs(want[fin])))


@pytest.mark.parametrize("name", list(CASES))
def test_against_diffrax_forward_mode(name, data):
    case, inp = case_inputs(name, data)
    ys, jv, na = clnode_jvps(case, inp)
    ends = data[f"{name}__ends"]
    n_ends = np.sum(np.isfinite(ends), axis=1) - 1
    # (a) the file's steps are clnode's
    assert list(na) == list(n_ends), f"clnode takes {list(na)} steps, the file {list(n_ends)}"
    counts = data[f"{name}__counts_own"]
    assert list(counts[:, 1]) == list(na), \
        f"diffrax's own accepted steps {list(counts[:, 1])}, clnode's {list(na)}"
    want_ys, want_s = data[f"{name}__ys_stepto"], data[f"{name}__jvp_stepto"]
    if case[5] == "steps":
        ys, jv = rows(ys, want_ys.shape[-2]), rows(jv, want_ys.shape[-2])
    assert rel(ys, want_ys) <= BOUND
    err_a = rel(jv, want_s)
    assert err_a <= BOUND, f"{name}: {err_a:.2e} from diffrax's ForwardMode at clnode's steps"
    # (b) diffrax's own controller
    want_o = data[f"{name}__jvp_own"]
    err_b = rel(jv, want_o)
    adaptive_steps = case[5] == "steps" and case[4] is not None
    off = float(np.nanmax(np.abs(data[f"{name}__ends_own"] - ends))) if case[5] == "steps" \
        else 0.0
    bound = OWN_STEPS_BOUND if adaptive_steps else BOUND
    print(f"{name}: (a) {err_a:.1e} (b) {err_b:.1e} step ends off by {off:.1e}")
    assert err_b <= bound, f"{name}: {err_b:.2e} from diffrax's own ForwardMode"


@pytest.mark.parametrize("name", ["tsit5_ts", "euler_steps_const"])
def test_live_diffrax_sample(name, data):
    """diffrax (installed) recomputes the file's JVPs of two cases."""
    case, inp = case_inputs(name, data)
    ends = [e[np.isfinite(e)] for e in data[f"{name}__ends"]]
    ys_s, jv_s = ref.diffrax_stepto(case, inp, ends)
    ys_o, jv_o, counts, _ = ref.diffrax_own(case, inp)
    if case[5] == "steps":
        n = data[f"{name}__jvp_stepto"].shape[-2]
        jv_s, jv_o = rows(jv_s, n), rows(jv_o, n)
    assert rel(jv_s, data[f"{name}__jvp_stepto"]) <= 1e-14
    assert rel(jv_o, data[f"{name}__jvp_own"]) <= 1e-14
    np.testing.assert_array_equal(counts, data[f"{name}__counts_own"])


# ------------------------------------------------------------------------------------------------
# properties of clnode's forward mode


def small_problem(B=3, form="ytc", scale="vector", key=3):
    field = ref.make_field(form, scale, key)
    rng = np.random.default_rng(key)
    y0 = jnp.asarray(rng.uniform(-1, 1, (B, ref.N)))
    c = jnp.asarray(rng.uniform(-1, 1, (B, ref.K)))
    return field, y0, c


def solve_ys(field, y0, c, t1=2.0, ts=None, adjoint=None, solver=None, dt0=0.05, t0=0.0,
             ctrl=None, throw=True):
    kw = {"throw": throw} if adjoint is None else {"adjoint": adjoint, "throw": throw}
    saveat = diffrax.SaveAt(ts=ts) if ts is not None else diffrax.SaveAt(t1=True)
    t0, t1, dt0 = (jnp.asarray(x, y0.dtype) for x in (t0, t1, dt0))  # float32: an fp32 solve
    sol = diffeqsolve(diffrax.ODETerm(field), solver or diffrax.Tsit5(), t0, t1, dt0, y0,
                      args=c, saveat=saveat,
                      stepsize_controller=ctrl or diffrax.PIDController(rtol=1e-6, atol=1e-9),
                      max_steps=256, **kw)
    return sol.ys


def batched(field, y0s, cs, **kw):
    return jax.vmap(lambda y, c: solve_ys(field, y, c, **kw))(y0s, cs)


def test_adjoint_identity_against_reverse_mode():
    """<ybar, J v> from the tangent pass = <J^T ybar, v> from clnode's own reverse pass."""
    field, y0, c = small_problem()
    ts = jnp.asarray([0.4, 1.1, 2.0])
    arrays, static = eqx.partition(field, eqx.is_array)

    def f(a, y, cc):
        return batched(eqx.combine(a, static), y, cc, ts=ts)

    rng = np.random.default_rng(7)
    leaves, tree = jax.tree_util.tree_flatten(arrays)
    for trial in range(3):
        v = (jax.tree_util.tree_unflatten(tree, [jnp.asarray(rng.normal(size=x.shape))
                                                 for x in leaves]),
             jnp.asarray(rng.normal(size=y0.shape)), jnp.asarray(rng.normal(size=c.shape)))
        ys, jv = jax.jit(lambda *t: jax.jvp(f, (arrays, y0, c), t))(*v)
        ybar = jnp.asarray(rng.normal(size=ys.shape))
        _, back = jax.vjp(f, arrays, y0, c)
        g = back(ybar)
        lhs = float(jnp.sum(ybar * jv))
        rhs = sum(float(jnp.sum(a * b)) for a, b in zip(jax.tree_util.tree_leaves(g),
                                                         jax.tree_util.tree_leaves(v)))
        assert abs(lhs - rhs) <= ADJOINT_BOUND * abs(lhs), (trial, lhs, rhs)


def jac_y1(field, y0s, cs, jit=True):
    """jax.jacfwd of y(t1) w.r.t. y0, per trajectory (jax.vmap)."""
    fn = jax.vmap(jax.jacfwd(lambda y, c: solve_ys(field, y, c)[0]), in_axes=(0, 0))
    return np.asarray(jax.jit(fn)(y0s, cs) if jit else fn(y0s, cs))


def test_jacfwd_same_bits_at_any_batch_size_and_eager_or_jitted():
    field, y0, c = small_problem(B=7)
    full = jac_y1(field, y0, c)
    assert full.shape == (7, ref.N, ref.N) and np.all(np.isfinite(full))
    for b in (0, 3, 6):
        one = jac_y1(field, y0[b:b + 1], c[b:b + 1])
        np.testing.assert_array_equal(one[0], full[b])
    np.testing.assert_array_equal(jac_y1(field, y0, c, jit=False), full)
    # one direction at a time: the same bits as the columns of jacfwd
    for j in range(ref.N):
        e = jnp.zeros(ref.N).at[j].set(1.0)
        col = jax.jit(jax.vmap(lambda y, cc: jax.jvp(
            lambda yy: solve_ys(field, yy, cc)[0], (y,), (e,))[1]))(y0, c)
        np.testing.assert_array_equal(np.asarray(col), full[:, :, j])


def test_jacfwd_against_jacrev():
    """n forward tangents and n reverse passes give the same Jacobian (to rounding)."""
    field, y0, c = small_problem(B=4)
    fwd = jac_y1(field, y0, c)
    rev = np.asarray(jax.jit(jax.vmap(jax.jacrev(lambda y, cc: solve_ys(field, y, cc)[0])))(
        y0, c))
    np.testing.assert_allclose(fwd, rev, rtol=1e-11, atol=1e-13 * np.max(np.abs(rev)))


def test_forward_mode_adjoint_same_bits():
    field, y0, c = small_problem(B=2)
    f = jax.jit(jax.jacfwd(lambda y, adj: batched(field, y, c, adjoint=adj)),
                static_argnums=1)
    np.testing.assert_array_equal(np.asarray(f(y0, diffrax.ForwardMode())),
                                  np.asarray(f(y0, diffrax.RecursiveCheckpointAdjoint())))


def test_linearize_called_twice_same_bits():
    field, y0, c = small_problem(B=2)
    ys, lin = jax.linearize(lambda y: batched(field, y, c), y0)
    v = jnp.ones_like(y0)
    first = np.asarray(lin(v))
    np.testing.assert_array_equal(np.asarray(lin(v)), first)  # the tape is gone: re-solved
    np.testing.assert_array_equal(np.asarray(jax.jvp(lambda y: batched(field, y, c), (y0,),
                                                     (v,))[1]), first)


def test_float32_close_to_float64():
    field, y0, c = small_problem(B=3)
    j64 = jac_y1(field, y0, c)
    f32 = ref.with_params(field, ref.flat_params(field), jnp.float32)
    j32 = jac_y1(f32, y0.astype(jnp.float32), c.astype(jnp.float32))
    assert j32.dtype == np.float32
    np.testing.assert_allclose(j32, j64, rtol=0, atol=1e-4 * np.max(np.abs(j64)))


@pytest.mark.parametrize("what,make", [
    ("t1", lambda f, y, c: lambda x: solve_ys(f, y, c, t1=x)),
    ("t0", lambda f, y, c: lambda x: solve_ys(f, y, c, t0=x - 2.0)),
    ("dt0", lambda f, y, c: lambda x: solve_ys(f, y, c, dt0=0.025 * x)),
    ("SaveAt", lambda f, y, c: lambda x: solve_ys(f, y, c, ts=jnp.asarray([0.5, 1.0]) * x)),
])
def test_tangents_of_times_refused(what, make):
    field, y0, c = small_problem(B=1)
    fn = make(field, y0[0], c[0])
    with pytest.raises(TypeError, match=what):
        jax.jvp(fn, (jnp.asarray(2.0),), (jnp.asarray(1.0),))


@pytest.mark.parametrize("transform", [
    lambda f: jax.hessian(f), lambda f: jax.jacfwd(jax.jacrev(f)),
    lambda f: jax.jacfwd(jax.jacfwd(f)), lambda f: jax.grad(lambda y: jnp.sum(
        jax.jvp(f, (y,), (jnp.ones_like(y),))[1]))])
def test_second_order_refused_by_name(transform):
    field, y0, c = small_problem(B=1)

    def f(y):
        return jnp.sum(solve_ys(field, y, c[0]))

    with pytest.raises(TypeError, match="second-order"):
        transform(f)(y0[0])


# ------------------------------------------------------------------------------------------------
# clnode.Solution.jvp


def test_solution_jvp_against_vjp_and_shapes():
    m = clnode.MLP.load(REPO / "tests" / "data" / "models" / "grad-g_gelu_c.safetensors")
    rng = np.random.default_rng(5)
    B, N = 3, m.dim
    y0 = rng.uniform(-1, 1, (B, N))
    c = rng.uniform(-1, 1, (B, m.num_inputs))
    sol = clnode.solve(m, y0, t0=0.0, t1=1.5, dt0=0.05, args=c, rtol=1e-6, atol=1e-9,
                       saveat=clnode.SaveAt(ts=[0.3, 0.9, 1.5]), keep_tape=True,
                       precision="fp64")
    ybar = rng.normal(size=sol.ys.shape)
    g = sol.vjp(ybar)
    dp = {k: rng.normal(size=np.shape(v)) for k, v in g.params.items()}
    dy0, dc = rng.normal(size=y0.shape), rng.normal(size=c.shape)
    jv = sol.jvp(dy0=dy0, dargs=dc, dparams=dp)
    assert jv.shape == sol.ys.shape
    lhs = float(np.sum(ybar * jv))
    rhs = float(np.sum(g.y0 * dy0) + np.sum(g.args * dc) +
                sum(np.sum(g.params[k] * dp[k]) for k in dp))
    assert abs(lhs - rhs) <= ADJOINT_BOUND * abs(lhs)
    # D directions at once: the same bits as one at a time
    both = sol.jvp(dy0=np.stack([dy0, 2 * dy0]), dargs=np.stack([dc, 0 * dc]))
    assert both.shape == (2,) + sol.ys.shape
    np.testing.assert_array_equal(both[0], sol.jvp(dy0=dy0, dargs=dc))
    np.testing.assert_array_equal(both[1], sol.jvp(dy0=2 * dy0))
    with pytest.raises(ValueError, match="direction"):
        sol.jvp()
    with pytest.raises(ValueError, match="no parameter"):
        sol.jvp(dparams={"layers.9.weight": 1.0})
    with pytest.raises(ValueError, match="shape"):
        sol.jvp(dy0=np.zeros((B, N + 1)))
    with pytest.raises(ValueError, match="keep_tape"):
        clnode.solve(m, y0, t0=0.0, t1=1.0, dt0=0.1, args=c).jvp(dy0=dy0)


def test_jitted_jacfwd_is_one_custom_call_without_python():
    """The jitted Jacobian is the forward's custom call and one of the tangent handler, and no
    Python callback more than the jitted forward alone has."""
    field, y0, c = small_problem(B=2)

    def one(y, cc):
        return solve_ys(field, y, cc, throw=False)[0]

    fn = jax.jit(jax.vmap(jax.jacfwd(one)))
    text = fn.lower(y0, c).as_text()
    assert text.count("custom_call @clnode_solve_fwd") == 1
    assert text.count("custom_call @clnode_solve_jvp") == 1
    forward = jax.jit(jax.vmap(one)).lower(y0, c).as_text()
    assert text.count("callback") == forward.count("callback")
    before = clnode.jax.tape_stats()
    fn(y0, c)
    after = clnode.jax.tape_stats()
    assert after["jvps"] == before["jvps"] + 1 and after["tangents"] == before["tangents"] + 1
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]


def test_same_bits_on_pocl(pocl):
    """A forward solved on PoCL, its tangent pass where the library has one (the host's: the
    same bits), eagerly, jitted and from numpy."""
    field, y0, c = small_problem(B=3)

    def jac(device, jit):
        fn = jax.vmap(jax.jacfwd(lambda y, cc: diffeqsolve(
            diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 2.0, 0.05, y, args=cc,
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9),
            device=device).ys[0]))
        return np.asarray((jax.jit(fn) if jit else fn)(y0, c))

    host = jac("host", True)
    np.testing.assert_array_equal(jac(pocl, True), host)
    np.testing.assert_array_equal(jac(pocl, False), host)
    m = clnode.MLP.load(REPO / "tests" / "data" / "models" / "grad-g_gelu_c.safetensors")
    kw = dict(t0=0.0, t1=1.5, dt0=0.05, args=np.asarray(c), rtol=1e-6, atol=1e-9,
              keep_tape=True, precision="fp64")
    d = np.random.default_rng(2).normal(size=(2,) + np.shape(y0))
    np.testing.assert_array_equal(clnode.solve(m, np.asarray(y0), device=pocl, **kw).jvp(dy0=d),
                                  clnode.solve(m, np.asarray(y0), **kw).jvp(dy0=d))


@pytest.mark.parametrize("jit", [False, True])
def test_vmap_over_parameter_directions_per_trajectory(jit):
    """jax.vmap over (y0, a direction of the parameters): each trajectory its own direction of the
    parameters, one pass per index (as per-example gradients), the bits of each alone."""
    field, y0, c = small_problem(B=3)
    arrays, static = eqx.partition(field, eqx.is_array)
    rng = np.random.default_rng(11)
    dps = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.normal(size=(3,) + x.shape)), arrays)

    def one(y, cc, dp):
        return jax.jvp(lambda a: solve_ys(eqx.combine(a, static), y, cc), (arrays,), (dp,))[1]

    fn = jax.vmap(one)
    got = np.asarray((jax.jit(fn) if jit else fn)(y0, c, dps))
    for b in range(3):
        dp = jax.tree_util.tree_map(lambda x: x[b], dps)
        np.testing.assert_array_equal(got[b], np.asarray(one(y0[b], c[b], dp)))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)], ids=["y0", "args", "y0-and-args"])
def test_jitted_vmap_of_jacfwd_is_one_tangent_pass_of_every_direction(argnums):
    """jax.jit(jax.vmap(jax.jacfwd)) with respect to y0, args or both, the field's arrays a jitted
    argument that is not differentiated: one tangent pass of the library for the whole batch with
    every column of the Jacobian a direction of it (ndir = the differentiated sizes), not one pass
    per trajectory or per direction; its Jacobian is the eager one, bit for bit."""
    B = 3
    field, y0, c = small_problem(B=B)
    arrays, static = eqx.partition(field, eqx.is_array)

    def one(a, y, cc):
        return solve_ys(eqx.combine(a, static), y, cc)[0]

    jac = jax.vmap(jax.jacfwd(one, argnums=tuple(np.add(argnums, 1).reshape(-1))),
                   in_axes=(None, 0, 0))
    before = clnode.jax.tape_stats()
    got = jax.jit(jac)(arrays, y0, c)
    after = clnode.jax.tape_stats()
    ndir = sum({0: ref.N, 1: ref.K}[a] for a in np.reshape(argnums, -1))
    assert {k: after[k] - before[k] for k in ("tangents", "tangent_dirs", "tangent_trajectories")} \
        == {"tangents": 1, "tangent_dirs": ndir, "tangent_trajectories": B}
    want = jac(arrays, y0, c)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
