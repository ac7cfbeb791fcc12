#!/usr/bin/env python3
"""clnode.torch against torchdiffeq and torchode: a training step of examples/torch_neural_ode.py,
timed in one run.

The step: the solve of a batch of spirals from their first points, the mean squared error
against the data and loss.backward() (no optimiser step), float32, rtol 1e-3, atol 1e-6, the
field out_scale * net(y) (Linear(2, 64) Softplus Linear(64, 64) Softplus Linear(64, 2) Tanh) of
the example, trained first for --train Adam steps with clnode (so that the steps are those of a
trained model). Solvers: clnode.torch.odeint (dopri5), torchdiffeq's odeint and odeint_adjoint
(dopri5; torchdiffeq 0.2.5 has no tsit5) and torchode (Tsit5, IntegralController,
AutoDiffAdjoint, eager; its step sizes not differentiated), at each batch size and number of
save times (the first P of 100 points on [0, 10]). They take turns: --rounds rounds, in each of
which every solver runs its share of --repeat steps; the figures are the medians. Below them,
each solver's first step in the process (batch 32, 10 points, before the training: its set-up
included, torch.library's for clnode's op). --threads sets
torch.set_num_threads and CLNODE_NUM_THREADS (default 1: one thread each). --clock cpu times
each step in the calling thread's CPU time (time.thread_time) instead of wall time: with one
thread each, what a step computes, without the waits for the cores that other processes on a
shared machine add to wall time (it leaves out work on other threads: use it with --threads 1).

    python3 bench/bench_torch.py [--batches 32,256] [--points 10,100] [--repeat 9]
                                 [--rounds 3] [--threads 1] [--train 300] [--clock wall|cpu]
                                 [--markdown FILE]
"""
import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_example():
    spec = importlib.util.spec_from_file_location("torch_neural_ode",
                                                  ROOT / "examples" / "torch_neural_ode.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", default="32,256")
    p.add_argument("--points", default="10,100")
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--train", type=int, default=300, help="Adam steps before timing")
    p.add_argument("--solvers", default="clnode,torchdiffeq,odeint_adjoint,torchode")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall time, or the calling thread's CPU time (with --threads 1)")
    p.add_argument("--markdown", default=None)
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    os.environ["CLNODE_NUM_THREADS"] = str(args.threads)
    import torch
    torch.set_num_threads(args.threads)
    ex = load_example()
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    ts = torch.linspace(0.0, 10.0, 100, dtype=torch.float64)
    data = ex.make_dataset(256, ts, gen).float()
    ts = ts.float()
    func = ex.Func().float()
    solvers = {"clnode": ex.choose_solver("clnode")}
    names = args.solvers.split(",")
    if "torchdiffeq" in names or "odeint_adjoint" in names:
        import torchdiffeq
        solvers["torchdiffeq"] = ex.choose_solver("torchdiffeq")
        solvers["odeint_adjoint"] = lambda f, y0, t: torchdiffeq.odeint_adjoint(
            f, y0, t, rtol=ex.RTOL, atol=ex.ATOL, method="dopri5").transpose(0, 1)
    if "torchode" in names:
        solvers["torchode"] = ex.choose_solver("torchode")
    solvers = {n: solvers[n] for n in names}
    first = {}
    y_first, t_first = data[:32, :10], ts[:10]
    for name, solve in solvers.items():  # the first step of each in this process
        start = time.perf_counter()
        func.zero_grad()
        (solve(func, y_first[:, 0], t_first) - y_first).square().mean().backward()
        first[name] = time.perf_counter() - start
    if args.train:
        opt = torch.optim.Adam(func.parameters(), lr=3e-3)
        for step in range(args.train):
            n = 10 if step < args.train // 2 else 100
            yi = data[torch.randperm(256, generator=gen)[:32], :n]
            opt.zero_grad()
            (solvers["clnode"](func, yi[:, 0], ts[:n]) - yi).square().mean().backward()
            opt.step()

    def step(solve, yi, t):
        func.zero_grad()
        loss = (solve(func, yi[:, 0], t) - yi).square().mean()
        loss.backward()
        return float(loss.detach())

    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    rows = []
    for B in map(int, args.batches.split(",")):
        for P in map(int, args.points.split(",")):
            yi, t = data[:B, :P], ts[:P]
            times = {n: [] for n in solvers}
            losses = {}
            for name, solve in solvers.items():  # warm-up
                losses[name] = step(solve, yi, t)
            per = max(1, args.repeat // args.rounds)
            for r in range(args.rounds):
                order = list(solvers.items())
                if r % 2:
                    order.reverse()
                for name, solve in order:
                    for _ in range(per):
                        start = clock()
                        step(solve, yi, t)
                        times[name].append(clock() - start)
            med = {n: 1e3 * statistics.median(v) for n, v in times.items()}
            rows.append(dict(batch=B, points=P, ms=med, loss=losses))
            print(f"B={B:4d} P={P:3d} " + "  ".join(
                f"{n} {m:8.2f} ms" + (f" ({m / med['clnode']:.1f}x)" if n != "clnode" else "")
                for n, m in med.items()), flush=True)
    lines = ["| batch, save times | " + " | ".join(solvers) + " |",
             "|---|" + "---|" * len(solvers)]
    for r in rows:
        lines.append(f"| {r['batch']}, {r['points']} | " + " | ".join(
            f"{r['ms'][n]:.2f} ms" + (f" ({r['ms'][n] / r['ms']['clnode']:.1f}x)"
                                      if n != "clnode" else "") for n in solvers) + " |")
    lines.append("| first step in the process (batch 32, 10 points, untrained) | " + " | ".join(
        f"{1e3 * first[n]:.0f} ms" for n in solvers) + " |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(
            f"Training step, float32, {args.threads} thread(s), --train {args.train}, "
            f"{'CPU' if args.clock == 'cpu' else 'wall'} time, "
            f"median of {args.repeat} in {args.rounds} rounds (ratio: peer / clnode)\n\n"
            + text + "\n")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(dict(rows=rows, first=first,
                                                           threads=args.threads,
                                                           clock=args.clock)))


if __name__ == "__main__":
    sys.exit(main())
