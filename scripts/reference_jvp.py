"""diffrax's forward-mode JVPs (``adjoint=diffrax.ForwardMode()``, float64) through the solve,
the oracle of clnode.jax's jax.jvp / jax.jacfwd: ``scripts/make_reference.py --only-jvp`` writes
``tests/data/diffrax/jvp-fp64.npz`` with ``write()``; tests/python/test_jax_jvp.py reads it and
imports this module for the cases' vector fields (the one definition of the forms).

Each case (JVP_CASES) is a vector field of one of the forms clnode.jax takes, ``[s *] mlp(x)``
with x = y, [y, t], [y, args] or [y, t, args] and s absent, a scalar, one value per component or
exp(log_s); an ``eqx.nn.MLP(n_in, 2, 8, 2, softplus, tanh)`` with twice equinox's initial
weights; one method (tsit5, dopri5, bosh3, dopri8, heun, euler), PIDController or
ConstantStepSize, forwards or backwards in time, SaveAt(ts) (dense output), SaveAt(steps),
SaveAt(t0, t1) or SaveAt(t1), solved for one y0 or under jax.vmap over y0, over (y0, args) or
over (y0, t0, t1, dt0). Two random directions per case, each for every differentiable leaf (the
MLP's weights and biases, the scale, y0 and args).

Members (float64; ``<case>__<member>``; CASE_MEMBERS): the problem (params: the field's array
leaves in ``eqx.partition`` order, flat; y0 (B, 2), args (B, 2), t0s, t1s, dt0s (B), ts), the
directions (dparams (D, P), dy0 (D, B, 2), dargs (D, B, 2)), clnode's accepted step ends per
trajectory (``ends``: (B, S) padded with NaN; clnode's own when the data was made), and diffrax's
results:

* ``ys_stepto``, ``jvp_stepto`` (D, B, T, 2): diffrax ForwardMode with StepTo at clnode's step
  ends, trajectory by trajectory: the same steps, so clnode's JVP agrees to rounding;
* ``ys_own``, ``jvp_own``: diffrax ForwardMode with the case's own controller, under jax.vmap as
  the case says; ``counts_own`` (B, 2) its num_steps and num_accepted_steps, ``ends_own`` its
  accepted step ends (SaveAt(steps) only). With ConstantStepSize its step ends are clnode's to
  an ulp (diffrax sums t0 + k dt in its own order); with a PIDController equal counts do not
  make equal step ends (diffrax's lie up to ~1e-7 in time from clnode's here: rounding of the
  controller's arithmetic), which moves the values saved at the step ends (SaveAt(steps)) by as
  much; the tests hold ``jvp_stepto`` to 1e-12, and ``jvp_own`` to 1e-12 but there.

For SaveAt(steps=True) the rows are the accepted steps' (the padding of diffrax's max_steps
slots removed; NaN beyond a trajectory's last)."""
from typing import Any, Dict, List, Tuple

import numpy as np

