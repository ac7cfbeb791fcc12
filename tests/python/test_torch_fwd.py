"""Forward-mode AD through clnode.torch (torch.autograd.forward_ad, torch.func.jvp,
torch.func.jacfwd): one solve keeping its tape, then the library's tangent pass from it.

Oracles: the tangents equal, bit for bit, clnode.jax's jax.jvp of the same problem (y0, args and
parameter directions; odeint and solve_ivp; float32 and float64; shared and per-sample save
times); in float64 within 1e-6 of central finite differences of clnode.torch's own odeint and
solve_ivp at constant steps (the controller's factors held at 1, every step accepted);
torch.func.jacfwd equal to the Jacobian of reverse mode (torch.autograd.grad per output) within
1e-12; vmap of jvp equal to a loop bit for bit; one solve and one tangent pass per call (jacfwd's
columns the directions of that one pass); opcheck of clnode::solve_jvp. Refused by name: a
derivative of the tangent (reverse-over-forward, forward-over-reverse, forward-over-forward),
tangents of the times, float16 and bfloat16."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.autograd.forward_ad as fwad  # noqa: E402
from torch import nn  # noqa: E402

import clnode  # noqa: E402
import clnode.torch as ct  # noqa: E402
from clnode.torch import Refusal, _call, _field, _op  # noqa: E402

F64 = torch.float64


class Field(nn.Module):
    """s * net(x), x = y or [y, args]; s one value per component."""

    def __init__(self, form="scale", k=2):
        super().__init__()
        self.form = form
        self.net = nn.Sequential(nn.Linear(2 + (k if form == "args" else 0), 6), nn.Softplus(),
                                 nn.Linear(6, 6), nn.Softplus(), nn.Linear(6, 2), nn.Tanh())
        self.out_scale = nn.Parameter(torch.tensor([0.8, 1.1]))

    def forward(self, t, y, args=None):
        x = torch.cat([y, args], dim=-1) if self.form == "args" else y
        return self.out_scale * self.net(x)


def _make(form="scale", dtype=F64, seed=0):
    torch.manual_seed(seed)
    return Field(form).to(dtype)


def rms_norm(x):  # the name of torchode's norm, which clnode.torch checks
    return x.square().mean(dim=-1).sqrt()


class IntegralController:
    """torchode's IntegralController as clnode.torch reads it (its fields)."""

    def __init__(self, tol, factor_min=0.2, factor_max=10.0):
        self.atol = self.rtol = tol
        self.safety, self.factor_min, self.factor_max = 0.9, factor_min, factor_max
        self.dt_min = self.dt_max = None
        self.norm = rms_norm


def _times(B, T=7, dtype=F64):
    """Per-sample save times (B, T), each sample its own interval."""
    return torch.stack([torch.linspace(0.1 * b, 1.2 + 0.3 * b, T, dtype=dtype)
                        for b in range(B)])


def _run(layout, f, tol=1e-6, dt0=0.01, **ctrl):
    """y, args -> ys (B, T, N): odeint with the shared t (layout "shared") or solve_ivp with
    per-sample t_eval ("per_sample"), the first step dt0."""
    def run(y, args=None):
        B = y.shape[0]
        if layout == "shared":
            t = torch.linspace(0.0, 1.5, 7, dtype=y.dtype)
            opts = dict(first_step=dt0)
            if ctrl:
                opts.update(ifactor=ctrl["factor_max"], dfactor=ctrl["factor_min"])
            return ct.odeint(f, y, t, rtol=tol, atol=tol, method="tsit5",
                             options=opts).transpose(0, 1)
        return ct.solve_ivp(f, y, _times(B, dtype=y.dtype),
                            controller=IntegralController(tol, **ctrl), dt0=torch.full((B,), dt0, dtype=y.dtype), args=args).ys
    return run


def _params(f):
    return {n: p.detach() for n, p in f.named_parameters()}


