"""Train a neural ODE on spirals in PyTorch, solved by clnode.torch.odeint.

The data are 2-d spiral trajectories of a fixed nonlinear ODE (the field of
examples/neural_ode.py, solved here by float64 RK4 on a fine grid, one random y0 per sample);
the model is dy/dt = out_scale * net(y), net = Linear(2, 64) Softplus Linear(64, 64) Softplus
Linear(64, 2) Tanh, solved with dopri5 at rtol 1e-3, atol 1e-6 and trained with Adam on the mean
squared error. The training first fits the first 10% of each series, then the whole series.

The one line that differs from a torchdiffeq script is the import, `from clnode.torch import
odeint` instead of `from torchdiffeq import odeint`; `--solver torchdiffeq` and `--solver
torchode` run the same script on the peers (torchode: Tsit5 with an IntegralController, its
step sizes not differentiated), for comparison.

    python examples/torch_neural_ode.py              # 300 + 300 steps, then torch_neural_ode.png
    python examples/torch_neural_ode.py --help
"""
import argparse
import json
import sys
import time

import torch
from torch import nn

LENGTH_STRATEGY = (0.1, 1.0)  # fraction of each series trained on, one per phase
RTOL, ATOL = 1e-3, 1e-6


def spiral_field(y):
    z = y / (1 + y**2)
    return torch.stack([-0.1 * z[..., 0] + 2.0 * z[..., 1], -2.0 * z[..., 0] - 0.1 * z[..., 1]],
                       dim=-1)


def make_dataset(n, ts, generator):
    """ys (n, T, 2): spirals from y0 uniform in [-1, 1]^2, by float64 RK4 with 20 steps per
    interval of ts."""
    y = torch.rand(n, 2, generator=generator, dtype=torch.float64) * 2 - 1
    out = [y]
    for i in range(len(ts) - 1):
        h = float(ts[i + 1] - ts[i]) / 20
        for _ in range(20):
            k1 = spiral_field(y)
            k2 = spiral_field(y + h / 2 * k1)
            k3 = spiral_field(y + h / 2 * k2)
            k4 = spiral_field(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(y)
    return torch.stack(out, dim=1)


class Func(nn.Module):
    """out_scale * net(y) (Tanh bounds the network; out_scale is learnt)."""

    def __init__(self, width=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, width), nn.Softplus(), nn.Linear(width, width),
                                 nn.Softplus(), nn.Linear(width, 2), nn.Tanh())
        self.out_scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, t, y):
        return self.out_scale * self.net(y)


def choose_solver(name):
    """solve(func, y0 (B, 2), ts (T,)) -> ys (B, T, 2) with the named solver."""
    if name == "clnode":
        from clnode.torch import odeint
        return lambda func, y0, ts: odeint(func, y0, ts, rtol=RTOL, atol=ATOL,
                                           method="dopri5").transpose(0, 1)
    if name == "torchdiffeq":
        from torchdiffeq import odeint as tdq_odeint
        return lambda func, y0, ts: tdq_odeint(func, y0, ts, rtol=RTOL, atol=ATOL,
                                               method="dopri5").transpose(0, 1)
    import torchode as to

    def solve(func, y0, ts):
        term = to.ODETerm(func)
        adjoint = to.AutoDiffAdjoint(to.Tsit5(term=term),
                                     to.IntegralController(atol=ATOL, rtol=RTOL, term=term),
                                     backprop_through_step_size_control=False)
        t_eval = ts.expand(y0.shape[0], -1)
        return adjoint.solve(to.InitialValueProblem(y0=y0, t_eval=t_eval)).ys
    return solve


class Progress:
    """A one-line progress bar on stderr (none with quiet)."""

    def __init__(self, total, label, quiet):
        self.total, self.label, self.quiet = total, label, quiet
        self.start = time.perf_counter()

    def update(self, done, text):
        if self.quiet:
            return
        width = 30
        filled = width * done // self.total
        elapsed = time.perf_counter() - self.start
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                         f"{done}/{self.total} {text} {elapsed:.1f}s")
        if done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def train(func, solve, ts, ys, args, generator):
    """Adam on the mean squared error over minibatches; one phase per LENGTH_STRATEGY entry.
    Returns the per-step losses."""
    opt = torch.optim.Adam(func.parameters(), lr=args.lr)
    losses = []
    for phase, frac in enumerate(LENGTH_STRATEGY):
        n = max(2, int(len(ts) * frac))
        bar = Progress(args.steps, f"phase {phase + 1}/{len(LENGTH_STRATEGY)} ({n} points)",
                       args.quiet)
        for step in range(args.steps):
            idx = torch.randperm(ys.shape[0], generator=generator)[:args.batch]
            yi = ys[idx, :n]
            opt.zero_grad()
            loss = (solve(func, yi[:, 0], ts[:n]) - yi).square().mean()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            bar.update(step + 1, f"loss {losses[-1]:.3e}")
        print(f"phase {phase + 1}: {args.steps} steps on {n} points, loss {losses[-1]:.4e}")
    return losses


def plot(path, ts, ys, func, solve, n_show=4):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with torch.no_grad():
        pred = solve(func, ys[:n_show, 0], ts)
    fig, ax = plt.subplots(figsize=(5, 5))
    for i in range(n_show):
        ax.plot(ys[i, :, 0], ys[i, :, 1], "k.", markersize=3,
                label="data" if i == 0 else None)
        ax.plot(pred[i, :, 0], pred[i, :, 1], "-", label="model" if i == 0 else None)
    ax.set_aspect("equal")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--solver", choices=("clnode", "torchdiffeq", "torchode"), default="clnode",
                   help="what solves the model (default clnode: clnode.torch.odeint)")
    p.add_argument("--steps", type=int, default=300, help="training steps per phase (default 300)")
    p.add_argument("--batch", type=int, default=32, help="trajectories per step (default 32)")
    p.add_argument("--dataset-size", type=int, default=256, help="spirals (default 256)")
    p.add_argument("--points", type=int, default=100, help="save times on [0, 10] (default 100)")
    p.add_argument("--seed", type=int, default=0, help="data, initial weights and batches")
    p.add_argument("--precision", choices=("float32", "float64"), default="float32",
                   help="of the model and the solve (default float32)")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--out", default="torch_neural_ode.png", help="the PNG written at the end")
    p.add_argument("--quiet", action="store_true", help="no progress bar, only the summaries")
    p.add_argument("--losses-out", default=None, metavar="FILE",
                   help="write the per-step losses and timings as JSON")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch < 1 or args.dataset_size < args.batch or args.points < 2:
        p.error("--steps and --batch must be positive, --dataset-size at least --batch, "
                "--points at least 2")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = torch.float32 if args.precision == "float32" else torch.float64
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    ts = torch.linspace(0.0, 10.0, args.points, dtype=torch.float64)
    ys = make_dataset(args.dataset_size, ts, gen).to(dtype)
    ts = ts.to(dtype)
    func = Func().to(dtype)
    solve = choose_solver(args.solver)
    start = time.perf_counter()
    losses = train(func, solve, ts, ys, args, gen)
    seconds = time.perf_counter() - start
    print(f"{args.solver}: {len(losses)} steps in {seconds:.1f} s "
          f"({1e3 * seconds / len(losses):.2f} ms per step), final loss {losses[-1]:.4e}")
    plot(args.out, ts, ys, func, solve)
    print(f"wrote {args.out}")
    if args.losses_out:
        with open(args.losses_out, "w") as f:
            json.dump({"solver": args.solver, "losses": losses, "seconds": seconds}, f)


if __name__ == "__main__":
    main()
