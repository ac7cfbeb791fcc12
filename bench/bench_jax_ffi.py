"""clnode.jax's custom calls timed: the cost of one call inside a jitted program against the
library's own work for it, and a jitted value_and_grad of the seed problem against diffrax's.

    python3 bench/bench_jax_ffi.py [--batches 1,64,1024] [--repeat 200]
    python3 bench/bench_jax_ffi.py --grid [--widths 64,256] [--batches 32,256,1024] [--rounds 3]

1. Per call: a B = 1 solve of zero length (t0 == t1: no step) of the seed model, 64 of them
   chained inside one jitted program (lax.scan, each call's y0 the last one's y(t1)), per call;
   against the same handler called directly from C's side with the same operands (ctypes, a
   synthetic call frame: the library's own work plus the handler's decoding) and against a
   ctypes call that returns at once (the metadata query: ctypes' own cost, subtracted).
2. The seed problem (the built-in seed model: 10-100-100-10 softplus, Tsit5, t in [0, 50],
   dt0 0.02, PIDController(rtol 1e-4, atol 1e-6), float32): jax.jit(jax.value_and_grad) of
   sum(y(t1)) over jax.vmap of B initial states, clnode.jax.diffeqsolve against
   diffrax.diffeqsolve, medians of --repeat calls taking turns (compilation excluded).
3. --grid: one eqx.filter_value_and_grad of a neural ODE's loss (diffrax's neural_ode field:
   out_scale * MLP(y), y of 2 values, depth 2, softplus then tanh; Tsit5, PIDController(rtol
   1e-3, atol 1e-6), t in [0, 10] saved at 100 points, float32), jitted, for each width x batch,
   clnode.jax.diffeqsolve against diffrax.diffeqsolve taking turns (--rounds calls each, the
   median; compilation excluded), then again with one CPU-bound process (a Python busy loop)
   running beside both: a table of diffrax / clnode per cell for each.
Timings on a shared machine are noisy: with a load average above the CPU count, the per-call
figures are the medians of the fastest tenth of the runs."""
import argparse
import ctypes as C
import os
import statistics
import sys
import time

import numpy as np

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

import clnode
import clnode.jax
from clnode.jax import diffeqsolve

HERE = os.path.dirname(os.path.abspath(__file__))


sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from test_jax import seed_func  # noqa: E402  (the seed model as an equinox module)


def solve(solver, f, y0, t1=50.0):
    return solver(diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, t1, 0.02, y0,
                  stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6)).ys[-1]