def _with_params(f, run):
    """run as a function of the module's parameters (a dict), y0 and args."""
    def g(ps, y, args=None):
        with torch.nn.utils.stateless._reparametrize_module(f, ps):
            return run(y, args)
    return g


def _jvp(run, P, y0, args, tans):
    """torch.func.jvp of run(P, y0, args) (args None: not an input)."""
    if args is None:
        return torch.func.jvp(lambda p, y: run(p, y), (P, y0), tans[:2])
    return torch.func.jvp(run, (P, y0, args), tans)


def _directions(f, y0, args, seed=5):
    g = torch.Generator().manual_seed(seed)
    dy = torch.randn(y0.shape, generator=g, dtype=F64).to(y0.dtype)
    da = None if args is None else torch.randn(args.shape, generator=g, dtype=F64).to(y0.dtype)
    dp = {n: torch.randn(p.shape, generator=g, dtype=F64).to(p.dtype)
          for n, p in f.named_parameters()}
    return dy, da, dp


def _jax_jvp(f, y0, args, times, dirs, which, tol, dt0):
    """clnode.jax's jax.jvp of the same problem: ys and its tangent (B, T, N) as numpy, the
    directions `which` of dirs = (dy0, dargs, dparams) (the others zero)."""
    jax = pytest.importorskip("jax")
    eqx = pytest.importorskip("equinox")
    diffrax = pytest.importorskip("diffrax")
    import jax.numpy as jnp
    from clnode.jax import diffeqsolve

    dtype = jnp.float32 if y0.dtype == torch.float32 else jnp.float64
    names = [n for n, _ in f.named_parameters()]
    lins = [0, 2, 4]
    n_in = f.net[0].in_features

    def arr(x):
        return jnp.asarray(x.detach().numpy(), dtype)

    class Func(eqx.Module):
        out_scale: jax.Array
        mlp: eqx.nn.MLP
        form: str = eqx.field(static=True)

        def __call__(self, t, y, a):
            x = jnp.concatenate([y, a]) if self.form == "args" else y
            return self.out_scale * self.mlp(x)

    def build(P):
        mlp = eqx.nn.MLP(n_in, 2, 6, 2, activation=jax.nn.softplus, final_activation=jnp.tanh,
                         key=jax.random.PRNGKey(0), dtype=dtype)
        for i, lin in enumerate(lins):
            mlp = eqx.tree_at(lambda m, i=i: (m.layers[i].weight, m.layers[i].bias), mlp,
                              (P[f"net.{lin}.weight"], P[f"net.{lin}.bias"]))
        return Func(P["out_scale"], mlp, f.form)

    ts = jnp.asarray(times.numpy(), dtype)

    def run(P, y, a):
        func = build(P)

        def one(y, a, t):
            return diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), t0=t[0], t1=t[-1],
                               dt0=dt0, y0=y, args=a, saveat=diffrax.SaveAt(ts=t),
                               stepsize_controller=diffrax.PIDController(rtol=tol,
                                                                         atol=tol)).ys
        return jax.vmap(one)(y, a, ts)

    P = {n: arr(p) for n, p in f.named_parameters()}
    dy, da, dp = dirs
    zero = {n: jnp.zeros_like(P[n]) for n in names}
    a = None if args is None else arr(args)
    tans = (dict(zero, **{n: arr(v) for n, v in dp.items()}) if "params" in which else zero,
            arr(dy) if "y0" in which else jnp.zeros_like(arr(y0)),
            None if a is None else arr(da) if "args" in which else jnp.zeros_like(a))
    ys, jv = jax.jvp(run, (P, arr(y0), a), tans)
    return np.asarray(ys), np.asarray(jv)


