#!/usr/bin/env python3
"""clnode against diffrax on the same problems, timed in one run, with the ratios.

The seed problem (the built-in 10 -> 100 -> 100 -> 10 softplus MLP, Tsit5, PIDController rtol
1e-4 atol 1e-6, t in [0, 50], dt0 0.02, max_steps 4096) at each batch size, with the distinct
initial states clnode-bench uses (y0[i] = 0.05 * ((i * 7919) % 41) / 41 over the batch x 10
values). diffrax 0.7.2 runs `jax.vmap(diffeqsolve)` jit-compiled on JAX's default device, the
compilation excluded (one warm-up call first). clnode is timed the same way where its Python
package is importable (by this interpreter, or the one --clnode-python names): `clnode.solve`
called in one process after one warm-up call (numpy in and out, the Python layer's own cost
included, as diffrax's figure includes JAX's dispatch) -- the ratio column compares these two.
Next to it, `clnode-solve --json` in a fresh process per solve (the JSON's wall_seconds, after
one warm-up process that fills the probe cache): the first solve of a process, with its set-up,
which is what a command-line run pays. Each figure is the median of --repeat solves. The steps
per trajectory of both are printed so that one can see the same problem was solved.

    python3 tools/bench_peers.py [--batches 1,64,1024,4096] [--precisions fp32,fp64]
                                 [--repeat 5] [--clnode-solve build/tools/clnode-solve]
                                 [--clnode-python build/python-venv/bin/python]
                                 [--device host] [--json FILE]

fp64 runs diffrax with jax_enable_x64 (in a child process of its own, so that the fp32 runs keep
JAX's defaults). Needs numpy, jax, equinox and diffrax==0.7.2 for the diffrax side; without them
only clnode's times are printed; without the clnode package the ratio is taken against
clnode-solve's fresh-process time (and says so). Timings on a shared machine are noisy: rerun on a quiet one.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEED = os.path.join(ROOT, "lib", "model", "seed.safetensors")
N = 10


def y0_values(batch):
    return [0.05 * float((i * 7919) % 41) / 41.0 for i in range(batch * N)]


def load_safetensors(path):
    """{name: (dtype string, shape, bytes)} from a safetensors file (no extra package needed)."""
    with open(path, "rb") as f:
        raw = f.read()
    hlen = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + hlen])
    data = raw[8 + hlen:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[a:b])
    return out, header.get("__metadata__", {})


# ---------------------------------------------------------------- diffrax (child process)

def diffrax_worker(precision, batches, repeat):
    import time

    import numpy as np
    if precision == "fp64":
        import jax
        jax.config.update("jax_enable_x64", True)
    import jax
    import jax.numpy as jnp
    import diffrax

    dt = jnp.float64 if precision == "fp64" else jnp.float32
    tensors, meta = load_safetensors(SEED)
    npdt = {"F32": np.float32, "F64": np.float64}
    layers = []
    i = 0
    while f"layers.{i}.weight" in tensors:
        w = tensors[f"layers.{i}.weight"]
        b = tensors[f"layers.{i}.bias"]
        layers.append((jnp.asarray(np.frombuffer(w[2], npdt[w[0]]).reshape(w[1]), dt),
                       jnp.asarray(np.frombuffer(b[2], npdt[b[0]]).reshape(b[1]), dt)))
        i += 1
    if meta.get("activation", "softplus") != "softplus":
        raise SystemExit("bench_peers: the seed model is expected to use softplus")

    def field(t, y, args):
        for j, (w, b) in enumerate(layers):
            y = w @ y + b
            if j + 1 < len(layers):
                y = jax.nn.softplus(y)
        return y

    def solve(y0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field), diffrax.Tsit5(), t0=0.0, t1=50.0, dt0=0.02, y0=y0,
            stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6), max_steps=4096,
            throw=False)
        return sol.ys, sol.stats["num_steps"]

    run = jax.jit(jax.vmap(solve))
    results = {}
    with jax.default_matmul_precision("highest"):
        for batch in batches:
            y0 = jnp.asarray(np.array(y0_values(batch)).reshape(batch, N), dt)
            jax.block_until_ready(run(y0))  # compile
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                ys, steps = jax.block_until_ready(run(y0))
                times.append(time.perf_counter() - t0)
            results[batch] = {"seconds": statistics.median(times),
                              "steps": float(np.mean(np.asarray(steps)))}
    return {"device": str(jax.devices()[0]), "jax": jax.__version__,
            "diffrax": diffrax.__version__, "results": results}


def run_worker(python, worker, precision, batches, repeat, *extra):
    """Runs this script as --WORKER PRECISION in a child process; (its JSON, None) or (None, why)."""
    cmd = [python, os.path.abspath(__file__), f"--{worker}", precision, *extra,
           "--batches", ",".join(map(str, batches)), "--repeat", str(repeat)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
    out = json.loads(p.stdout)
    out["results"] = {int(k): v for k, v in out["results"].items()}
    return out, None


# ---------------------------------------------------------------- clnode in process (child)

def clnode_worker(precision, batches, repeat, device):
    import time

    import numpy as np

    import clnode

    model = clnode.seed_model()
    ctx = clnode.Context(device)
    results = {}
    for batch in batches:
        y0 = np.array(y0_values(batch)).reshape(batch, N)
        kw = dict(t0=0.0, t1=50.0, dt0=0.02, rtol=1e-4, atol=1e-6, max_steps=4096,
                  precision=precision, context=ctx)
        clnode.solve(model, y0, **kw)  # warm-up: the probe, the packed model, the caches
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            sol = clnode.solve(model, y0, **kw)
            times.append(time.perf_counter() - t0)
        results[batch] = {"seconds": statistics.median(times),
                          "steps": float(np.mean(sol.stats["num_steps"]))}
    return {"device": ctx.device_name, "version": clnode.__version__, "results": results}


# ---------------------------------------------------------------- clnode-solve (fresh processes)

def run_clnode(exe, device, precision, batch, repeat):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        v = y0_values(batch)
        for b in range(batch):
            f.write(",".join(repr(x) for x in v[b * N:(b + 1) * N]) + "\n")
        path = f.name
    cmd = [exe, "--y0-file", path, "--json", "--precision", precision, "--device", device]
    try:
        times, steps, name = [], None, ""
        for r in range(repeat + 1):  # the first fills the probe cache: not counted
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode not in (0, 1):
                raise SystemExit(f"bench_peers: {' '.join(cmd)} failed: {p.stderr.strip()}")
            js = json.loads(p.stdout)
            name = js.get("device", "")
            trajs = js["trajectories"]
            steps = sum(t["num_steps"] for t in trajs) / len(trajs)
            if r > 0:
                times.append(js["wall_seconds"])
        return {"seconds": statistics.median(times), "steps": steps, "device": name}
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,64,1024,4096")
    ap.add_argument("--precisions", default="fp32,fp64")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--clnode-solve", default=os.path.join(ROOT, "build", "tools", "clnode-solve"))
    ap.add_argument("--clnode-python", default=sys.executable,
                    help="an interpreter that imports the clnode package (default: this one)")
    ap.add_argument("--device", default="host")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--diffrax-worker", help=argparse.SUPPRESS)
    ap.add_argument("--clnode-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",") if b]
    if args.repeat < 1:
        raise SystemExit("bench_peers: --repeat must be at least 1")
    if args.diffrax_worker:
        print(json.dumps(diffrax_worker(args.diffrax_worker, batches, args.repeat)))
        return 0
    if args.clnode_worker:
        print(json.dumps(clnode_worker(args.clnode_worker, batches, args.repeat, args.device)))
        return 0
    if not os.access(args.clnode_solve, os.X_OK):
        raise SystemExit(f"bench_peers: {args.clnode_solve} not found (build first, or "
                         "--clnode-solve PATH)")

    rows = []
    print(f"seed problem, tsit5 rtol 1e-4 atol 1e-6, t in [0, 50]; median of {args.repeat} "
          "solves each")
    for precision in args.precisions.split(","):
        dx, why = run_worker(sys.executable, "diffrax-worker", precision, batches, args.repeat)
        if dx is None:
            print(f"{precision}: diffrax not run ({why}); clnode only")
        else:
            print(f"{precision}: diffrax {dx['diffrax']} on JAX {dx['jax']} ({dx['device']})")
        cp, cwhy = run_worker(args.clnode_python, "clnode-worker", precision, batches, args.repeat,
                              "--device", args.device)
        if cp is None:
            print(f"  clnode's Python package not run with {args.clnode_python} ({cwhy}): the "
                  "ratio is against clnode-solve's fresh process")
        print(f"  {'batch':>6} {'diffrax ms':>11} {'clnode ms':>10} {'us/step':>8} "
              f"{'diffrax/clnode':>15} {'steps d/c':>12} {'fresh process ms':>17}")
        for batch in batches:
            c = run_clnode(args.clnode_solve, args.device, precision, batch, args.repeat)
            d = dx["results"][batch] if dx else None
            w = cp["results"][batch] if cp else c  # the warm in-process solve where it ran
            us_step = 1e6 * w["seconds"] / w["steps"] if w["steps"] else float("nan")
            row = {"precision": precision, "batch": batch, "clnode_seconds": w["seconds"],
                   "clnode_in_process": cp is not None, "clnode_steps": w["steps"],
                   "clnode_fresh_process_seconds": c["seconds"], "clnode_device": c["device"]}
            if d:
                row.update(diffrax_seconds=d["seconds"], diffrax_steps=d["steps"],
                           ratio=d["seconds"] / w["seconds"])
                print(f"  {batch:>6} {1e3 * d['seconds']:>11.3f} {1e3 * w['seconds']:>10.3f} "
                      f"{us_step:>8.1f} {row['ratio']:>14.2f}x {d['steps']:>5.1f}/{w['steps']:<5.1f} "
                      f"{1e3 * c['seconds']:>17.3f}")
            else:
                print(f"  {batch:>6} {'-':>11} {1e3 * w['seconds']:>10.3f} {us_step:>8.1f} "
                      f"{'-':>15} {'-':>5}/{w['steps']:<5.1f} {1e3 * c['seconds']:>17.3f}")
            rows.append(row)
        if rows:
            where = "clnode.solve in process" if cp else "clnode-solve"
            print(f"  clnode device: {rows[-1]['clnode_device']}; clnode ms: {where}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
