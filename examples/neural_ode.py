"""Train a neural ODE on spirals with clnode, as diffrax's neural_ode example trains it.

The data are 2-d spiral trajectories of a fixed nonlinear ODE (solved by diffrax with fine
tolerances, one random y0 per sample); the model is dy/dt = out_scale * MLP(y), solved by
clnode.jax.diffeqsolve (Tsit5, PIDController(rtol=1e-3, atol=1e-6), SaveAt(ts=ts)) and trained on
the mean squared error with equinox and optax. The training first fits the first 10% of each
series, then the whole series, so that it does not start in a poor minimum.

The one line that differs from a diffrax script is the solver, `from clnode.jax import
diffeqsolve` instead of `diffrax.diffeqsolve`; `--solver diffrax` runs the same script on diffrax's
own, for comparison (tests/python/test_example_neural_ode.py does).

    python examples/neural_ode.py                 # about 1000 steps, then neural_ode.png
    python examples/neural_ode.py --help
"""
import argparse
import functools
import json
import sys
import time
from typing import Any, Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import optax

LENGTH_STRATEGY = (0.1, 1.0)  # fraction of each series trained on, one per phase


def spiral_field(t, y, args):
    """The data's vector field: a damped rotation of y / (1 + y^2) (nonlinear, every trajectory
    spirals in towards 0)."""
    z = y / (1 + y**2)
    return jnp.stack([-0.1 * z[0] + 2.0 * z[1], -2.0 * z[0] - 0.1 * z[1]])


def make_dataset(key, dataset_size, ts):
    """ys (dataset_size, len(ts), 2): spirals from y0 uniform in [-1, 1]^2, solved by diffrax with
    fine tolerances (the data, whatever solver the model is trained with). The y0 are drawn in
    float32 and widened, so that float64's data are float32's problem solved more precisely."""
    y0 = jr.uniform(key, (dataset_size, 2), minval=-1.0, maxval=1.0,
                    dtype=jnp.float32).astype(ts.dtype)

    def one(y0):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(spiral_field), diffrax.Tsit5(), t0=ts[0],
                                  t1=ts[-1], dt0=ts[1] - ts[0], y0=y0, saveat=diffrax.SaveAt(ts=ts),
                                  stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8))
        return sol.ys

    return jax.jit(jax.vmap(one))(y0)


class Func(eqx.Module):
    """The model's vector field, out_scale * MLP(y) (tanh bounds the MLP; out_scale is learnt)."""
    out_scale: jax.Array
    mlp: eqx.nn.MLP

    def __init__(self, width, depth, dtype, *, key):
        self.out_scale = jnp.array(1.0, dtype)
        mlp = eqx.nn.MLP(2, 2, width, depth, activation=jax.nn.softplus,
                         final_activation=jnp.tanh, key=key, dtype=jnp.float32)
        # drawn in float32 for either precision: a float64 model starts from the same weights
        self.mlp = jax.tree_util.tree_map(
            lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, mlp)

    def __call__(self, t, y, args):
        return self.out_scale * self.mlp(y)


class NeuralODE(eqx.Module):
    func: Func
    diffeqsolve: Callable = eqx.field(static=True)  # clnode's or diffrax's (choose_solver)

    def solve(self, ts, y0):
        return self.diffeqsolve(diffrax.ODETerm(self.func), diffrax.Tsit5(), t0=ts[0], t1=ts[-1],
                                dt0=ts[1] - ts[0], y0=y0,
                                stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
                                saveat=diffrax.SaveAt(ts=ts))

    def __call__(self, ts, y0):
        return self.solve(ts, y0).ys


def choose_solver(name, device):
    if name == "clnode":
        from clnode.jax import diffeqsolve  # the one changed line: diffrax.diffeqsolve otherwise
        return diffeqsolve if device is None else functools.partial(diffeqsolve, device=device)
    return diffrax.diffeqsolve


def batches(arrays, batch_size, *, key):
    """Endless random batches: each pass over the dataset in a new random order."""
    n = arrays[0].shape[0]
    while True:
        key, sub = jr.split(key)
        perm = jr.permutation(sub, n)
        for start in range(0, n - batch_size + 1, batch_size):
            idx = perm[start:start + batch_size]
            yield tuple(a[idx] for a in arrays)


def loss_fn(model, ts, yi):
    """Mean squared error against the data, and the batch's mean number of solver steps."""
    sol = jax.vmap(model.solve, in_axes=(None, 0))(ts, yi[:, 0])
    return jnp.mean((yi - sol.ys) ** 2), jnp.mean(sol.stats["num_steps"].astype(ts.dtype))


def make_train_step(optim):
    @eqx.filter_jit
    def train_step(model, opt_state, ts, yi):
        (loss, mean_steps), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(model, ts, yi)
        updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
        model = eqx.apply_updates(model, updates)
        return loss, mean_steps, model, opt_state
    return train_step