N, K, WIDTH = 2, 2, 8
MAX_STEPS = 128
NDIR = 2
SEED = 20261207
FORMS = ("y", "yt", "yc", "ytc")
SCALES = {"none": None, "scalar": 0.8, "vector": [0.8, -1.3], "exp": [-0.2, 0.3]}
# (name, form, scale, method, controller, save, vmap, backward); controller: (rtol, atol) or
# None for ConstantStepSize; vmap: "one" (no vmap), "y0", "y0c" (y0 and args), "span" (y0, t0,
# t1, dt0)
JVP_CASES: Tuple[Tuple[Any, ...], ...] = (
    ("tsit5_ts", "y", "none", "tsit5", (1e-6, 1e-9), "ts", "y0", False),
    ("dopri5_steps", "yt", "scalar", "dopri5", (1e-6, 1e-9), "steps", "y0", False),
    ("bosh3_t0t1", "yc", "vector", "bosh3", (1e-5, 1e-8), "t0t1", "y0c", False),
    ("dopri8_t1_one", "ytc", "exp", "dopri8", (1e-7, 1e-10), "t1", "one", False),
    ("tsit5_back_ts", "ytc", "vector", "tsit5", (1e-6, 1e-9), "ts", "y0c", True),
    ("tsit5_span_t0t1", "yt", "none", "tsit5", (1e-6, 1e-9), "t0t1", "span", False),
    ("heun_t1", "ytc", "scalar", "heun", (1e-3, 1e-6), "t1", "y0c", False),
    ("dopri5_back_steps", "y", "exp", "dopri5", (1e-6, 1e-9), "steps", "span", True),
    ("heun_ts_const", "y", "scalar", "heun", None, "ts", "y0", False),
    ("euler_steps_const", "yc", "none", "euler", None, "steps", "y0c", False),
    ("dopri5_back_steps_const", "y", "exp", "dopri5", None, "steps", "span", True),
    ("bosh3_back_t1_const", "y", "vector", "bosh3", None, "t1", "one", True),
    ("dopri8_ts_const", "yc", "exp", "dopri8", None, "ts", "y0c", False),
    ("euler_span_t0t1_const", "yt", "vector", "euler", None, "t0t1", "span", True),
    ("tsit5_ts_const", "ytc", "none", "tsit5", None, "ts", "span", False),
)
CASE_MEMBERS = ("params", "y0", "args", "t0s", "t1s", "dt0s", "ts", "dparams", "dy0", "dargs",
                "ends", "ys_stepto", "jvp_stepto", "ys_own", "jvp_own", "counts_own",
                "ends_own")
BATCH = 3


def _imports():
    import diffrax
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    return diffrax, eqx, jax, jnp


def field_class():
    """The vector field module, y' = [s *] mlp(x) (one definition for the data and the tests)."""
    diffrax, eqx, jax, jnp = _imports()
    global _FIELD
    if _FIELD is not None:
        return _FIELD

    class Field(eqx.Module):
        mlp: eqx.nn.MLP
        scale: Any
        form: str = eqx.field(static=True)
        exp: bool = eqx.field(static=True, default=False)

        def __call__(self, t, y, args):
            x = [y]
            if "t" in self.form:
                x.append(jnp.reshape(t, (1,)).astype(y.dtype))
            if "c" in self.form:
                x.append(args)
            out = self.mlp(jnp.concatenate(x))
            if self.scale is None:
                return out
            return (jnp.exp(self.scale) if self.exp else self.scale) * out

    _FIELD = Field
    return Field


_FIELD: Any = None


def make_field(form: str, scale: str, key: int, dtype: Any = None):
    """The case's field with equinox's initial weights times 2 (dtype float64 by default)."""
    diffrax, eqx, jax, jnp = _imports()
    dtype = dtype or jnp.float64
    n_in = N + ("t" in form) + K * ("c" in form)
    mlp = eqx.nn.MLP(n_in, N, WIDTH, 2, activation=jax.nn.softplus, final_activation=jnp.tanh,
                     key=jax.random.PRNGKey(key), dtype=dtype)
    mlp = jax.tree_util.tree_map(lambda x: 2.0 * x if eqx.is_array(x) else x, mlp)
    s = SCALES[scale]
    return field_class()(mlp, None if s is None else jnp.asarray(s, dtype), form,
                         exp=scale == "exp")


def with_params(field: Any, flat: Any, dtype: Any = None):
    """The field with its array leaves (eqx.partition order) taken from `flat`."""
    diffrax, eqx, jax, jnp = _imports()
    arrays, static = eqx.partition(field, eqx.is_array)
    leaves, tree = jax.tree_util.tree_flatten(arrays)
    out, at = [], 0
    for leaf in leaves:
        n = int(np.size(leaf))
        out.append(jnp.asarray(np.reshape(np.asarray(flat)[at:at + n], np.shape(leaf)),
                               dtype or leaf.dtype))
        at += n
    assert at == np.size(flat), (at, np.size(flat))
    return eqx.combine(jax.tree_util.tree_unflatten(tree, out), static)


def flat_params(field: Any) -> np.ndarray:
    diffrax, eqx, jax, jnp = _imports()
    arrays, _ = eqx.partition(field, eqx.is_array)
    return np.concatenate([np.ravel(np.asarray(x, np.float64))
                           for x in jax.tree_util.tree_leaves(arrays)])


def solver_of(method: str):
    diffrax = _imports()[0]
    return {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "bosh3": diffrax.Bosh3,
            "heun": diffrax.Heun, "dopri8": diffrax.Dopri8, "euler": diffrax.Euler}[method]()