def median_us(fn, repeat):
    """The median time of fn in microseconds; on a loaded machine (load above the CPUs) the
    fastest tenth's median instead (the runs least disturbed by other processes)."""
    fn()
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    if os.getloadavg()[0] > (os.cpu_count() or 1):
        out = sorted(out)[:max(1, len(out) // 10)]
    return 1e6 * statistics.median(out)


def per_call(repeat):
    f = seed_func()
    y0 = jnp.zeros((10,), jnp.float32)

    def chain(y):
        def body(y, _):
            return solve(diffeqsolve, f, y, t1=0.0), None
        return jax.lax.scan(body, y, None, length=64)[0]

    run = jax.jit(chain)
    jax.block_until_ready(run(y0))
    in_program = median_us(lambda: jax.block_until_ready(run(y0)), repeat) / 64
    empty = jax.jit(lambda y: jax.lax.scan(lambda y, _: (y + 0.0, None), y, None, length=64)[0])
    jax.block_until_ready(empty(y0))
    loop = median_us(lambda: jax.block_until_ready(empty(y0)), repeat) / 64

    import test_jax_ffi_frames as fr
    from clnode import _solve
    opts = _solve._table_options(dict(method="tsit5", max_steps=4096, precision="fp32",
                                      rtol=1e-4, atol=1e-6, constant_step=False))
    opts.update(save_t0=False, save_t1=True, save_steps=False)
    h = fr.XLA["plan"](fr._ffi._texts(opts), "host", (10, 100, 100, 10), (True, True, True), "softplus",
                       "identity", False, 0, 0, 1, False, False, False, False, False, True, 1)
    c = fr.Call()
    params = np.concatenate([np.ravel(np.asarray(a, np.float32)) for a in
                             jax.tree_util.tree_leaves(f) if eqx.is_array(a)])
    z = np.zeros(0, np.float32)
    ops = [np.zeros((1, 10), np.float32), np.float32(0.0), np.float32(0.0), np.float32(0.02), z,
           z, z, params, z]
    rets = fr.results(1, n=10, dtype=np.float32)
    frame = c.frame(ops, rets, {"plan": h, "keep": 0})
    fwd = fr.handler("fwd")
    md = fr.Metadata(struct_size=C.sizeof(fr.Metadata))
    ext = fr.MetadataExt(fr.Ext(C.sizeof(fr.MetadataExt), 1, None), C.pointer(md))
    query = c.frame([], [], {}, ext=C.cast(C.pointer(ext), C.c_void_p))
    p_frame, p_query = C.pointer(frame), C.pointer(query)
    n = 2000

    def loop_of(fn, arg):
        def go():
            for _ in range(n):
                fn(arg)
        return go
    direct = median_us(loop_of(fwd, p_frame), 20) / n
    ctypes_cost = median_us(loop_of(fwd, p_query), 20) / n
    assert not c.errors, c.errors
    return dict(in_program_us=in_program, empty_loop_us=loop, direct_us=direct,
                ctypes_us=ctypes_cost, library_us=direct - ctypes_cost,
                ffi_overhead_us=in_program - loop - (direct - ctypes_cost))


def gradients(batches, repeat):
    f = seed_func()
    params, static = eqx.partition(f, eqx.is_inexact_array)
    rows = []
    for B in batches:
        y0s = jax.random.normal(jax.random.PRNGKey(0), (B, 10), jnp.float32)
        fns = {}
        for name, solver in (("clnode", diffeqsolve), ("diffrax", diffrax.diffeqsolve)):
            def loss(p, y0s, solver=solver):
                g = eqx.combine(p, static)
                return jnp.sum(jax.vmap(lambda y: solve(solver, g, y))(y0s))
            fns[name] = jax.jit(jax.value_and_grad(loss))
            jax.block_until_ready(fns[name](params, y0s))
        times = {k: [] for k in fns}
        for _ in range(repeat):
            for k, fn in fns.items():
                t = time.perf_counter()
                jax.block_until_ready(fn(params, y0s))
                times[k].append(time.perf_counter() - t)
        med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
        rows.append((B, med["clnode"], med["diffrax"], med["diffrax"] / med["clnode"]))
    return rows


GRID_POINTS, GRID_T1 = 100, 10.0


def grid_cell(width, B, rounds):
    """One cell of --grid: the median seconds of clnode's and diffrax's jitted
    filter_value_and_grad (taking turns, `rounds` calls each after one untimed)."""
    class Field(eqx.Module):
        out_scale: jax.Array
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.out_scale * self.mlp(y)

    mlp = eqx.nn.MLP(2, 2, width, 2, activation=jax.nn.softplus, final_activation=jnp.tanh,
                     key=jax.random.PRNGKey(1), dtype=jnp.float32)
    field = Field(jnp.asarray(1.0, jnp.float32), mlp)
    ts = jnp.asarray(np.linspace(0.0, GRID_T1, GRID_POINTS), jnp.float32)
    rng = np.random.default_rng(B + width)
    y0s = jnp.asarray(rng.uniform(-0.6, 1.0, (B, 2)), jnp.float32)
    target = jnp.asarray(rng.uniform(-1.0, 1.0, (B, GRID_POINTS, 2)), jnp.float32)
    fns = {}
    for name, solver in (("clnode", diffeqsolve), ("diffrax", diffrax.diffeqsolve)):
        def loss(field, y0s, target, solver=solver):
            def one(y0):
                return solver(diffrax.ODETerm(field), diffrax.Tsit5(), ts[0], ts[-1],
                              ts[1] - ts[0], y0, saveat=diffrax.SaveAt(ts=ts),
                              stepsize_controller=diffrax.PIDController(rtol=1e-3,
                                                                        atol=1e-6)).ys
            return jnp.mean((jax.vmap(one)(y0s) - target) ** 2)
        fns[name] = eqx.filter_jit(eqx.filter_value_and_grad(loss))
        jax.block_until_ready(fns[name](field, y0s, target))
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(fn(field, y0s, target))
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def grid(widths, batches, rounds, compete):
    """--grid's table (markdown) of width x batch: clnode ms, diffrax ms, diffrax / clnode;
    compete: with a CPU-bound process running beside both."""
    import subprocess
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if compete else None
    try:
        lines = [f"{'with one CPU-bound process beside' if compete else 'alone'} "
                 f"(load {os.getloadavg()[0]:.1f})",
                 "| width | B | clnode ms | diffrax ms | diffrax / clnode |",
                 "|---|---|---|---|---|"]
        for width in widths:
            for B in batches:
                m = grid_cell(width, B, rounds)
                lines.append(f"| {width} | {B} | {1e3 * m['clnode']:.1f} | "
                             f"{1e3 * m['diffrax']:.1f} | {m['diffrax'] / m['clnode']:.2f} |")
                print(lines[-1], file=sys.stderr, flush=True)
        return "\n".join(lines)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", help="default 1,64,1024 (--grid: 32,256,1024)")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--grid", action="store_true", help="the width x batch grid (see 3.)")
    ap.add_argument("--widths", default="64,256")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"clnode {clnode.__version__}, jax {jax.__version__}, CPUs {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.1f}")
    if args.grid:
        widths = [int(w) for w in args.widths.split(",")]
        batches = [int(b) for b in (args.batches or "32,256,1024").split(",")]
        for compete in (False, True):
            print(grid(widths, batches, args.rounds, compete), flush=True)
        return
    pc = per_call(args.repeat)
    print("per call (us): " + ", ".join(f"{k} {v:.2f}" for k, v in pc.items()))
    print("| B | clnode ms | diffrax ms | diffrax / clnode |")
    print("|---|---|---|---|")
    for B, c, d, r in gradients([int(b) for b in (args.batches or "1,64,1024").split(",")],
                                max(5, args.repeat // 10)):
        print(f"| {B} | {c:.3f} | {d:.3f} | {r:.2f} |")


if __name__ == "__main__":
    main()
