#!/usr/bin/env python3
"""clnode against diffrax on the same problems, timed in one run, with the ratios.

The seed problem (the built-in 10 -> 100 -> 100 -> 10 softplus MLP, Tsit5, PIDController rtol
1e-4 atol 1e-6, t in [0, 50], dt0 0.02, max_steps 4096) at each batch size, with the distinct
initial states clnode-bench uses (y0[i] = 0.05 * ((i * 7919) % 41) / 41 over the batch x 10
values). diffrax 0.7.2 runs `jax.vmap(diffeqsolve)` jit-compiled on JAX's default device, the
compilation excluded (one warm-up call first). clnode is timed the same way where its Python
package is importable (by this interpreter, or the one --clnode-python names): `clnode.solve`
called in a process of its own after one warm-up call (numpy in and out, the Python layer's own
cost included, as diffrax's figure includes JAX's dispatch) -- the ratio column compares these
two. The two processes take turns: each batch size is timed in --rounds rounds, in each of
which diffrax and clnode run their share of the --repeat solves one after the other (which goes
first alternates), so that whatever else the machine does at that moment weighs on both. The
times are the medians of all --repeat solves; the ratio is the median of the rounds' ratios
(each the ratio of that round's medians), printed with the lowest and highest of them: a wide
range says the machine was not quiet. Next to it, `clnode-solve --json` in a fresh process per
solve (the JSON's wall_seconds, after one warm-up process that fills the probe cache): the first
solve of a process, with its set-up, which is what a command-line run pays. The steps per
trajectory of both are printed so that one can see the same problem was solved.

    python3 bench/bench_peers.py [--batches 1,64,1024,4096] [--precisions fp32,fp64]
                                 [--repeat 5] [--rounds 5]
                                 [--clnode-solve build/tools/clnode-solve]
                                 [--clnode-python build/python-venv/bin/python]
                                 [--device host] [--json FILE] [--markdown FILE] [--grad]

--grad times the gradient instead: jax.grad (jit-compiled, compilation excluded) of the loss
sum(y(t1)) over the vmapped diffrax solve with its default adjoint (RecursiveCheckpointAdjoint),
with respect to y0 and every parameter, against clnode's solve with keep_tape followed by
clnode_gradient_compute on the host (bench/bench_grad_worker.c, built as build/bench/
bench_grad_worker, or --clnode-grad-worker PATH: the C API in a process of its own, since the
Python package has no gradient yet), taking turns as above. Next to the ratio, the relative
difference of the two gradients' sums over dL/dy0 shows that both differentiate the same solve.
Its Markdown section is "bench_peers_grad". Both sides are needed.

fp64 runs diffrax with jax_enable_x64 (in a child process of its own, so that the fp32 runs keep
JAX's defaults). Needs numpy, jax, equinox and diffrax==0.7.2 for the diffrax side; without them
only clnode's times are printed; without the clnode package the ratio is taken against
clnode-solve's fresh-process time (and says so). Timings on a shared machine are noisy: rerun on a quiet one.

--markdown FILE (doc/benchmarks.md) also writes the tables as Markdown into FILE, as the section
between the lines "<!-- begin bench_peers -->" and "<!-- end bench_peers -->": a section of that
name is replaced, else it is appended; every other byte of FILE is kept, and FILE is replaced
(through a temporary file beside it) only when the run completed. The section is stamped with
the machine (the CPU model of /proc/cpuinfo and the CPUs online), clnode's device description
(on the host it names the ISA of its kernels: AVX-512, AVX2+FMA or portable fma()), the commit
of this source tree (git rev-parse --short HEAD, "dirty" when it has changes), the command line
and the date.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

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


# ---------------------------------------------------------------- the workers (child processes)
#
# A worker sets up its solver, prints one JSON line about itself, then answers requests on its
# standard input, a JSON line each: {"batch": B, "repeat": k, "warm": w} -> {"times": [k
# seconds], "steps": mean steps per trajectory of the last solve}: w untimed solves, then k timed
# ones. The first request for a batch size first makes the warm-up call (compilation, probes,
# caches).

def serve(prepare, info):
    """prepare(batch) -> (solve, steps[, check]): solve() solves once, steps(result) its mean
    steps, check(result) (--grad) the sum of the gradient with respect to y0."""
    print(json.dumps(info), flush=True)
    ready = {}
    for line in sys.stdin:
        req = json.loads(line)
        batch = int(req["batch"])
        if batch not in ready:
            ready[batch] = prepare(batch)
            ready[batch][0]()
        solve, steps = ready[batch][:2]
        check = ready[batch][2] if len(ready[batch]) > 2 else None
        for _ in range(int(req.get("warm", 0))):
            solve()
        times, out = [], None
        for _ in range(int(req["repeat"])):
            t0 = time.perf_counter()
            out = solve()
            times.append(time.perf_counter() - t0)
        ans = {"times": times, "steps": None if out is None else steps(out)}
        if check is not None and out is not None:
            ans["check"] = check(out)
        print(json.dumps(ans), flush=True)


def diffrax_worker(precision, grad=False):
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
        """The seed MLP with the parameters `args` (a list of (w, b) per layer)."""
        for j, (w, b) in enumerate(args):
            y = w @ y + b
            if j + 1 < len(args):
                y = jax.nn.softplus(y)
        return y

    def solve_params(params, y0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field), diffrax.Tsit5(), t0=0.0, t1=50.0, dt0=0.02, y0=y0,
            args=params, stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
            max_steps=4096, throw=False)
        return sol.ys, sol.stats["num_steps"]

    run = jax.jit(jax.vmap(lambda y0: solve_params(layers, y0)))

    def loss(params, y0):
        """sum(y(t1)) over the batch: every cotangent 1, as bench_grad_worker's."""
        ys, steps = jax.vmap(solve_params, in_axes=(None, 0))(params, y0)
        return jnp.sum(ys), steps

    # the default adjoint (RecursiveCheckpointAdjoint): jax.grad of y0 and every parameter
    run_grad = jax.jit(jax.grad(loss, argnums=(0, 1), has_aux=True))

    def prepare(batch):
        y0 = jnp.asarray(np.array(y0_values(batch)).reshape(batch, N), dt)
        if grad:
            return (lambda: jax.block_until_ready(run_grad(layers, y0)),
                    lambda out: float(np.mean(np.asarray(out[1]))),
                    lambda out: float(np.sum(np.asarray(out[0][1], np.float64))))
        return (lambda: jax.block_until_ready(run(y0)),
                lambda out: float(np.mean(np.asarray(out[1]))))

    with jax.default_matmul_precision("highest"):
        serve(prepare, {"device": str(jax.devices()[0]), "jax": jax.__version__,
                        "diffrax": diffrax.__version__})


