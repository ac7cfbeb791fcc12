"""clnode.torch reads the vector field from its torch.fx graph: the supported forms are solved as
the same clnode.MLP (checked against evaluating the module itself and against torchdiffeq), and
everything else is refused naming the layer or operation: torchdiffeq's demo field net(y**3),
torchode's README field -0.5 * y, unsupported modules and activation arguments, and the
arguments and methods clnode does not take."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import clnode  # noqa: E402
import clnode.torch as ct  # noqa: E402
from clnode.torch import Refusal  # noqa: E402

F64 = torch.float64


class Scaled(nn.Module):
    def __init__(self, act=None, final=None, n_in=2, scale=True):
        super().__init__()
        act = act if act is not None else nn.Softplus()
        layers = [nn.Linear(n_in, 8), act, nn.Linear(8, 8), copy.deepcopy(act), nn.Linear(8, 2)]
        if final is not None:
            layers.append(final)
        self.net = nn.Sequential(*layers)
        if scale:
            self.out_scale = nn.Parameter(torch.tensor(0.7))

    def forward(self, t, y):
        out = self.net(y)
        return self.out_scale * out if hasattr(self, "out_scale") else out


class TimeCat(Scaled):
    def __init__(self):
        super().__init__(nn.Tanh(), n_in=3, scale=False)

    def forward(self, t, y):
        return self.net(torch.cat([y, t.expand(y.shape[0], 1)], dim=-1))


class Cubed(nn.Module):  # torchdiffeq's examples/ode_demo.py
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 50), nn.Tanh(), nn.Linear(50, 2))

    def forward(self, t, y):
        return self.net(y ** 3)


def _mlp_of(module, time_input=False):
    """clnode's MLP of the module (from_torch reads its Sequential and its out_scale)."""
    return clnode.from_torch(module, time_input=time_input)


@pytest.mark.parametrize("make,time_input", [
    (lambda: Scaled(), False),
    (lambda: Scaled(nn.Tanh(), nn.Tanh()), False),
    (lambda: Scaled(nn.GELU(approximate="tanh"), scale=False), False),
    (lambda: Scaled(nn.SiLU(), nn.Sigmoid()), False),
    (lambda: TimeCat(), True),
])
def test_forms_solve_as_the_mlp(make, time_input):
    """Each supported form is solved as clnode.solve solves the same MLP: the same bits."""
    torch.manual_seed(0)
    f = make().double()
    y0 = torch.randn(5, 2, dtype=F64)
    t = torch.linspace(0.0, 2.0, 7, dtype=F64)
    ys = ct.odeint(f, y0, t, rtol=1e-6, atol=1e-8, method="tsit5",
                   options=dict(first_step=0.05))
    ref = clnode.solve(_mlp_of(f, time_input), y0.numpy(), t0=0.0, t1=2.0, dt0=0.05,
                       saveat=clnode.SaveAt(ts=t.numpy()), rtol=1e-6, atol=1e-8,
                       method="tsit5", precision="fp64")
    assert ys.shape == (7, 5, 2)
    np.testing.assert_array_equal(ys.transpose(0, 1).detach().numpy(), ref.ys)


def test_the_model_evaluates_as_the_module():
    """The recognised field is the module's own computation: one explicit Euler step of size h
    by clnode (constant steps are not mapped, so a tiny interval with one tsit5 step) equals
    y0 + h f(y0) to first order; directly, the MLP's output at y0 equals the module's."""
    torch.manual_seed(1)
    for f in (Scaled(), Scaled(nn.GELU(approximate="tanh"), nn.Tanh())):
        f = f.double()
        y0 = torch.randn(4, 2, dtype=F64)
        m = _mlp_of(f)
        h = 1e-7
        sol = clnode.solve(m, y0.numpy(), t0=0.0, t1=h, dt0=h, precision="fp64")
        want = (y0 + h * f(torch.tensor(0.0), y0)).detach().numpy()
        np.testing.assert_allclose(sol.ys[:, -1], want, rtol=0, atol=1e-13)


