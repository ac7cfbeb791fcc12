"""Gradients through clnode.torch: torch.autograd.gradcheck in float64 on a matrix of forms,
methods and save layouts (adaptive steps); torch.library.opcheck of the op; a compiled loss
(torch.compile(fullgraph=True)) giving eager's bits; the vmap rule (a loop's bits); the
gradient equal bit for bit to clnode.solve + Solution.vjp's and to clnode.jax's for the same
problem; within 1e-5 of torch's autograd through torchode (steps not differentiated) at
rtol = atol = 1e-8; one solve per training step; the refusals (gradients w.r.t. t, torch.func's
reverse-mode transforms; forward mode: test_torch_fwd.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import clnode  # noqa: E402
import clnode.torch as ct  # noqa: E402
from clnode.torch import Refusal, _call, _field, _op  # noqa: E402

F64 = torch.float64


class Field(nn.Module):
    """s * net(x), x = y, [y, t] or [y, args] (the forms clnode.torch takes)."""

    def __init__(self, form="scale", act=nn.Softplus, width=6, k=2):
        super().__init__()
        n_in = 2 + (form == "time") + (k if form == "args" else 0)
        self.form = form
        self.net = nn.Sequential(nn.Linear(n_in, width), act(), nn.Linear(width, width), act(),
                                 nn.Linear(width, 2), nn.Tanh())
        self.out_scale = nn.Parameter(torch.tensor(0.8))

    def forward(self, t, y, args=None):
        if self.form == "time":
            x = torch.cat([y, t.reshape(-1, 1).expand(y.shape[0], 1)], dim=-1)
        elif self.form == "args":
            x = torch.cat([y, args], dim=-1)
        else:
            x = y
        return self.out_scale * self.net(x)


def _field_of(form, seed=0, **kw):
    torch.manual_seed(seed)
    return Field(form, **kw).double()


class _Loss(nn.Module):
    """The solve as a module of its field, so that functional_call feeds gradcheck's parameter
    copies through it."""

    def __init__(self, f, run):
        super().__init__()
        self.f, self.run = f, run

    def forward(self, y0, args):
        return self.run(self.f, y0, args)


def _gradcheck(f, run, y0, args=None):
    loss = _Loss(f, run)
    names = [f"f.{n}" for n, _ in f.named_parameters()]
    ps = [p.detach().clone().requires_grad_() for p in f.parameters()]
    y = y0.detach().clone().requires_grad_()
    a = None if args is None else args.detach().clone().requires_grad_()

    def fn(y, a, *ps):
        return torch.func.functional_call(loss, dict(zip(names, ps)), (y, a))
    assert torch.autograd.gradcheck(fn, (y, a, *ps), eps=1e-6, atol=1e-5, rtol=1e-3)


T_UP = torch.linspace(0.0, 1.5, 6, dtype=F64)


def _odeint(method, t=T_UP, rtol=1e-8):
    return lambda f, y0, args: ct.odeint(f, y0, t, rtol=rtol, atol=rtol, method=method)


def _ivp(method, rtol=1e-8):
    def run(f, y0, args):
        B = y0.shape[0]
        te = torch.stack([torch.linspace(0.1 * b, 1.0 + 0.2 * b, 5, dtype=F64)
                          for b in range(B)])
        ctrl = IntegralController(rtol)
        return ct.solve_ivp(f, y0, te, method=method, controller=ctrl,
                            args=args).ys
    return run


def rms_norm(x):  # the name of torchode's norm, which clnode.torch checks
    return x.square().mean(dim=-1).sqrt()


class IntegralController:
    """torchode's IntegralController as clnode.torch reads it (its fields), so that these tests
    need no torchode."""

    def __init__(self, tol):
        self.atol = self.rtol = tol
        self.safety, self.factor_min, self.factor_max = 0.9, 0.2, 10.0
        self.dt_min = self.dt_max = None
        self.norm = rms_norm


@pytest.mark.parametrize("form,method,layout", [
    ("scale", "tsit5", "shared"),
    ("scale", "dopri5", "shared"),
    ("time", "bosh3", "shared"),
    ("time", "dopri8", "backwards"),
    ("plain", "adaptive_heun", "shared"),
    ("scale", "tsit5", "per_sample"),
    ("args", "dopri5", "per_sample"),
    ("time", "tsit5", "per_sample"),
])
def test_gradcheck(form, method, layout):
    f = _field_of(form)
    torch.manual_seed(1)
    y0 = torch.randn(3, 2, dtype=F64)
    args = torch.randn(3, 2, dtype=F64) if form == "args" else None
    rtol = 1e-5 if method == "adaptive_heun" else 1e-8
    if layout == "shared":
        run = _odeint(method, rtol=rtol)
    elif layout == "backwards":
        run = _odeint(method, t=T_UP.flip(0), rtol=rtol)
    else:
        run = _ivp({"adaptive_heun": "heun"}.get(method, method), rtol=rtol)
    _gradcheck(f, run, y0, args)


def _spec(f, method="tsit5", keep=True, n_args=2, k=0):
    fld = _field.recognise(f, n_args, 2, k)
    return fld, _call._spec(fld, fld.has_bias(f), method,
                            (("atol", 1e-8), ("rtol", 1e-6)), keep)


@pytest.mark.parametrize("form", ["scale", "args"])
def test_opcheck(form):
    f = _field_of(form)
    k = 2 if form == "args" else 0
    fld, spec = _spec(f, n_args=3 if k else 2, k=k)
    params = [p.detach().clone().requires_grad_() for _, p in fld.parameters(f)]
    y0 = torch.randn(4, 2, dtype=F64, requires_grad=True)
    args = torch.randn(4, 2, dtype=F64, requires_grad=True) if k else None
    times = _call.times_tensor(0.0, 1.0, None, 4)
    for save in (torch.linspace(0, 1, 5, dtype=F64),
                 torch.linspace(0, 1, 5, dtype=F64).expand(4, 5).contiguous()):
        torch.library.opcheck(_op.solve_op, (y0, args, params, times, save, spec))
        # the backward op, from the forward's tape (a uint8 tensor of data-dependent size)
        ys, _, _, tape = _op.solve_op(y0, args, params, times, save, spec)
        w = torch.randn(ys.shape, dtype=F64)
        torch.library.opcheck(_op.solve_vjp_op, (w, tape, [p.detach() for p in params], spec))


def test_the_tape_is_an_output_and_its_bytes_are_checked():
    """The forward's tape is its fourth output (the library's tape bytes, uint8, of a size known
    once solved; empty when no gradient is wanted); the backward op takes it, and refuses bytes
    changed since by name."""
    f = _field_of("scale")
    fld, spec = _spec(f)
    params = [p.detach().clone().requires_grad_() for _, p in fld.parameters(f)]
    y0 = torch.randn(4, 2, dtype=F64, requires_grad=True)
    times = _call.times_tensor(0.0, 1.0, None, 4)
    save = torch.linspace(0, 1, 5, dtype=F64)
    ys, stats, tinfo, tape = _op.solve_op(y0, None, params, times, save, spec)
    assert tape.dtype == torch.uint8 and tape.dim() == 1 and not tape.requires_grad
    assert bytes(tape[:8].tolist()) == b"CLNTAPE\0"
    _, spec_no = _spec(f, keep=False)
    assert _op.solve_op(y0, None, params, times, save, spec_no)[3].numel() == 0
    # it holds what the reverse pass reads, not the saved values (ys, the first output): 45 more
    # save times shared by the batch add those times (8 bytes each in float64), not a point
    # (1 + 2 float64) per trajectory and time as the layout before
    many = torch.linspace(0, 1, 50, dtype=F64)
    assert _op.solve_op(y0, None, params, times, many, spec)[3].numel() <= tape.numel() + 46 * 8
    w = torch.randn(ys.shape, dtype=F64)
    g = torch.autograd.grad((ys * w).sum(), [y0, *params])
    direct = _op.solve_vjp_op(w, tape, [p.detach() for p in params], spec)
    assert torch.equal(direct[0], g[0])
    for a, b in zip(direct[2:], g[1:]):
        assert torch.equal(a, b)
    bad = tape.clone()
    bad[-3] ^= 1
    with pytest.raises(ValueError, match="checksum"):
        _op.solve_vjp_op(w, bad, [p.detach() for p in params], spec)
    moved = [p.detach() + 1e-9 for p in params]
    with pytest.raises(ValueError, match="not the one the tape was solved with"):
        _op.solve_vjp_op(w, tape, moved, spec)


def _loss(f, y0, t, w):
    ys = ct.odeint(f, y0, t, rtol=1e-5, atol=1e-7, method="tsit5")
    return (ys * w).sum(), ys


def test_compiled_loss_gives_eager_bits():
    """torch.compile(fullgraph=True) (inductor) of a loss calling odeint, backward() outside
    it: the solve's output and every gradient are eager's bits (the loss's own sum is
    inductor's, equal to rounding)."""
    f = _field_of("scale")
    y0 = torch.randn(8, 2, dtype=F64)
    t = torch.linspace(0, 2, 10, dtype=F64)
    w = torch.randn(10, 8, 2, dtype=F64)
    eager, ys = _loss(f, y0, t, w)
    eager.backward()
    want = [p.grad.clone() for p in f.parameters()]
    f.zero_grad()
    got, ys_c = torch.compile(_loss, fullgraph=True)(f, y0, t, w)
    got.backward()
    assert torch.equal(ys_c, ys)
    torch.testing.assert_close(got, eager, rtol=1e-14, atol=0)
    for g, w in zip([p.grad for p in f.parameters()], want):
        assert torch.equal(g, w)


def test_vmap_rule_is_a_loop_bit_for_bit():
    f = _field_of("time")
    Y = torch.randn(3, 4, 2, dtype=F64)
    t = torch.linspace(0, 1, 5, dtype=F64)

    def run(y):
        return ct.odeint(f, y, t, rtol=1e-6, atol=1e-8)
    v = torch.func.vmap(run)(Y)
    assert v.shape == (3, 5, 4, 2)
    assert torch.equal(v, torch.stack([run(y) for y in Y]))
    # mapped save times and intervals, each slice its own rows (solve_ivp's (B, T))
    TE = torch.stack([torch.stack([torch.linspace(0.1 * v + 0.05 * b, 1.0 + 0.3 * v, 5,
                                                  dtype=F64) for b in range(4)])
                      for v in range(3)])
    ctrl = IntegralController(1e-6)

    def run_ivp(y, te):
        return ct.solve_ivp(f, y, te, controller=ctrl).ys
    v = torch.func.vmap(run_ivp)(Y, TE)
    assert torch.equal(v, torch.stack([run_ivp(y, te) for y, te in zip(Y, TE)]))
    # a mapped parameter: each slice its own solve
    names = [n for n, _ in f.named_parameters()]
    stacked = {n: torch.stack([p.detach() * (1 + 0.1 * i) for i in range(3)])
               for n, p in f.named_parameters()}

    def run_p(ps, y):
        return torch.func.functional_call(_Loss(f, lambda g, y0, a: ct.odeint(
            g, y0, t, rtol=1e-6, atol=1e-8)), {f"f.{n}": ps[n] for n in names}, (y, None))
    v = torch.func.vmap(run_p)(stacked, Y)
    loop = torch.stack([run_p({n: stacked[n][i] for n in names}, Y[i]) for i in range(3)])
    assert torch.equal(v, loop)


@pytest.mark.parametrize("dtype,precision", [(torch.float32, "fp32"), (F64, "fp64")])
def test_gradient_is_clnode_solve_and_vjp_bit_for_bit(dtype, precision):
    f = _field_of("scale").to(dtype)
    torch.manual_seed(2)
    y0 = torch.randn(5, 2, dtype=dtype, requires_grad=True)
    t = torch.linspace(0, 3, 12, dtype=F64)
    ys = ct.odeint(f, y0, t.to(dtype), rtol=1e-4, atol=1e-6, method="tsit5")
    w = torch.randn(ys.shape, dtype=dtype)
    (ys * w).sum().backward()
    model = clnode.from_torch(f)
    sol = clnode.solve(model, y0.detach().numpy(), t0=float(t[0]), t1=float(t[-1]), dt0="auto",
                       saveat=clnode.SaveAt(ts=t.to(dtype).double().numpy()), rtol=1e-4,
                       atol=1e-6, method="tsit5", precision=precision, keep_tape=True)
    np.testing.assert_array_equal(ys.transpose(0, 1).detach().numpy(), sol.ys)
    g = sol.vjp(w.transpose(0, 1).double().numpy())
    np.testing.assert_array_equal(y0.grad.numpy(), g.y0.astype(y0.grad.numpy().dtype))
    named = dict(f.named_parameters())
    for i, lin in enumerate([0, 2, 4]):
        for part in ("weight", "bias"):
            got = named[f"net.{lin}.{part}"].grad.numpy()
            np.testing.assert_array_equal(got, g.params[f"layers.{i}.{part}"].astype(got.dtype))
    np.testing.assert_array_equal(named["out_scale"].grad.numpy(),
                                  g.params["out_scale"].astype(named["out_scale"].grad.numpy()
                                                                .dtype))


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_flushed_subnormals_in_torch_give_the_same_bits(dtype):
    """torch.set_flush_denormal(True) (x86's FTZ and DAZ on the caller's thread): the ops convert
    and solve in IEEE's default environment all the same (clnode._solve.ieee, lib/core/fpenv.h)
    and give torch's setting back. A field whose last layer has zero weights and a subnormal bias
    grows y from 0 through the subnormal range: ys and every gradient the bits of the unflushed
    call (flushed, the bias read as zero gave ys of zeros)."""
    tiny = 3e-39 if dtype == torch.float32 else 3e-310
    f = _field_of("scale").to(dtype)
    with torch.no_grad():
        f.net[4].weight.zero_()
        f.net[4].bias.fill_(tiny)
    f.net[5] = nn.Identity()
    t = torch.linspace(0, 2, 5, dtype=dtype)

    def run():
        f.zero_grad()
        y0 = torch.zeros(3, 2, dtype=dtype, requires_grad=True)
        ys = ct.odeint(f, y0, t, rtol=1e-4, atol=1e-6, method="tsit5")
        (ys * torch.linspace(1, 2, ys.numel(), dtype=dtype).reshape(ys.shape)).sum().backward()
        return [ys.detach().clone(), y0.grad.clone()] + [p.grad.clone() for p in f.parameters()]

    want = run()
    sub = want[0][(want[0] != 0) & (want[0].abs() < torch.finfo(dtype).tiny)]
    assert sub.numel() > 0
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode torch can set")
    try:
        got = run()
        flushed = float(torch.tensor([tiny], dtype=dtype) * 1.5) == 0.0  # torch's setting back
    finally:
        torch.set_flush_denormal(False)
    assert flushed
    for a, b in zip(got, want):
        assert a.numpy().tobytes() == b.numpy().tobytes()


@pytest.mark.parametrize("scale_shape", [(), (2,)])
def test_gradient_is_clnode_jax_bit_for_bit(scale_shape):
    """The same problem through clnode.jax.diffeqsolve (jax.grad, vmap over y0): ys and every
    gradient the same bits. A scalar scale's gradient is the one exception, by design: clnode.jax
    solves a scale it differentiates as one value per component and JAX sums their gradients,
    where clnode.torch takes the library's sum of the scalar (as clnode.solve's vjp): they may
    differ in the last bits, and agree bit for bit with a scale of one value per component."""
    jax = pytest.importorskip("jax")
    eqx = pytest.importorskip("equinox")
    diffrax = pytest.importorskip("diffrax")
    import jax.numpy as jnp
    from clnode.jax import diffeqsolve

    f = _field_of("scale")
    if scale_shape:
        f.out_scale = nn.Parameter(torch.tensor([0.8, 1.1], dtype=F64))
    torch.manual_seed(3)
    y0 = torch.randn(4, 2, dtype=F64, requires_grad=True)
    t = torch.linspace(0, 2, 9, dtype=F64)
    ys = ct.odeint(f, y0, t, rtol=1e-6, atol=1e-8, method="tsit5",
                   options=dict(first_step=0.01))
    w = torch.randn(ys.shape, dtype=F64)
    (ys * w).sum().backward()

    lins = [f.net[i] for i in (0, 2, 4)]
    mlp = eqx.nn.MLP(2, 2, 6, 2, activation=jax.nn.softplus, final_activation=jnp.tanh,
                     key=jax.random.PRNGKey(0))
    for i, lin in enumerate(lins):
        mlp = eqx.tree_at(lambda m, i=i: (m.layers[i].weight, m.layers[i].bias), mlp,
                          (jnp.asarray(lin.weight.detach().numpy()),
                           jnp.asarray(lin.bias.detach().numpy())))

    class Func(eqx.Module):
        out_scale: jax.Array
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.out_scale * self.mlp(y)

    func = Func(jnp.asarray(f.out_scale.detach().numpy()), mlp)
    ts = jnp.asarray(t.numpy())
    wj = jnp.asarray(w.transpose(0, 1).numpy())

    def loss(func, y0):
        def one(y):
            return diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), t0=0.0, t1=2.0, dt0=0.01,
                               y0=y, saveat=diffrax.SaveAt(ts=ts),
                               stepsize_controller=diffrax.PIDController(rtol=1e-6,
                                                                         atol=1e-8)).ys
        return jnp.sum(jax.vmap(one)(y0) * wj)

    gf = eqx.filter_grad(loss)(func, jnp.asarray(y0.detach().numpy()))
    gy = jax.grad(lambda y: loss(func, y))(jnp.asarray(y0.detach().numpy()))
    np.testing.assert_array_equal(y0.grad.numpy(), np.asarray(gy))
    for i, lin in enumerate(lins):
        np.testing.assert_array_equal(lin.weight.grad.numpy(), np.asarray(gf.mlp.layers[i].weight))
        np.testing.assert_array_equal(lin.bias.grad.numpy(), np.asarray(gf.mlp.layers[i].bias))
    if scale_shape:
        np.testing.assert_array_equal(f.out_scale.grad.numpy(), np.asarray(gf.out_scale))
    else:
        np.testing.assert_allclose(f.out_scale.grad.numpy(), np.asarray(gf.out_scale),
                                   rtol=4e-16 * 8, atol=0)