@pytest.mark.parametrize("layout,dtype,form", [
    ("shared", F64, "scale"),
    ("shared", torch.float32, "scale"),
    ("per_sample", F64, "args"),
    ("per_sample", torch.float32, "args"),
])
def test_tangents_are_clnode_jax_bit_for_bit(layout, dtype, form):
    f = _make(form, dtype)
    torch.manual_seed(3)
    B = 4
    y0 = torch.randn(B, 2, dtype=dtype)
    args = torch.randn(B, 2, dtype=dtype) if form == "args" else None
    tol = 1e-6 if dtype == F64 else 1e-4
    run = _with_params(f, _run(layout, f, tol=tol))
    P = _params(f)
    dy, da, dp = _directions(f, y0, args)
    # the save times as the run makes them (in y0's dtype)
    times = torch.linspace(0.0, 1.5, 7, dtype=dtype).expand(B, 7) if layout == "shared" \
        else _times(B, dtype=dtype)
    kinds = [("y0",), ("params",), ("y0", "params")] + ([("args",)] if args is not None else [])
    for which in kinds:
        tans = ({n: v if "params" in which else torch.zeros_like(v) for n, v in dp.items()},
                dy if "y0" in which else torch.zeros_like(y0),
                None if args is None else da if "args" in which else torch.zeros_like(args))
        ys, ys_dot = _jvp(run, P, y0, args, tans)
        want_ys, want = _jax_jvp(f, y0, args, times, (dy, da, dp), which, tol, 0.01)
        assert ys_dot.dtype == dtype
        np.testing.assert_array_equal(ys.numpy(), want_ys)
        np.testing.assert_array_equal(ys_dot.numpy(), want, err_msg=str(which))
    # torch.autograd.forward_ad's dual tensors: the same bits as torch.func.jvp's
    with fwad.dual_level():
        out = run(P, fwad.make_dual(y0, dy), args)
        got = fwad.unpack_dual(out).tangent
    np.testing.assert_array_equal(got.numpy(), torch.func.jvp(
        lambda y: run(P, y, args), (y0,), (dy,))[1].numpy())


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_tangents_are_solution_jvp_bit_for_bit(dtype):
    """solve_ivp with per-sample save times and args: ys and its tangent in y0, args and
    parameter directions the bits of clnode.solve(keep_tape=True) and Solution.jvp."""
    f = _make("args", dtype)
    torch.manual_seed(3)
    B = 4
    y0, args = torch.randn(B, 2, dtype=dtype), torch.randn(B, 2, dtype=dtype)
    tol = 1e-6 if dtype == F64 else 1e-4
    run = _with_params(f, _run("per_sample", f, tol=tol))
    P = _params(f)
    dy, da, dp = _directions(f, y0, args)
    te = _times(B, dtype=dtype).double().numpy()
    sol = clnode.solve(clnode.from_torch(f, inputs=2), y0.numpy(), t0=te[:, 0], t1=te[:, -1],
                       dt0=np.full(B, float(np.asarray(0.01, y0.numpy().dtype))),
                       args=args.numpy(), saveat=clnode.SaveAt(ts=te), rtol=tol, atol=tol,
                       method="tsit5", pcoeff=0.0, icoeff=1.0, dcoeff=0.0,
                       precision="fp64" if dtype == F64 else "fp32", keep_tape=True)
    names = {"out_scale": "out_scale"}
    for i, lin in enumerate([0, 2, 4]):
        for part in ("weight", "bias"):
            names[f"net.{lin}.{part}"] = f"layers.{i}.{part}"
    zp = {n: torch.zeros_like(v) for n, v in dp.items()}
    for d_y, d_a, d_p in [(dy, None, None), (None, da, None), (None, None, dp), (dy, da, dp)]:
        ys, jv = _jvp(run, P, y0, args, (zp if d_p is None else d_p,
                                         torch.zeros_like(y0) if d_y is None else d_y,
                                         torch.zeros_like(args) if d_a is None else d_a))
        np.testing.assert_array_equal(ys.numpy(), sol.ys)
        want = sol.jvp(dy0=None if d_y is None else d_y.double().numpy(),
                       dargs=None if d_a is None else d_a.double().numpy(),
                       dparams=None if d_p is None else {
                           names[n]: v.double().numpy() for n, v in d_p.items()})
        assert jv.dtype == dtype
        np.testing.assert_array_equal(jv.numpy(), want)