def case_inputs(index: int, case: Tuple[Any, ...]) -> Dict[str, Any]:
    """What case `index` solves (numpy float64): the field's parameters, the initial states,
    inputs, intervals, first steps, save times and the directions."""
    name, form, scale, method, ctrl, save, vmap, backward = case
    rng = np.random.default_rng([SEED, index])
    field = make_field(form, scale, 1000 + index)
    B = 1 if vmap == "one" else BATCH
    y0 = rng.uniform(-1.0, 1.0, (B, N))
    c = rng.uniform(-1.0, 1.0, (B, K))
    if vmap in ("y0", "one"):
        c[:] = c[0]
    t0s, t1s = np.zeros(B), np.full(B, 3.0)
    if vmap == "span":
        t0s = rng.uniform(-0.3, 0.2, B)
        t1s = t0s + rng.uniform(2.5, 3.5, B)
    dt0s = np.full(B, 0.05) if ctrl is not None else np.full(B, 0.1) + 0.02 * (vmap == "span") \
        * np.arange(B)
    if backward:
        t0s, t1s = t1s.copy(), t0s.copy()
        dt0s = -dt0s
    lo, hi = np.max(np.minimum(t0s, t1s)), np.min(np.maximum(t0s, t1s))
    ts = np.linspace(lo, hi, 6)[1:-1] + np.array([0.0, 0.013, -0.021, 0.0])
    if backward:
        ts = ts[::-1].copy()
    params = flat_params(field)
    return {"field": field, "params": params, "y0": y0, "args": c, "t0s": t0s, "t1s": t1s,
            "dt0s": dt0s, "ts": ts, "dparams": rng.normal(0.0, 1.0, (NDIR, params.size)),
            "dy0": rng.normal(0.0, 1.0, (NDIR, B, N)),
            "dargs": rng.normal(0.0, 1.0, (NDIR, B, K)) * ("c" in form)}


def saveat_of(save: str, ts: Any):
    diffrax = _imports()[0]
    return {"ts": lambda: diffrax.SaveAt(ts=ts), "steps": lambda: diffrax.SaveAt(steps=True),
            "t0t1": lambda: diffrax.SaveAt(t0=True, t1=True),
            "t1": lambda: diffrax.SaveAt(t1=True)}[save]()


def solve_fn(case: Tuple[Any, ...], diffeqsolve: Any, static: Any, stepto: bool = False,
             adjoint: Any = None):
    """(params leaves, y0s, args, t0s, t1s, dt0s, ts[, steps]) -> (ys, num_steps, num_accepted,
    ts out) of the batch: jax.vmap as the case says (stepto: trajectory by trajectory never;
    one trajectory's arguments then, StepTo at `steps`)."""
    diffrax, eqx, jax, jnp = _imports()
    name, form, scale, method, ctrl, save, vmap, backward = case
    solver = solver_of(method)

    def one(arrays, y0, c, t0, t1, dt0, ts, steps=None):
        field = eqx.combine(arrays, static)
        if stepto:
            controller, dt = diffrax.StepTo(ts=steps), None
        elif ctrl is None:
            controller, dt = diffrax.ConstantStepSize(), dt0
        else:
            controller, dt = diffrax.PIDController(rtol=ctrl[0], atol=ctrl[1]), dt0
        kw = {} if adjoint is None else {"adjoint": adjoint}
        sol = diffeqsolve(diffrax.ODETerm(field), solver, t0, t1, dt, y0, args=c,
                          saveat=saveat_of(save, ts), stepsize_controller=controller,
                          max_steps=MAX_STEPS, **kw)
        return sol.ys, sol.stats["num_steps"], sol.stats["num_accepted_steps"], sol.ts

    if stepto or vmap == "one":
        return one
    axes = {"y0": (None, 0, None, None, None, None, None),
            "y0c": (None, 0, 0, None, None, None, None),
            "span": (None, 0, None, 0, 0, 0, None)}[vmap]
    return jax.vmap(one, in_axes=axes)


