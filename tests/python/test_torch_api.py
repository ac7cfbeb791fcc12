"""clnode.torch's calls against clnode.solve of the same problem, bit for bit: torchode's
solve_ivp (per-sample t_eval and t_span, dt0 given or chosen, its controllers' coefficients, its
status and stats) and torchdiffeq's odeint (its (T, *y0.shape) layout, decreasing t, its
defaults); each trajectory the same bits alone or in any batch; float32 below its resolution."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import clnode  # noqa: E402
import clnode.torch as ct  # noqa: E402

F64 = torch.float64


class Field(nn.Module):
    def __init__(self, k=0):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(2 + k, 16), nn.Tanh(), nn.Linear(16, 2))
        self.out_scale = nn.Parameter(torch.tensor([0.9, 1.2]))

    def forward(self, t, y, args=None):
        x = y if args is None else torch.cat([y, args], -1)
        return self.out_scale * self.net(x)


def rms_norm(x):
    return x.square().mean(dim=-1).sqrt()


class PIDController:
    """torchode's PIDController as clnode.torch reads it."""

    def __init__(self, atol, rtol, pcoeff, icoeff, dcoeff, dt_min=None):
        self.atol, self.rtol = atol, rtol
        self.pcoeff, self.icoeff, self.dcoeff = pcoeff, icoeff, dcoeff
        self.safety, self.factor_min, self.factor_max = 0.9, 0.2, 10.0
        self.dt_min, self.dt_max, self.norm = dt_min, None, rms_norm


def _rows(B, T=7):
    return torch.stack([torch.linspace(0.1 * b, 1.0 + 0.3 * b, T, dtype=F64) for b in range(B)])


@pytest.mark.parametrize("dt0", [None, "given"])
@pytest.mark.parametrize("dtype,precision", [(torch.float32, "fp32"), (F64, "fp64")])
def test_solve_ivp_is_clnode_solve(dt0, dtype, precision):
    f = Field(k=2).to(dtype)
    B = 5
    y0 = torch.randn(B, 2, dtype=dtype)
    args = torch.randn(B, 2, dtype=dtype)
    te = _rows(B)
    t_span = (te[:, 0] - 0.05, te[:, -1] + 0.1)
    d = None if dt0 is None else torch.full((B,), 0.02, dtype=F64)
    ctrl = PIDController(1e-5, 1e-4, 0.1, 0.3, 0.05)
    sol = ct.solve_ivp(f, y0, te, t_span=t_span, dt0=d, controller=ctrl, args=args,
                       method="dopri5")
    ref = clnode.solve(clnode.from_torch(f, inputs=2), y0.numpy(), t0=t_span[0].numpy(),
                       t1=t_span[1].numpy(), dt0="auto" if d is None else d.numpy(),
                       args=args.numpy(), saveat=clnode.SaveAt(ts=te.numpy()), atol=1e-5,
                       rtol=1e-4, pcoeff=0.1, icoeff=0.3, dcoeff=0.05, method="dopri5",
                       precision=precision, max_steps=int(clnode.OPTIONS["max_steps"]["max"]))
    assert sol.ys.dtype == dtype and sol.ys.shape == (B, 7, 2)
    np.testing.assert_array_equal(sol.ys.detach().numpy(), ref.ys)
    np.testing.assert_array_equal(sol.ts.numpy(), te.numpy().astype(ref.ys.dtype))
    np.testing.assert_array_equal(sol.stats["n_steps"].numpy(), ref.stats["num_steps"])
    np.testing.assert_array_equal(sol.stats["n_accepted"].numpy(),
                                  ref.stats["num_accepted_steps"])
    np.testing.assert_array_equal(sol.stats["n_f_evals"].numpy(), ref.stats["num_rhs_evals"])
    np.testing.assert_array_equal(sol.stats["first_step"].numpy(), ref.stats["first_step"])
    assert sol.status.tolist() == [0] * B


def test_solve_ivp_default_controller_and_status():
    """controller=None is torchode's default PIDController(1e-7, 1e-7, 0.2, 0.5, 0); a sample
    that runs out of steps gets torchode's status 3 (REACHED_MAX_STEPS)."""
    f = Field().double()
    y0 = torch.randn(3, 2, dtype=F64)
    te = torch.linspace(0, 2, 5, dtype=F64)
    sol = ct.solve_ivp(f, y0, te)
    ref = clnode.solve(clnode.from_torch(f), y0.numpy(), t0=0.0, t1=2.0, dt0="auto",
                       saveat=clnode.SaveAt(ts=te.numpy()), rtol=1e-7, atol=1e-7, pcoeff=0.2,
                       icoeff=0.5, dcoeff=0.0, method="tsit5", precision="fp64",
                       max_steps=int(clnode.OPTIONS["max_steps"]["max"]))
    np.testing.assert_array_equal(sol.ys.detach().numpy(), ref.ys)
    short = ct.solve_ivp(f, y0, te, max_steps=2)
    assert short.status.tolist() == [3, 3, 3]
    assert short.stats["n_steps"].tolist() == [2, 2, 2]