class Shared(nn.Module):
    """A network that reuses one activation module: between the layers and after the last."""
    def __init__(self):
        super().__init__()
        act = nn.Tanh()
        self.net = nn.Sequential(nn.Linear(2, 8), act, nn.Linear(8, 8), act, nn.Linear(8, 2), act)

    def forward(self, t, y):
        return self.net(y)


def test_a_reused_activation_module_is_read_at_each_place():
    """nn.Sequential(Linear, act, Linear, act, Linear, act) with one `act` object computes act
    after every layer; nn.Module.children() lists `act` once, and from_torch read it so (it
    refused the network, or read a final activation as none). from_torch gives the MLP of the
    same network built with a copy at each place, which evaluates as the module; clnode.torch,
    reading the graph, solves it as clnode.solve solves that MLP, bit for bit."""
    torch.manual_seed(3)
    f = Shared().double()
    m = clnode.from_torch(f.net)
    assert m == clnode.from_torch(nn.Sequential(*[copy.deepcopy(x) for x in f.net]))
    assert (m.sizes, m.activation, m.final_activation) == ((2, 8, 8, 2), "tanh", "tanh")
    y0 = torch.randn(5, 2, dtype=F64)
    np.testing.assert_allclose(m(y0.numpy()), f(None, y0).detach().numpy(), rtol=1e-13,
                               atol=1e-15)
    inner = clnode.from_torch(f.net[:5])  # reused between the layers only
    assert (inner.activation, inner.final_activation) == ("tanh", "identity")
    t = torch.linspace(0.0, 1.0, 4, dtype=F64)
    ys = ct.odeint(f, y0, t, rtol=1e-6, atol=1e-8, options=dict(first_step=0.05))
    ref = clnode.solve(m, y0.numpy(), t0=0.0, t1=1.0, dt0=0.05, saveat=clnode.SaveAt(ts=t.numpy()),
                       rtol=1e-6, atol=1e-8, method="dopri5", precision="fp64")
    np.testing.assert_array_equal(ys.transpose(0, 1).detach().numpy(), ref.ys)


def _refused(match, f, y0=None, t=None, **kw):
    y0 = torch.zeros(3, 2, dtype=F64) if y0 is None else y0
    t = torch.linspace(0.0, 1.0, 3, dtype=F64) if t is None else t
    with pytest.raises(Refusal, match=match):
        ct.odeint(f, y0, t, **kw)


def test_torchdiffeq_demo_refused_naming_the_pow():
    _refused(r"network's input is pow by 3", Cubed().double())


def test_torchode_readme_function_refused_naming_the_mul():
    def f(t, y):
        return -0.5 * y
    _refused(r"f is a function \(it computes mul by -0.5\)", f)
    with pytest.raises(Refusal, match="mul by -0.5"):
        ct.solve_ivp(f, torch.zeros(3, 2, dtype=F64), torch.linspace(0, 1, 3, dtype=F64))


class Extra(nn.Module):
    def __init__(self, mod):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 8), mod, nn.Linear(8, 2))

    def forward(self, t, y):
        return self.net(y)


@pytest.mark.parametrize("mod,match", [
    (nn.Dropout(0.1), r"Dropout \(net\.1\)"),
    (nn.LayerNorm(8), r"LayerNorm \(net\.1\)"),
    (nn.Softplus(beta=2.0), r"Softplus\(beta=2\.0, threshold=20"),
    (nn.Softplus(threshold=10.0), r"Softplus\(beta=1\.0, threshold=10\.0\)"),
    (nn.GELU(), r"GELU\(approximate='none'\)"),
    (nn.ELU(), r"ELU \(net\.1\)"),
])
def test_unsupported_modules_refused_by_name(mod, match):
    _refused(match, Extra(mod).double())


class Added(Scaled):
    def forward(self, t, y):
        return self.net(y) + y


class TwoActs(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(),
                                 nn.Linear(8, 2))

    def forward(self, t, y):
        return self.net(y)


class ValueScale(Scaled):
    def forward(self, t, y):
        return 0.5 * self.net(y)