def clnode_worker(precision, device):
    import numpy as np

    import clnode

    model = clnode.seed_model()
    ctx = clnode.Context(device)

    def prepare(batch):
        y0 = np.array(y0_values(batch)).reshape(batch, N)
        kw = dict(t0=0.0, t1=50.0, dt0=0.02, rtol=1e-4, atol=1e-6, max_steps=4096,
                  precision=precision, context=ctx)
        return (lambda: clnode.solve(model, y0, **kw),
                lambda sol: float(np.mean(sol.stats["num_steps"])))

    serve(prepare, {"device": ctx.device_name, "version": clnode.__version__})


class WorkerError(Exception):
    pass


class Worker:
    """This script as --KIND PRECISION in a child process that stays up for the whole run."""

    def __init__(self, cmd):
        self.err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True)
        self.info = self._answer()

    def _answer(self):
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.err.seek(0)
            lines = self.err.read().strip().splitlines()
            raise WorkerError(lines[-1] if lines else f"exit status {self.proc.returncode}")
        return json.loads(line)

    def run(self, batch, repeat, warm=0):
        try:
            self.proc.stdin.write(json.dumps({"batch": batch, "repeat": repeat, "warm": warm})
                                  + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the worker is gone: _answer says why
        return self._answer()

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
        self.err.close()


def start_worker(python, kind, precision, *extra):
    """(the worker, None), or (None, why it did not start)."""
    return start_command([python, os.path.abspath(__file__), f"--{kind}", precision, *extra])


def start_command(cmd):
    """A worker running cmd: (the worker, None), or (None, why it did not start)."""
    try:
        return Worker(cmd), None
    except (WorkerError, OSError) as e:
        return None, str(e) or type(e).__name__


def timed_rounds(dx, cp, batch, repeat, rounds):
    """Times both workers (either may be None) on `batch` in turns: `rounds` rounds sharing the
    `repeat` solves of each, the first to go alternating, each turn after one untimed solve (the
    other side's threads have had the CPUs: a worker thread that slept through the other's turn,
    on a virtual CPU the hypervisor has halted meanwhile, takes its time to come back, and the
    figures are the steady state's, as diffrax's and clnode's repeated calls see it). Returns
    {worker: (times, steps, check)} and the rounds' ratios of medians (diffrax over clnode; empty unless
    both ran)."""
    workers = [w for w in (dx, cp) if w is not None]
    for w in workers:
        w.run(batch, 0)  # warm-up
    rounds = min(rounds, repeat)
    shares = [repeat // rounds + (1 if r < repeat % rounds else 0) for r in range(rounds)]
    got = {w: ([], None) for w in workers}
    ratios = []
    for r, k in enumerate(shares):
        this = {}
        for w in (workers if r % 2 == 0 else workers[::-1]):
            this[w] = w.run(batch, k, warm=1)
            got[w] = (got[w][0] + this[w]["times"], this[w]["steps"], this[w].get("check"))
        if dx is not None and cp is not None:
            ratios.append(statistics.median(this[dx]["times"]) /
                          statistics.median(this[cp]["times"]))
    return got, ratios


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


def machine_stamp():
    """The CPU model (/proc/cpuinfo) and the CPUs online."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs online"


def commit_stamp():
    """This tree's commit, and "dirty" when it has changes other than doc/benchmarks.md (which
    the benchmarks themselves write); "unknown" outside git."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        changes = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                  "--untracked-files=no", "--", ".",
                                  ":(exclude)doc/benchmarks.md"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} dirty" if changes else head