def test_dt_min_ends_with_torchodes_status():
    """A controller's dt_min: a sample whose step would fall below it stops with torchode's
    status 2 (REACHED_DT_MIN), as torchode stops it, not at a forced step."""
    f = Field().double()
    y0 = torch.randn(3, 2, dtype=F64)
    te = torch.linspace(0, 2, 5, dtype=F64)
    sol = ct.solve_ivp(f, y0, te, controller=PIDController(1e-12, 1e-12, 0.0, 1.0, 0.0,
                                                           dt_min=0.05))
    assert sol.status.tolist() == [2, 2, 2]
    loose = ct.solve_ivp(f, y0, te, controller=PIDController(1e-3, 1e-3, 0.0, 1.0, 0.0,
                                                             dt_min=1e-4))
    assert loose.status.tolist() == [0, 0, 0]


def test_torchode_controllers_mapped_when_installed():
    """torchode's own controllers: PIDController's coefficients as they are, IntegralController
    as PID(0, 1, 0); atol and rtol as torchode holds them (float32 tensors)."""
    to = pytest.importorskip("torchode")
    f = Field().double()
    y0 = torch.randn(3, 2, dtype=F64)
    te = torch.linspace(0, 2, 5, dtype=F64)
    atol, rtol = float(torch.tensor(1e-6)), float(torch.tensor(1e-5))
    assert atol != 1e-6
    a = ct.solve_ivp(f, y0, te, controller=to.PIDController(1e-6, 1e-5, 0.2, 0.5, 0.1))
    b = ct.solve_ivp(f, y0, te, controller=PIDController(atol, rtol, 0.2, 0.5, 0.1))
    assert torch.equal(a.ys, b.ys)
    c = ct.solve_ivp(f, y0, te, controller=to.IntegralController(1e-6, 1e-5))
    d = ct.solve_ivp(f, y0, te, controller=PIDController(atol, rtol, 0.0, 1.0, 0.0))
    assert torch.equal(c.ys, d.ys)


@pytest.mark.parametrize("t", [torch.linspace(0, 2, 6, dtype=F64),
                               torch.linspace(2, -1, 6, dtype=F64)])
def test_odeint_layout_and_bits(t):
    f = Field().double()
    y0 = torch.randn(4, 2, dtype=F64)
    ys = ct.odeint(f, y0, t, rtol=1e-6, atol=1e-8)
    assert ys.shape == (6, 4, 2)
    ref = clnode.solve(clnode.from_torch(f), y0.numpy(), t0=float(t[0]), t1=float(t[-1]),
                       dt0="auto", saveat=clnode.SaveAt(ts=t.numpy()), rtol=1e-6, atol=1e-8,
                       method="dopri5", precision="fp64")
    np.testing.assert_array_equal(ys.detach().numpy(), ref.ys.transpose(1, 0, 2))
    assert torch.equal(ys[0], y0)  # t[0] saves y0
    one = ct.odeint(f, y0[2], t, rtol=1e-6, atol=1e-8)
    assert one.shape == (6, 2)
    assert torch.equal(one, ys[:, 2])  # alone or in a batch: the same bits


def test_odeint_defaults_in_float32_get_the_precision_guard():
    """torchdiffeq's defaults (rtol 1e-7, atol 1e-9) are passed as given: in float32 they are
    below what the precision resolves, and the library's precision guard says so."""
    f = Field()
    y0 = torch.randn(2, 2)
    with pytest.warns(clnode.PrecisionWarning, match="rtol 1e-07 is below"):
        ys = ct.odeint(f, y0, torch.linspace(0, 1, 3))
    assert ys.dtype == torch.float32
    with pytest.warns(clnode.PrecisionWarning):
        ct.solve_ivp(f, y0, torch.linspace(0, 1, 3))


def test_times_kept_per_exact_bits():
    """The (3, B) times of one t0, t1 and dt0 are kept between calls (the op only reads them),
    keyed by their exact bits: -0.0 and 0.0, a chosen dt0 (NaN) and a given one are kept apart;
    a tensor kept from a call under inference_mode serves a later call with a gradient."""
    from clnode.torch import _call
    neg, pos = (_call.times_tensor(z, 1.0, 0.25, 3) for z in (-0.0, 0.0))
    assert torch.signbit(neg[0]).all() and not torch.signbit(pos[0]).any()
    assert pos.tolist() == [[0.0] * 3, [1.0] * 3, [0.25] * 3]
    assert _call.times_tensor(torch.tensor(0.0, dtype=F64), 1.0, 0.25, 3) is pos
    auto = _call.times_tensor(0.0, 1.0, None, 3)
    assert torch.isnan(auto[2]).all() and torch.equal(auto[:2], pos[:2])
    f = Field()
    y0 = torch.randn(3, 2)
    t = torch.linspace(0.0, 1.5, 4)
    with torch.inference_mode():
        a = ct.odeint(f, y0, t, rtol=1e-4, atol=1e-6)
    y0.requires_grad_()
    b = ct.odeint(f, y0, t, rtol=1e-4, atol=1e-6)
    b.square().sum().backward()
    assert torch.equal(a, b.detach()) and y0.grad is not None