def test_gradient_matches_torchode_at_tight_tolerances():
    """Against torch's autograd through torchode (Tsit5, IntegralController, its step sizes not
    differentiated), float64 at rtol = atol = 1e-8: within 1e-5 of each gradient's largest
    value, per-sample save times."""
    to = pytest.importorskip("torchode")
    f = _field_of("scale")
    torch.manual_seed(4)
    y0 = torch.randn(4, 2, dtype=F64)
    te = torch.stack([torch.linspace(0.0, 1.0 + 0.5 * b, 8, dtype=F64) for b in range(4)])
    w = torch.randn(4, 8, 2, dtype=F64)

    def grads(run):
        f.zero_grad()
        y = y0.clone().requires_grad_()
        (run(y) * w).sum().backward()
        return [y.grad] + [p.grad.clone() for p in f.parameters()]

    def with_torchode(y):
        term = to.ODETerm(f)
        step = to.Tsit5(term=term)
        ctrl = to.IntegralController(atol=1e-8, rtol=1e-8, term=term)
        adj = to.AutoDiffAdjoint(step, ctrl, backprop_through_step_size_control=False)
        return adj.solve(to.InitialValueProblem(y0=y, t_eval=te)).ys

    def with_clnode(y):
        ctrl = to.IntegralController(atol=1e-8, rtol=1e-8)
        return ct.solve_ivp(f, y, te, controller=ctrl).ys

    for a, b in zip(grads(with_clnode), grads(with_torchode)):
        assert (a - b).abs().max() <= 1e-5 * b.abs().max()