@pytest.mark.parametrize("layout", ["shared", "per_sample"])
def test_tangents_match_finite_differences_at_constant_steps(layout):
    """float64, the step sizes held (the controller's factors 1: every step of the first step's
    size, all accepted): the tangent within 1e-6 of central differences of clnode.torch's own
    solve, in y0, args and parameter directions."""
    form = "args" if layout == "per_sample" else "scale"
    f = _make(form)
    torch.manual_seed(4)
    y0 = torch.randn(3, 2, dtype=F64)
    args = torch.randn(3, 2, dtype=F64) if form == "args" else None
    run = _with_params(f, _run(layout, f, tol=1e-2, dt0=0.05, factor_min=1.0,
                               factor_max=1.0))
    P = _params(f)
    dy, da, dp = _directions(f, y0, args)
    cases = [(dy, None, None), (None, None, dp)] + ([(None, da, None)] if args is not None
                                                     else [])
    for d_y, d_a, d_p in cases:
        tans = ({n: torch.zeros_like(v) for n, v in P.items()} if d_p is None else d_p,
                torch.zeros_like(y0) if d_y is None else d_y,
                None if args is None else torch.zeros_like(args) if d_a is None else d_a)
        _, jv = _jvp(run, P, y0, args, tans)
        eps = 1e-5

        def at(h):
            return run({n: P[n] + h * tans[0][n] for n in P}, y0 + h * tans[1],
                       None if args is None else args + h * tans[2])
        fd = (at(eps) - at(-eps)) / (2 * eps)
        err = float((jv - fd).abs().max() / fd.abs().max())
        assert err <= 1e-6, err
        assert float(fd.abs().max()) > 1e-3  # a direction that moves ys


def test_jacfwd_is_reverse_mode_jacobian():
    """torch.func.jacfwd in y0 and in the parameters against the Jacobian built row by row
    from reverse mode (torch.autograd.grad per output), float64, adaptive steps: within 1e-12."""
    f = _make("scale")
    torch.manual_seed(6)
    y0 = torch.randn(3, 2, dtype=F64)
    run = _run("shared", f, tol=1e-8)
    J = torch.func.jacfwd(run)(y0)  # (B, T, N, B, N)
    y = y0.clone().requires_grad_()
    ys = run(y)
    flat = ys.reshape(-1)
    params = list(f.parameters())
    rows = [torch.autograd.grad(flat[i], [y] + params, retain_graph=True)
            for i in range(flat.numel())]
    Jr = torch.stack([r[0] for r in rows]).reshape(J.shape)
    assert float((J - Jr).abs().max().detach() / Jr.abs().max()) <= 1e-12
    Jp = torch.func.jacfwd(_with_params(f, run))(_params(f), y0)
    for k, (n, p) in enumerate(f.named_parameters()):
        want = torch.stack([r[1 + k] for r in rows]).reshape(ys.shape + p.shape)
        assert float((Jp[n] - want).abs().max() / want.abs().max()) <= 1e-12, n


def test_one_solve_and_one_tangent_pass(monkeypatch):
    """A forward-mode call solves once (keeping its tape) and runs one tangent pass; jacfwd's
    B x N columns are the directions of that one pass."""
    f = _make("scale")
    y0 = torch.randn(4, 2, dtype=F64)
    run = _run("shared", f)
    solves, passes = [], []
    real_run, real_import = clnode._solve._run, clnode._clnode.tape_import

    def counting_run(context, device, model, y, opts, extra):
        solves.append(bool(opts.get("keep_tape", False)))
        return real_run(context, device, model, y, opts, extra)

    class Counted:
        def __init__(self, tape):
            self.tape = tape

        def tangent(self, ctx, ndir, *rest):
            passes.append(ndir)
            return self.tape.tangent(ctx, ndir, *rest)

    monkeypatch.setattr(clnode._solve, "_run", counting_run)
    monkeypatch.setattr(clnode._clnode, "tape_import", lambda *a: Counted(real_import(*a)))
    torch.func.jvp(run, (y0,), (torch.ones_like(y0),))
    assert solves == [True] and passes == [1]
    solves.clear()
    passes.clear()
    J = torch.func.jacfwd(run)(y0)
    assert solves == [True] and passes == [8]
    assert J.shape == (4, 7, 2, 4, 2)
    # per-trajectory Jacobians: vmap of jacfwd of one trajectory, one solve of the batch and one
    # pass of N directions, jacfwd's diagonal blocks bit for bit
    solves.clear()
    passes.clear()
    one = torch.func.vmap(torch.func.jacfwd(lambda y: run(y[None])[0]))(y0)  # (B, T, N, N)
    assert solves == [True] and passes == [2]
    assert torch.equal(one, torch.stack([J[b, :, :, b] for b in range(4)]))


