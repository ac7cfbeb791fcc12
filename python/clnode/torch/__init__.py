"""clnode.torch: torchdiffeq's odeint and odeint_adjoint and torchode's solve_ivp, solved by
clnode, differentiable through torch's autograd.

    from clnode.torch import odeint          # instead of: from torchdiffeq import odeint
    ys = odeint(func, y0, t, rtol=1e-3, atol=1e-6)            # (T, B, N)

    from clnode.torch import solve_ivp       # instead of: from torchode import solve_ivp
    sol = solve_ivp(f, y0, t_eval)                             # sol.ys (B, T, N)

The vector field is an nn.Module recognised from its graph (torch.fx), never from its values:
its forward must be net(y), net(cat([y, T], -1)), net(cat([y, args], -1)) or
net(cat([y, T, args], -1)) (T the time as a column), optionally multiplied by a learnt scale
(a parameter of shape (), (1,) or (N,)), net a chain of nn.Linear modules with one kind of
activation module between them (and optionally one after the last): Tanh, ReLU, Sigmoid, SiLU,
Identity, Softplus(beta=1.0, threshold=20.0), GELU(approximate="tanh"). Anything else is refused
with clnode.torch.Refusal naming the module or the operation (torchdiffeq's demo net(y**3): the
pow; torchode's README -0.5 * y: a function computing mul).

Each trajectory takes its own steps, as in torchode and diffrax (torchdiffeq takes one step size
for the batch): the results never depend on the batch. The solve is one registered op,
torch.ops.clnode.solve (torch.library.custom_op, with a fake, an autograd rule and a vmap rule),
so it works under torch.compile(fullgraph=True) and torch.func.vmap; the gradient (module
parameters, y0, args) is the library's discrete reverse pass (clnode.Solution.vjp) from the
forward's tape, through loss.backward() or torch.autograd.grad (torch.func's grad, vjp and jacrev
are refused). Forward mode (torch.func.jvp, torch.func.jacfwd, torch.autograd.forward_ad) is
one solve keeping its tape and the library's tangent pass from it (clnode.Solution.jvp's), a
second op torch.ops.clnode.solve_jvp whose vmap rule makes jacfwd's columns the directions of one
pass; derivatives of derivatives are refused. doc/torch.md says what each argument becomes.

Needs torch (pip install "clnode[torch]"); torchdiffeq and torchode are not needed.
"""
from ._field import Refusal
from ._torchdiffeq import odeint, odeint_adjoint
from ._torchode import Solution, solve_ivp

__all__ = ["odeint", "odeint_adjoint", "solve_ivp", "Solution", "Refusal"]