def replace_section(path, name, body):
    """Writes body as the section `name` of the Markdown file path (see --markdown above)."""
    begin, end = f"<!-- begin {name} -->\n", f"<!-- end {name} -->\n"
    try:
        with open(path, encoding="utf-8") as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    b = old.find(begin)
    if b >= 0:
        e = old.find(end, b)
        if e < 0:
            raise SystemExit(f"bench_peers: --markdown: {path} has the line {begin.strip()!r} "
                             f"but no {end.strip()!r} after it")
        new = old[:b] + begin + body + end + old[e + len(end):]
    else:
        new = old + ("\n" if old and not old.endswith("\n") else "") + ("\n" if old else "")
        new += begin + body + end
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def markdown_section(title, tables, argv, head=None):
    """The section's text: title, stamp, one table per precision (its heading and rows)."""
    devices = sorted({r["clnode_device"] for t in tables for r in t["rows"]})
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"### {title}", "",
           f"Machine: {machine_stamp()}. clnode device (its ISA): {'; '.join(devices) or '-'}. "
           f"Commit {commit_stamp()}. Date: {date}.", "",
           f"Run: `python3 {os.path.relpath(os.path.abspath(__file__), ROOT)} "
           + " ".join(argv) + "`"]
    for t in tables:
        head = head or ["batch", "diffrax ms", "clnode ms", "us/step", "diffrax/clnode",
                        "rounds", "steps d/c", "fresh process ms"]
        out += ["", t["heading"], "", "| " + " | ".join(head) + " |",
                "|" + "---:|" * len(head)]
        for r in t["rows"]:
            out.append("| " + " | ".join(r["cells"]) + " |")
        out += ["", t["note"]]
    return "\n".join(out) + "\n"


def grad_row(precision, batch, got, ratios, dx, cp):
    """One --grad row: its figures (a dict) and its table cells."""
    d_s, d_steps, d_check = statistics.median(got[dx][0]), got[dx][1], got[dx][2]
    c_s, c_steps, c_check = statistics.median(got[cp][0]), got[cp][1], got[cp][2]
    ratio = statistics.median(ratios)
    rel = abs(d_check - c_check) / max(abs(d_check), 1e-300)
    row = {"precision": precision, "batch": batch, "diffrax_seconds": d_s, "clnode_seconds": c_s,
           "ratio": ratio, "ratio_min": min(ratios), "ratio_max": max(ratios),
           "rounds": len(ratios), "diffrax_steps": d_steps, "clnode_steps": c_steps,
           "diffrax_dy0_sum": d_check, "clnode_dy0_sum": c_check, "dy0_sum_rel_diff": rel,
           "clnode_device": cp.info["device"]}
    cells = [f"{batch}", f"{1e3 * d_s:.3f}", f"{1e3 * c_s:.3f}", f"{ratio:.2f}x",
             f"{min(ratios):.2f}-{max(ratios):.2f}", f"{d_steps:.1f}/{c_steps:.1f}", f"{rel:.1e}"]
    return row, cells