def test_vmap_of_jvp_is_a_loop_bit_for_bit():
    """vmap over the forward (its slices joined into one solve) of a jvp: the tangents of each
    slice the loop's bits, with y0 directions and with per-slice parameter directions."""
    f = _make("scale")
    run = _with_params(f, _run("shared", f))
    P = _params(f)
    torch.manual_seed(7)
    Y, DY = torch.randn(3, 4, 2, dtype=F64), torch.randn(3, 4, 2, dtype=F64)
    DP = {n: torch.randn((3,) + p.shape, dtype=F64) for n, p in P.items()}

    def one(y, dy, dp):
        return torch.func.jvp(lambda ps, yy: run(ps, yy), (P, y), (dp, dy))[1]
    shared = {n: v[0] for n, v in DP.items()}
    got = torch.func.vmap(one, in_dims=(0, 0, None))(Y, DY, shared)
    assert torch.equal(got, torch.stack([one(Y[i], DY[i], shared) for i in range(3)]))
    got = torch.func.vmap(one)(Y, DY, DP)
    assert torch.equal(got, torch.stack([one(Y[i], DY[i], {n: v[i] for n, v in DP.items()})
                                         for i in range(3)]))
    # mapped parameters (a solve per slice, their tapes stacked): a tangent pass per slice
    PS = {n: torch.stack([p * (1 + 0.1 * i) for i in range(3)]) for n, p in P.items()}

    def per(ps, y, dy, dp):
        return torch.func.jvp(lambda q, yy: run(q, yy), (ps, y), (dp, dy))[1]
    got = torch.func.vmap(per)(PS, Y, DY, DP)
    assert torch.equal(got, torch.stack([per({n: v[i] for n, v in PS.items()}, Y[i], DY[i],
                                             {n: v[i] for n, v in DP.items()})
                                         for i in range(3)]))


def test_opcheck_of_solve_jvp():
    from clnode.torch import _forward
    f = _make("args")
    fld = _field.recognise(f, 3, 2, 2)
    spec = _call._spec(fld, fld.has_bias(f), "tsit5", (("atol", 1e-8), ("rtol", 1e-6)), True,
                       tangent=True)
    params = [p.detach() for _, p in fld.parameters(f)]
    y0, args = torch.randn(4, 2, dtype=F64), torch.randn(4, 2, dtype=F64)
    times = _call.times_tensor(0.0, 1.0, None, 4)
    ys, _, _, tape = _op.solve_op(y0, args, params, times, torch.linspace(0, 1, 5, dtype=F64),
                                  spec)
    P = sum(p.numel() for p in params)
    for dy, da, dp in [(torch.randn(2, 4, 2, dtype=F64), None, None),
                       (None, torch.randn(1, 4, 2, dtype=F64), torch.randn(1, P, dtype=F64)),
                       (torch.randn(3, 4, 2, dtype=F64), torch.randn(3, 4, 2, dtype=F64),
                        torch.randn(3, P, dtype=F64))]:
        torch.library.opcheck(_forward.solve_jvp_op, (tape, ys, params, dy, da, dp, spec))