def test_other_graphs_refused_by_name():
    _refused(r"output is add", Added().double())
    _refused(r"different activations between layers \(\['relu', 'tanh'\]\)", TwoActs().double())
    _refused(r"output is mul", ValueScale().double())
    _refused(r"the state has 2 values", Scaled(n_in=3).double())


def test_forward_hooks_refused():
    """A forward hook changes what the module computes outside its graph: refused, naming the
    module, rather than solved without it."""
    f = Scaled().double()
    ct.odeint(f, torch.zeros(3, 2, dtype=F64), torch.linspace(0, 1, 3, dtype=F64))
    handle = f.net[2].register_forward_hook(lambda mod, inp, out: 2 * out)
    _refused(r"the module net\.2 \(Linear\) has forward hooks", f)
    handle.remove()
    ct.odeint(f, torch.zeros(3, 2, dtype=F64), torch.linspace(0, 1, 3, dtype=F64))


def test_a_module_changed_after_a_solve_is_recognised_again():
    """The recognition is kept per module while its tree is unchanged: an activation's argument
    changed, or a module replaced, after a solve is seen by the next call (refused here, naming
    it), and the module solves again once restored."""
    y0, t = torch.zeros(3, 2, dtype=F64), torch.linspace(0, 1, 3, dtype=F64)
    f = Scaled().double()
    g = Scaled(nn.GELU(approximate="tanh")).double()
    ys, ys_g = ct.odeint(f, y0, t), ct.odeint(g, y0, t)
    f.net[1].beta = 2.0
    _refused(r"Softplus\(beta=2\.0, threshold=20", f)
    f.net[1].beta = 1.0
    f.net[3].threshold = 10.0
    _refused(r"Softplus\(beta=1\.0, threshold=10\.0\)", f)
    f.net[3].threshold = 20.0
    assert torch.equal(ct.odeint(f, y0, t), ys)
    g.net[3].approximate = "none"
    _refused(r"GELU\(approximate='none'\)", g)
    g.net[3].approximate = "tanh"
    assert torch.equal(ct.odeint(g, y0, t), ys_g)
    f.net[3] = nn.ReLU()
    _refused(r"different activations between layers \(\['relu', 'softplus'\]\)", f)


def test_first_recognised_under_functional_call_reads_each_calls_parameters():
    """A module first solved under torch.func.functional_call (its parameters the caller's plain
    tensors while traced): the scale is read as the parameter out_scale, not frozen as a
    constant of that first call (torch.fx's _tensor_constant0, set on the module), so later
    calls, with the module's own parameters or other tensors, solve with those."""
    y0, t = torch.randn(3, 2, dtype=F64), torch.linspace(0, 1, 4, dtype=F64)
    f = Scaled().double()
    ps = {n: p.detach().clone() for n, p in f.named_parameters()}
    first = {n: (v * 1.5 if n == "out_scale" else v) for n, v in ps.items()}

    def solve(params):
        return torch.func.functional_call(_Odeint(f, t), params, (y0,))
    solve({f"f.{n}": v for n, v in first.items()})
    assert not any(n.startswith("_tensor_constant") for n in vars(f))
    with torch.no_grad():
        want = ct.odeint(copy.deepcopy(f), y0, t)
    assert torch.equal(ct.odeint(f, y0, t).detach(), want)
    assert torch.equal(solve({f"f.{n}": v for n, v in ps.items()}), want)
    # the scale's gradient reaches the module's parameter
    ct.odeint(f, y0, t).sum().backward()
    assert f.out_scale.grad is not None and float(f.out_scale.grad) != 0.0


class _Odeint(nn.Module):
    def __init__(self, f, t):
        super().__init__()
        self.f, self.t = f, t

    def forward(self, y0):
        return ct.odeint(self.f, y0, self.t)