class ProgressBar:
    """One line on stderr, rewritten in place on a terminal; elsewhere (a log file, a pipe) a
    line every tenth of the phase."""

    def __init__(self, total, label, quiet):
        self.total, self.label, self.quiet = total, label, quiet
        self.tty = sys.stderr.isatty()

    def update(self, done, text):
        if self.quiet:
            return
        if not self.tty and done != self.total and done % max(1, self.total // 10) != 0:
            return
        width = 24
        filled = width * done // self.total
        bar = "#" * filled + "." * (width - filled)
        line = f"{self.label} [{bar}] {done}/{self.total} {text}"
        sys.stderr.write(("\r" + line + "\x1b[K") if self.tty else line + "\n")
        if self.tty and done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def train(model, ts, ys, args, *, key):
    """The two phases of LENGTH_STRATEGY, args.steps steps each; returns the trained model and a
    record of every step (phase, loss, mean solver steps, wall time)."""
    optim = optax.adabelief(args.lr)
    opt_state = optim.init(eqx.filter(model, eqx.is_inexact_array))
    train_step = make_train_step(optim)  # one jit per phase: each length has its own shapes
    record: dict[str, list[Any]] = {"phase": [], "losses": [], "mean_num_steps": [],
                                    "step_time_s": []}
    for phase, fraction in enumerate(LENGTH_STRATEGY):
        length = max(2, int(round(fraction * ts.shape[0])))
        ts_p, ys_p = ts[:length], ys[:, :length]
        key, sub = jr.split(key)
        data = batches((ys_p,), args.batch, key=sub)
        label = f"phase {phase + 1}/{len(LENGTH_STRATEGY)} ({length} of {ts.shape[0]} points)"
        bar = ProgressBar(args.steps, label, args.quiet)
        for step in range(args.steps):
            (yi,) = next(data)
            start = time.perf_counter()
            loss, mean_steps, model, opt_state = train_step(model, opt_state, ts_p, yi)
            loss = float(loss)  # waits for the step
            elapsed = time.perf_counter() - start
            for name, value in (("phase", phase), ("losses", loss),
                                ("mean_num_steps", float(mean_steps)), ("step_time_s", elapsed)):
                record[name].append(value)
            bar.update(step + 1, f"loss {loss:.4e}  {1e3 * elapsed:.1f} ms/step")
        times = record["step_time_s"][-args.steps:]
        steady = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else float("nan")
        print(f"{label}: loss {record['losses'][-1]:.4e}; first step {times[0]:.2f} s "
              f"(compilation included), then {1e3 * steady:.2f} ms/step (median); "
              f"{record['mean_num_steps'][-1]:.1f} solver steps per trajectory", flush=True)
    return model, record


@eqx.filter_jit
def predict(model, ts, y0):
    return jax.vmap(model, in_axes=(None, 0))(ts, y0)


def plot(path, ts, ys, model, n_show):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pred = predict(model, ts, ys[:n_show, 0])
    fig, ax = plt.subplots(figsize=(6, 6))
    for i in range(n_show):
        color = f"C{i}"
        ax.plot(ys[i, :, 0], ys[i, :, 1], color=color, lw=2, alpha=0.5,
                label="data" if i == 0 else None)
        ax.plot(pred[i, :, 0], pred[i, :, 1], color=color, lw=1, ls="--",
                label="model" if i == 0 else None)
        ax.plot(ys[i, 0, 0], ys[i, 0, 1], "o", color=color)
    ax.set_xlabel("y[0]")
    ax.set_ylabel("y[1]")
    ax.set_title("neural ODE on spirals: data and model from the same y0")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--solver", choices=("clnode", "diffrax"), default="clnode",
                   help="the model's diffeqsolve: clnode.jax's (default) or diffrax's")
    p.add_argument("--steps", type=int, default=500,
                   help="training steps per phase (first 10%% of the series, then all of it; "
                        "default 500, so 1000 in all)")
    p.add_argument("--batch", type=int, default=32, help="trajectories per step (default 32)")
    p.add_argument("--dataset-size", type=int, default=256, help="spirals (default 256)")
    p.add_argument("--seed", type=int, default=5678, help="data, initial weights and batches")
    p.add_argument("--precision", choices=("float32", "float64"), default="float32",
                   help="float64 sets jax_enable_x64 (default float32)")
    p.add_argument("--lr", type=float, default=3e-3, help="adabelief's learning rate")
    p.add_argument("--out", default="neural_ode.png", help="the PNG written at the end")
    p.add_argument("--device", default=None,
                   help="clnode's device string (default $CLNODE_DEVICE or host); not for diffrax")
    p.add_argument("--quiet", action="store_true", help="no progress bar, only the summaries")
    p.add_argument("--losses-out", default=None, metavar="FILE",
                   help="write every step's loss and mean solver steps as JSON")
    args = p.parse_args(argv)
    for name in ("steps", "batch", "dataset_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.batch > args.dataset_size:
        p.error(f"--batch {args.batch} is larger than --dataset-size {args.dataset_size}")
    if args.device is not None and args.solver != "clnode":
        print("neural_ode.py: --device is clnode's; ignored with --solver diffrax", file=sys.stderr)
    return args


def main(argv=None):
    args = parse_args(argv)
    jax.config.update("jax_enable_x64", args.precision == "float64")
    data_key, model_key, loader_key = jr.split(jr.PRNGKey(args.seed), 3)
    dtype = jnp.dtype(args.precision)
    ts = jnp.linspace(0.0, 10.0, 100, dtype=jnp.float32).astype(dtype)  # float32's, widened
    start = time.perf_counter()
    ys = make_dataset(data_key, args.dataset_size, ts)
    print(f"data: {args.dataset_size} spirals of {ts.shape[0]} points, {ys.dtype} "
          f"({time.perf_counter() - start:.1f} s); model solved by {args.solver}", flush=True)
    model = NeuralODE(Func(64, 2, dtype, key=model_key), choose_solver(args.solver, args.device))
    start = time.perf_counter()
    model, record = train(model, ts, ys, args, key=loader_key)
    total = time.perf_counter() - start
    print(f"trained: {len(record['losses'])} steps in {total:.1f} s, final loss "
          f"{record['losses'][-1]:.4e}", flush=True)
    start = time.perf_counter()
    plot(args.out, ts, ys, model, n_show=min(4, args.dataset_size))
    print(f"saved {args.out} ({time.perf_counter() - start:.1f} s)", flush=True)
    if args.losses_out is not None:
        record.update(solver=args.solver, precision=args.precision, seed=args.seed,
                      train_time_s=total)
        with open(args.losses_out, "w") as f:
            json.dump(record, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