def batch_args(case: Tuple[Any, ...], inp: Dict[str, Any], dtype: Any = None):
    """The positional arguments (y0s, args, t0s, t1s, dt0s, ts) of solve_fn's batch."""
    jnp = _imports()[3]
    dtype = dtype or jnp.float64
    vmap = case[6]
    a = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    if vmap == "one":
        return (a(inp["y0"][0]), a(inp["args"][0]), a(inp["t0s"][0]), a(inp["t1s"][0]),
                a(inp["dt0s"][0]), a(inp["ts"]))
    if vmap == "span":
        return (a(inp["y0"]), a(inp["args"][0]), a(inp["t0s"]), a(inp["t1s"]), a(inp["dt0s"]),
                a(inp["ts"]))
    c = inp["args"] if vmap == "y0c" else inp["args"][0]
    return (a(inp["y0"]), a(c), a(inp["t0s"][0]), a(inp["t1s"][0]), a(inp["dt0s"][0]),
            a(inp["ts"]))


def tangent_args(case: Tuple[Any, ...], inp: Dict[str, Any], d: int, arrays: Any):
    """Direction d's tangents of (params leaves, y0s, args) in solve_fn's batch layout."""
    diffrax, eqx, jax, jnp = _imports()
    leaves, tree = jax.tree_util.tree_flatten(arrays)
    out, at = [], 0
    for leaf in leaves:
        n = int(np.size(leaf))
        out.append(jnp.asarray(np.reshape(inp["dparams"][d, at:at + n], np.shape(leaf)),
                               leaf.dtype))
        at += n
    dp = jax.tree_util.tree_unflatten(tree, out)
    vmap = case[6]
    dy0 = inp["dy0"][d][0] if vmap == "one" else inp["dy0"][d]
    dc = inp["dargs"][d]
    dc = dc[0] if vmap in ("one", "y0", "span") else dc
    if vmap in ("y0", "span"):  # args shared by the batch: one direction (the first row's)
        dc = inp["dargs"][d][0]
    return dp, jnp.asarray(dy0, leaves[0].dtype), jnp.asarray(dc, leaves[0].dtype)


def diffrax_own(case: Tuple[Any, ...], inp: Dict[str, Any]):
    """diffrax ForwardMode with the case's own controller: (ys (B, T, N), jvps (D, B, T, N),
    counts (B, 2), saved times (B, T))."""
    diffrax, eqx, jax, jnp = _imports()
    field = with_params(inp["field"], inp["params"])
    arrays, static = eqx.partition(field, eqx.is_array)
    fn = solve_fn(case, diffrax.diffeqsolve, static, adjoint=diffrax.ForwardMode())
    args = batch_args(case, inp)

    @jax.jit
    def jvp(arrays, y0, c, dp, dy0, dc):
        def f(p, y, cc):
            return fn(p, y, cc, *args[2:])
        return jax.jvp(f, (arrays, y0, c), (dp, dy0, dc))

    outs = []
    for d in range(NDIR):
        (ys, ns, na, tso), dys = jvp(arrays, args[0], args[1],
                                     *tangent_args(case, inp, d, arrays))
        outs.append((ys, dys[0], ns, na, tso))
    lead = (1,) if case[6] == "one" else ()
    ys = np.reshape(np.asarray(outs[0][0]), lead + np.shape(outs[0][0]))
    jv = np.stack([np.reshape(np.asarray(o[1]), ys.shape) for o in outs])
    counts = np.stack([np.reshape(np.asarray(outs[0][2]), -1),
                       np.reshape(np.asarray(outs[0][3]), -1)], axis=1)
    tso = np.reshape(np.asarray(outs[0][4]), ys.shape[:2])
    return ys, jv, counts, tso