def test_a_bias_removed_or_a_forward_set_after_a_solve_is_seen():
    """What the parameters' list and the graph depend on is part of the kept recognition: a
    Linear's bias set to None after a solve gives the solve of a module built without it (not
    a lookup of the bias that is gone), and a forward set on the module itself after a solve is
    refused (calling the module runs it, torch.fx would trace the class's), not the class's
    forward kept."""
    y0 = torch.randn(3, 2, dtype=F64, generator=torch.Generator().manual_seed(3))
    t = torch.linspace(0, 1, 3, dtype=F64)
    f = Scaled().double()
    ct.odeint(f, y0, t)
    f.net[2].bias = None
    g = Scaled().double()
    g.load_state_dict(f.state_dict(), strict=False)
    g.net[2].bias = None
    assert torch.equal(ct.odeint(f, y0, t), ct.odeint(g, y0, t))
    f.forward = lambda t, y: -0.5 * y
    _refused(r"a forward set on the module itself", f)


def test_parametrized_linear_is_solved_with_its_weight():
    """A weight-normed Linear (torch.nn.utils.parametrizations.weight_norm) is solved with the
    weight it computes, and its gradient reaches the parametrization's parameters: equal to
    torch's chain rule through that weight of the gradient clnode gives a plain copy."""
    from torch.nn.utils.parametrizations import weight_norm
    torch.manual_seed(2)
    f = Scaled().double()
    weight_norm(f.net[0])
    y0 = torch.randn(3, 2, dtype=F64)
    t = torch.linspace(0, 1, 4, dtype=F64)
    ys = ct.odeint(f, y0, t, rtol=1e-6, atol=1e-8)
    ys.square().sum().backward()
    g, v = f.net[0].parametrizations.weight.original0, f.net[0].parametrizations.weight.original1
    assert g.grad is not None and v.grad is not None
    plain = Scaled().double()
    plain.load_state_dict({k: v for k, v in f.state_dict().items() if "parametrizations" not in k}
                          | {"net.0.weight": f.net[0].weight.detach()}, strict=False)
    ys_plain = ct.odeint(plain, y0, t, rtol=1e-6, atol=1e-8)
    assert torch.equal(ys_plain, ys.detach())
    ys_plain.square().sum().backward()
    want = torch.autograd.grad(f.net[0].weight, (g, v), plain.net[0].weight.grad)
    assert torch.equal(g.grad, want[0]) and torch.equal(v.grad, want[1])


def test_arguments_refused_by_name():
    f = Scaled().double()
    _refused(r"method 'rk4' is not one of clnode's", f, method="rk4")
    _refused(r"method 'explicit_adams'", f, method="explicit_adams")
    _refused(r"method 'scipy_solver'", f, method="scipy_solver")
    _refused(r"odeint options \['grid_points'\]", f, options=dict(grid_points=[0.0]))
    _refused(r"event_fn", f, event_fn=lambda t, y: y)
    _refused(r"rtol per component", f, rtol=torch.ones(2))
    _refused(r"float16", f, y0=torch.zeros(3, 2, dtype=torch.float16))
    _refused(r"bfloat16", f, y0=torch.zeros(3, 2, dtype=torch.bfloat16))
    _refused(r"net\.0\.weight is torch\.float32 but y0 is torch\.float64", Scaled())
    _refused(r"no tuple states", f, y0=(torch.zeros(2), torch.zeros(2)))
    with pytest.raises(Refusal, match="adjoint_rtol"):
        ct.odeint_adjoint(f, torch.zeros(3, 2, dtype=F64), torch.linspace(0, 1, 3,
                                                                           dtype=F64),
                          adjoint_rtol=1e-3)
    with pytest.raises(Refusal, match="adjoint_method"):
        ct.odeint_adjoint(f, torch.zeros(3, 2, dtype=F64), torch.linspace(0, 1, 3,
                                                                           dtype=F64),
                          adjoint_method="dopri5")
    y0 = torch.zeros(3, 2, dtype=F64)
    te = torch.linspace(0, 1, 3, dtype=F64)
    with pytest.raises(Refusal, match="method 'euler'"):
        ct.solve_ivp(f, y0, te, method="euler")
    with pytest.raises(Refusal, match="controller FixedStepController"):
        ct.solve_ivp(f, y0, te, controller=type("FixedStepController", (), {})())