def _setup():
    f = _make("scale")
    torch.manual_seed(8)
    y0 = torch.randn(3, 2, dtype=F64)
    t = torch.linspace(0, 1, 4, dtype=F64)
    return f, y0, t, lambda y: ct.odeint(f, y, t, rtol=1e-6, atol=1e-8)


SECOND = "a derivative of a forward-mode tangent through clnode.torch is not supported"


def test_second_order_refused():
    f, y0, t, run = _setup()
    v = torch.ones_like(y0)
    # reverse-over-forward: a backward through the tangent
    with fwad.dual_level():
        tan = fwad.unpack_dual(run(fwad.make_dual(y0, v))).tangent
        assert tan.requires_grad  # the module's parameters require grad
        with pytest.raises(Refusal, match=SECOND + r" \(a backward through the tangent"):
            tan.square().sum().backward()
    with pytest.raises(Refusal, match=SECOND + r" \(torch\.func\.jacrev"):
        torch.func.jacrev(torch.func.jacfwd(run))(y0)
    # forward-over-reverse
    with pytest.raises(Refusal, match=SECOND + r" \(torch\.func\.jacrev"):
        torch.func.jacfwd(torch.func.jacrev(lambda y: run(y).sum()))(y0)
    with pytest.raises(Refusal, match=SECOND):
        torch.func.hessian(lambda y: run(y).sum())(y0)
    for loss in (lambda ys: ys.square().sum(), lambda ys: (3 * ys).sum()):
        with fwad.dual_level():
            y = y0.clone().requires_grad_()
            ys = run(fwad.make_dual(y, v))
            with pytest.raises(Refusal, match="forward-mode tangent of a gradient through "
                                              r"clnode\.torch is not supported \(forward-over"):
                torch.autograd.grad(loss(ys), y, create_graph=True)
    # forward-over-forward
    with pytest.raises(Refusal, match=SECOND + r" \(torch\.func\.jvp or jacfwd of jvp"):
        torch.func.jvp(lambda y: torch.func.jvp(run, (y,), (v,))[1], (y0,), (v,))
    # the primal's reverse mode under a dual level is first order: computed
    with fwad.dual_level():
        y = y0.clone().requires_grad_()
        ys = run(fwad.make_dual(y, v))
        (g,) = torch.autograd.grad(fwad.unpack_dual(ys).primal.sum(), y)
    y = y0.clone().requires_grad_()
    assert torch.equal(g, torch.autograd.grad(run(y).sum(), y)[0])


def test_time_tangents_and_half_precision_refused():
    f, y0, t, run = _setup()
    times = "a forward-mode tangent of the times"
    with pytest.raises(Refusal, match=times):
        torch.func.jvp(lambda tt: ct.odeint(f, y0, tt), (t,), (torch.ones_like(t),))
    te = _times(3, 4)
    ctrl = IntegralController(1e-6)
    with pytest.raises(Refusal, match=times):
        torch.func.jvp(lambda tt: ct.solve_ivp(f, y0, tt, controller=ctrl).ys, (te,),
                       (torch.ones_like(te),))
    t0 = torch.zeros(3, dtype=F64)
    with pytest.raises(Refusal, match=times):
        torch.func.jvp(lambda a: ct.solve_ivp(f, y0, te, t_span=(a, te[:, -1]),
                                              controller=ctrl).ys, (t0,), (torch.ones_like(t0),))
    dt = torch.full((3,), 0.01, dtype=F64)
    with pytest.raises(Refusal, match=times):
        torch.func.jvp(lambda d: ct.solve_ivp(f, y0, te, dt0=d, controller=ctrl).ys, (dt,),
                       (torch.ones_like(dt),))
    with fwad.dual_level():
        with pytest.raises(Refusal, match=times):
            ct.odeint(f, y0, fwad.make_dual(t, torch.ones_like(t)))
    for dtype in (torch.float16, torch.bfloat16):
        with pytest.raises(Refusal, match=f"y0 is {dtype}"):
            torch.func.jvp(run, (y0.to(dtype),), (y0.to(dtype),))