def diffrax_stepto(case: Tuple[Any, ...], inp: Dict[str, Any], ends: List[np.ndarray]):
    """diffrax ForwardMode with StepTo at the given step ends (t0 first), trajectory by
    trajectory: (ys (B, T, N), jvps (D, B, T, N))."""
    diffrax, eqx, jax, jnp = _imports()
    field = with_params(inp["field"], inp["params"])
    arrays, static = eqx.partition(field, eqx.is_array)
    fn = solve_fn(case, diffrax.diffeqsolve, static, stepto=True,
                  adjoint=diffrax.ForwardMode())
    B = inp["y0"].shape[0]
    ys_all, jv_all = [], [[] for _ in range(NDIR)]
    for b in range(B):
        c = inp["args"][b] if case[6] == "y0c" else inp["args"][0]
        t0, t1 = inp["t0s"][b], inp["t1s"][b]
        steps = jnp.asarray(ends[b], jnp.float64)
        for d in range(NDIR):
            dp, dy0, dc = tangent_args(case, inp, d, arrays)
            dy0 = dy0 if case[6] == "one" else dy0[b]
            dc = dc[b] if case[6] == "y0c" else dc

            def f(p, y, cc):
                return fn(p, y, cc, t0, t1, None, jnp.asarray(inp["ts"]), steps)
            (ys, _, _, _), dys = jax.jvp(f, (arrays, jnp.asarray(inp["y0"][b]), jnp.asarray(c)),
                                         (dp, dy0, dc))
            if d == 0:
                ys_all.append(np.asarray(ys))
            jv_all[d].append(np.asarray(dys[0]))
    return np.stack(ys_all), np.stack([np.stack(j) for j in jv_all])


def clnode_ends(case: Tuple[Any, ...], inp: Dict[str, Any]) -> List[np.ndarray]:
    """clnode's accepted step ends per trajectory, t0 first (clnode.jax with SaveAt(steps))."""
    diffrax, eqx, jax, jnp = _imports()
    import clnode.jax
    steps_case = case[:5] + ("steps",) + case[6:]
    field = with_params(inp["field"], inp["params"])
    arrays, static = eqx.partition(field, eqx.is_array)
    fn = solve_fn(steps_case, clnode.jax.diffeqsolve, static)
    _, _, _, tso = fn(arrays, *batch_args(case, inp))
    tso = np.reshape(np.asarray(tso), (inp["y0"].shape[0], -1))
    return [np.concatenate([[inp["t0s"][b]], row[np.isfinite(row)]]) for b, row in
            enumerate(tso)]


def _steps_rows(ys: np.ndarray, n: int) -> np.ndarray:
    """SaveAt(steps) values cut to n rows (diffrax pads to max_steps with inf)."""
    out = np.array(ys[..., :n, :], np.float64)
    out[~np.isfinite(out)] = np.nan
    return out


def _padded(rows: List[np.ndarray]) -> np.ndarray:
    n = max(len(r) for r in rows)
    out = np.full((len(rows), n), np.nan)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def write(path: Any) -> None:
    """Every case's members into the .npz at `path` (jax_enable_x64 must be on)."""
    import time
    started = time.time()
    members: Dict[str, np.ndarray] = {}
    for i, case in enumerate(JVP_CASES):
        inp = case_inputs(i, case)
        ends = clnode_ends(case, inp)
        ys_s, jv_s = diffrax_stepto(case, inp, ends)
        ys_o, jv_o, counts, tso = diffrax_own(case, inp)
        if case[5] == "steps":
            n = max(len(e) for e in ends) - 1
            ys_s, jv_s = _steps_rows(ys_s, n), _steps_rows(jv_s, n)
            n_o = int(np.max(counts[:, 1]))
            ys_o, jv_o = _steps_rows(ys_o, n_o), _steps_rows(jv_o, n_o)
        ends_own = _padded([np.concatenate([[inp["t0s"][b]], r[np.isfinite(r)]]) for b, r in
                            enumerate(tso)]) if case[5] == "steps" else np.zeros((0, 0))
        vals = {"ends": _padded(ends), "ys_stepto": ys_s, "jvp_stepto": jv_s, "ys_own": ys_o,
                "jvp_own": jv_o, "counts_own": counts.astype(np.float64),
                "ends_own": ends_own}
        for key in CASE_MEMBERS:
            members[f"{case[0]}__{key}"] = np.asarray(vals[key] if key in vals else inp[key],
                                                      np.float64)
        same = [len(e) - 1 for e in ends] == [int(x) for x in counts[:, 1]]
        print(f"[jvp] {case[0]:26s} clnode accepted={[len(e) - 1 for e in ends]} "
              f"diffrax={[int(x) for x in counts[:, 1]]}{'' if same else ' (differ)'} "
              f"({time.time() - started:.0f}s)", flush=True)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **members)