def grad_main(args, batches):
    """--grad: jax.grad of diffrax's solve against clnode's kept solve + reverse pass, in turns;
    both sides are needed."""
    if not os.access(args.clnode_grad_worker, os.X_OK):
        raise SystemExit(f"bench_peers: {args.clnode_grad_worker} not found (build first, or "
                         "--clnode-grad-worker PATH)")
    rows, tables = [], []
    rounds = min(args.rounds, args.repeat)
    title = (f"the gradient of the seed problem (loss sum(y(t1)), d/dy0 and every parameter), "
             f"tsit5 rtol 1e-4 atol 1e-6, t in [0, 50]; median of {args.repeat} gradients each, "
             f"diffrax and clnode taking turns in {rounds} rounds")
    print(title)
    head = ["batch", "diffrax ms", "clnode ms", "diffrax/clnode", "rounds", "steps d/c",
            "dy0 sum rel diff"]
    for precision in args.precisions.split(","):
        dx, why = start_worker(sys.executable, "diffrax-worker", precision, "--grad")
        if dx is None:
            raise SystemExit(f"bench_peers --grad: diffrax not run ({why})")
        cp, cwhy = start_command([args.clnode_grad_worker, precision, args.device])
        if cp is None:
            dx.close()
            raise SystemExit(f"bench_peers --grad: {args.clnode_grad_worker} not run ({cwhy})")
        heading = (f"{precision}: jax.grad of diffrax {dx.info['diffrax']} on JAX "
                   f"{dx.info['jax']} ({dx.info['device']}), RecursiveCheckpointAdjoint")
        print(heading)
        table = {"heading": heading, "rows": []}
        tables.append(table)
        print("  " + " ".join(f"{h:>16}" for h in head))
        try:
            for batch in batches:
                try:
                    got, ratios = timed_rounds(dx, cp, batch, args.repeat, rounds)
                except WorkerError as e:
                    raise SystemExit(f"bench_peers: a worker failed at batch {batch}: {e}") from None
                row, cells = grad_row(precision, batch, got, ratios, dx, cp)
                print("  " + " ".join(f"{c:>16}" for c in cells), flush=True)
                rows.append(row)
                table["rows"].append(dict(row, cells=cells))
        finally:
            dx.close()
            cp.close()
        table["note"] = (f"clnode device: {cp.info['device']}; clnode ms: the solve with "
                         "keep_tape and clnode_gradient_compute on the host, in process "
                         "(bench_grad_worker, C); diffrax ms: jax.jit(jax.grad) of the vmapped "
                         "solve, compilation excluded; rounds: the lowest and highest of the "
                         "rounds' ratios; dy0 sum rel diff: the two gradients' sums over dL/dy0, "
                         "their relative difference (the same problem was solved)")
        print(f"  {table['note']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.markdown:
        replace_section(args.markdown, "bench_peers_grad",
                        markdown_section(title, tables, sys.argv[1:], head))
    return 0


def parse_args():
    """The command line (see the top)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,64,1024,4096")
    ap.add_argument("--precisions", default="fp32,fp64")
    ap.add_argument("--repeat", type=int, default=5, help="timed solves per batch size and side")
    ap.add_argument("--rounds", type=int, default=5,
                    help="turns the --repeat solves are split into (at most --repeat)")
    ap.add_argument("--clnode-solve", default=os.path.join(ROOT, "build", "tools", "clnode-solve"))
    ap.add_argument("--clnode-python", default=sys.executable,
                    help="an interpreter that imports the clnode package (default: this one)")
    ap.add_argument("--device", default="host")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--markdown", help="also write the tables as the bench_peers section of "
                    "this Markdown file (doc/benchmarks.md)")
    ap.add_argument("--grad", action="store_true",
                    help="time the gradient instead (see --grad above)")
    ap.add_argument("--clnode-grad-worker",
                    default=os.path.join(ROOT, "build", "bench", "bench_grad_worker"),
                    help="clnode's side of --grad (bench/bench_grad_worker.c, built)")
    ap.add_argument("--diffrax-worker", help=argparse.SUPPRESS)
    ap.add_argument("--clnode-worker", help=argparse.SUPPRESS)
    return ap.parse_args()


def main():
    args = parse_args()
    try:
        batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        raise SystemExit(f"bench_peers: --batches must be a comma-separated list of integers, "
                         f"not {args.batches!r}") from None
    if not batches or min(batches) < 1:
        raise SystemExit("bench_peers: --batches needs at least one batch size, each at least 1")
    if args.repeat < 1 or args.rounds < 1:
        raise SystemExit("bench_peers: --repeat and --rounds must be at least 1")
    if args.diffrax_worker:
        diffrax_worker(args.diffrax_worker, args.grad)
        return 0
    if args.clnode_worker:
        clnode_worker(args.clnode_worker, args.device)
        return 0
    if args.grad:
        return grad_main(args, batches)
    if not os.access(args.clnode_solve, os.X_OK):
        raise SystemExit(f"bench_peers: {args.clnode_solve} not found (build first, or "
                         "--clnode-solve PATH)")

    rows, tables = [], []
    rounds = min(args.rounds, args.repeat)
    title = (f"seed problem, tsit5 rtol 1e-4 atol 1e-6, t in [0, 50]; median of {args.repeat} "
             f"solves each, diffrax and clnode taking turns in {rounds} rounds")
    print(title)
    for precision in args.precisions.split(","):
        dx, why = start_worker(sys.executable, "diffrax-worker", precision)
        if dx is None:
            heading = f"{precision}: diffrax not run ({why}); clnode only"
        else:
            info = dx.info
            heading = (f"{precision}: diffrax {info['diffrax']} on JAX {info['jax']} "
                       f"({info['device']})")
        print(heading)
        table = {"heading": heading, "rows": [], "note": ""}
        tables.append(table)
        cp, cwhy = start_worker(args.clnode_python, "clnode-worker", precision,
                                "--device", args.device)
        if cp is None:
            print(f"  clnode's Python package not run with {args.clnode_python} ({cwhy}): the "
                  "ratio is against clnode-solve's fresh process")
        print(f"  {'batch':>6} {'diffrax ms':>11} {'clnode ms':>10} {'us/step':>8} "
              f"{'diffrax/clnode':>15} {'rounds':>11} {'steps d/c':>12} {'fresh process ms':>17}")
        try:
            for batch in batches:
                try:
                    got, ratios = timed_rounds(dx, cp, batch, args.repeat, rounds)
                except WorkerError as e:
                    raise SystemExit(f"bench_peers: a worker failed at batch {batch}: {e}") from None
                c = run_clnode(args.clnode_solve, args.device, precision, batch, args.repeat)
                d = None
                if dx is not None:
                    d = {"seconds": statistics.median(got[dx][0]), "steps": got[dx][1]}
                # the warm in-process solve where it ran, else the fresh process
                w = c if cp is None else {"seconds": statistics.median(got[cp][0]),
                                          "steps": got[cp][1]}
                us_step = 1e6 * w["seconds"] / w["steps"] if w["steps"] else float("nan")
                row = {"precision": precision, "batch": batch, "clnode_seconds": w["seconds"],
                       "clnode_in_process": cp is not None, "clnode_steps": w["steps"],
                       "clnode_fresh_process_seconds": c["seconds"],
                       "clnode_device": c["device"]}
                if d:
                    ratio = statistics.median(ratios) if ratios else d["seconds"] / w["seconds"]
                    row.update(diffrax_seconds=d["seconds"], diffrax_steps=d["steps"],
                               ratio=ratio)
                    span = "-"
                    if ratios:
                        row.update(ratio_min=min(ratios), ratio_max=max(ratios),
                                   rounds=len(ratios))
                        span = f"{min(ratios):.2f}-{max(ratios):.2f}"
                    cells = [f"{batch}", f"{1e3 * d['seconds']:.3f}", f"{1e3 * w['seconds']:.3f}",
                             f"{us_step:.1f}", f"{ratio:.2f}x", span,
                             f"{d['steps']:.1f}/{w['steps']:.1f}", f"{1e3 * c['seconds']:.3f}"]
                    print(f"  {batch:>6} {1e3 * d['seconds']:>11.3f} {1e3 * w['seconds']:>10.3f} "
                          f"{us_step:>8.1f} {ratio:>14.2f}x {span:>11} "
                          f"{d['steps']:>5.1f}/{w['steps']:<5.1f} {1e3 * c['seconds']:>17.3f}")
                else:
                    cells = [f"{batch}", "-", f"{1e3 * w['seconds']:.3f}", f"{us_step:.1f}", "-",
                             "-", f"-/{w['steps']:.1f}", f"{1e3 * c['seconds']:.3f}"]
                    print(f"  {batch:>6} {'-':>11} {1e3 * w['seconds']:>10.3f} {us_step:>8.1f} "
                          f"{'-':>15} {'-':>11} {'-':>5}/{w['steps']:<5.1f} "
                          f"{1e3 * c['seconds']:>17.3f}")
                rows.append(row)
                table["rows"].append(dict(row, cells=cells))
        finally:
            for wk in (dx, cp):
                if wk is not None:
                    wk.close()
        if rows:
            where = "clnode.solve in process" if cp else "clnode-solve"
            spans = "; rounds: the lowest and highest of the rounds' ratios" if dx and cp else ""
            table["note"] = (f"clnode device: {rows[-1]['clnode_device']}; clnode ms: "
                             f"{where}{spans}")
            print(f"  {table['note']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.markdown:
        replace_section(args.markdown, "bench_peers",
                        markdown_section(title, tables, sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