def test_one_solve_per_training_step(monkeypatch):
    f = _field_of("scale")
    y0 = torch.randn(6, 2, dtype=F64)
    t = torch.linspace(0, 1, 5, dtype=F64)
    calls = []
    real = clnode._solve._run  # the extension's solve, under clnode.solve and the op alike

    def counting(context, device, model, y, opts, extra):
        calls.append(bool(opts.get("keep_tape", False)))
        return real(context, device, model, y, opts, extra)
    monkeypatch.setattr(clnode._solve, "_run", counting)
    opt = torch.optim.SGD(f.parameters(), lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        loss = ct.odeint(f, y0, t, rtol=1e-5, atol=1e-7).square().sum()
        loss.backward()
        opt.step()
    assert calls == [True, True, True]
    # the tape travels with the graph: ten losses made before any backward, their backwards in
    # another order, still one solve each (a table of the last tapes would solve again)
    calls.clear()
    losses = [ct.odeint(f, y0 * (1 + 0.1 * i), t, rtol=1e-5, atol=1e-7).square().sum()
              for i in range(10)]
    for loss in reversed(losses):
        loss.backward()
    assert calls == [True] * 10
    # no gradient wanted: no tape kept
    calls.clear()
    with torch.no_grad():
        ct.odeint(f, y0, t)
    with torch.inference_mode():
        out = ct.odeint(f, y0, t)
    assert calls == [False, False] and out.grad_fn is None


def test_adjoint_params_subset():
    f = _field_of("scale")
    y0 = torch.randn(3, 2, dtype=F64)
    t = torch.linspace(0, 1, 4, dtype=F64)
    ct.odeint_adjoint(f, y0, t, adjoint_params=[f.out_scale]).sum().backward()
    assert f.out_scale.grad is not None
    assert all(p.grad is None for n, p in f.named_parameters() if n != "out_scale")
    g = f.out_scale.grad.clone()
    f.zero_grad()
    ct.odeint(f, y0, t).sum().backward()
    assert torch.equal(f.out_scale.grad, g)


def test_time_gradient_and_func_reverse_transforms_refused():
    f = _field_of("scale")
    y0 = torch.randn(3, 2, dtype=F64)
    t = torch.linspace(0, 1, 4, dtype=F64, requires_grad=True)
    with pytest.raises(Refusal, match="gradient with respect to the times"):
        ct.odeint(f, y0, t)
    with torch.no_grad():
        ct.odeint(f, y0, t)  # not asked for: solved
    with pytest.raises(Refusal, match="gradient with respect to the times"):
        ct.solve_ivp(f, y0, t)
    t = t.detach()
    # forward mode is computed (tests/python/test_torch_fwd.py): jvp and jacfwd agree
    _, jv = torch.func.jvp(lambda y: ct.odeint(f, y, t), (y0,), (torch.ones_like(y0),))
    J = torch.func.jacfwd(lambda y: ct.odeint(f, y, t))(y0)
    torch.testing.assert_close(J.sum(dim=(-2, -1)), jv, rtol=1e-12, atol=1e-14)
    for transform in (torch.func.grad, torch.func.jacrev):
        with pytest.raises(Refusal, match="torch.func.grad, vjp and jacrev"):
            transform(lambda y: ct.odeint(f, y, t).sum())(y0)
    with pytest.raises(Refusal, match="torch.func.grad, vjp and jacrev"):
        torch.func.vjp(lambda y: ct.odeint(f, y, t), y0)
    # torch.autograd.grad is the reverse mode to use
    y = y0.clone().requires_grad_()
    (g,) = torch.autograd.grad(ct.odeint(f, y, t).sum(), y)
    assert g.shape == y0.shape and torch.isfinite(g).all()
