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
                                 [--train [--lengths 0.1,1] [--warm 5]]

--grad times the gradient instead: jax.grad (jit-compiled, compilation excluded) of the loss
sum(y(t1)) over the vmapped diffrax solve with its default adjoint (RecursiveCheckpointAdjoint),
with respect to y0 and every parameter, against clnode's solve with keep_tape followed by
clnode_gradient_compute on the same --device (bench/bench_grad_worker.c, built as build/bench/
bench_grad_worker, or --clnode-grad-worker PATH: the C API in a process of its own), taking
turns as above; diffrax runs on JAX's default device (a GPU where JAX has one). Next to the ratio, the relative
difference of the two gradients' sums over dL/dy0 shows that both differentiate the same solve.
Its Markdown section is "bench_peers_grad". Both sides are needed.

--train times a training step instead, that of diffrax's neural_ode example: batch 32 spirals
(dy/dt = (x1, -x0) with x = y / (1 + y), 256 series of 100 points on t in [0, 10]), the field
out_scale * MLP(y) (width 64, depth 2, softplus, tanh on the output), Tsit5, PIDController(rtol
1e-3, atol 1e-6), SaveAt(ts) with t0, t1, dt0 and ts traced, jax.vmap(in_axes=(None, 0)), an
optax.adabelief(3e-3) update of eqx.filter_value_and_grad's gradient, all under eqx.filter_jit,
trained on the first --lengths of the series (default 10% and 100%). Three sides in processes
of their own take turns as above: diffrax.diffeqsolve, clnode.jax.diffeqsolve (--clnode-python's
interpreter) and the floor (the same step with the solve replaced by y0 plus one field
evaluation, so that every parameter still gets a gradient). Each gives the time of its first
step (tracing and compilation included) and the median step after --warm untimed ones; for
clnode, where its time goes (the callbacks, of them clnode.solve, Solution.vjp and the field
check, timed by wrapping them in the worker's process; under jax.jit the solve and the reverse
pass are clnode's custom calls, whose library time the package measures in C:
clnode.jax.tape_stats). Every side trains from the same model on
the same batches: the last step's losses show that the same problem was solved. Its Markdown
section is "bench_peers_train"; diffrax and the floor are needed, clnode's side is dropped (and
the reason printed) where its step fails.

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
import re
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
    """prepare(batch) -> (solve, steps[, check[, breakdown]]): solve() solves once,
    steps(result) its mean steps, check(result) (--grad) the sum of the gradient with respect
    to y0 (or None), breakdown(k) (--train) a dict added to the answer about the last k calls.
    The answer to the request that prepared a batch size also has "first", the seconds of its
    first call (compilation included)."""
    print(json.dumps(info), flush=True)
    ready = {}
    for line in sys.stdin:
        req = json.loads(line)
        batch = int(req["batch"])
        first = None
        if batch not in ready:
            ready[batch] = prepare(batch)
            t0 = time.perf_counter()
            ready[batch][0]()
            first = time.perf_counter() - t0
        solve, steps = ready[batch][:2]
        check = ready[batch][2] if len(ready[batch]) > 2 else None
        breakdown = ready[batch][3] if len(ready[batch]) > 3 else None
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
        if first is not None:
            ans["first"] = first  # the first call's seconds (compilation included)
        if breakdown is not None:
            ans.update(breakdown(int(req["repeat"])))
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


class CallbackTimer:
    """Times, in this process only, the parts of clnode.jax.diffeqsolve's host work, by
    wrapping (without changing the library's files): every jax.pure_callback's callback
    ("callbacks", patched before clnode.jax is imported, so that the library's callbacks are
    made through the wrapper), clnode's forward solve (clnode._solve.solve: "solve"), its
    reverse pass (Solution.vjp: "vjp") and the drop-in's field check (clnode.jax._compare:
    "field check"), where the library has them. Seconds and calls accumulate per part."""

    def __init__(self):
        import jax
        self.acc = {}
        orig = jax.pure_callback

        def pure_callback(callback, *a, **k):
            return orig(self.wrap("callbacks", callback), *a, **k)

        jax.pure_callback = pure_callback

    def wrap(self, name, fn):
        acc = self.acc.setdefault(name, [0.0, 0])

        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                acc[0] += time.perf_counter() - t0
                acc[1] += 1

        return timed

    def attach(self):
        """Wraps the library's parts (after clnode.jax is imported)."""
        import importlib
        for mod, owner, attr, name in (("clnode._solve", None, "solve", "solve"),
                                       ("clnode._solve", "Solution", "vjp", "vjp"),
                                       ("clnode.jax", None, "_compare", "field check")):
            m = importlib.import_module(mod)
            obj = getattr(m, owner) if owner else m
            if hasattr(obj, attr):
                setattr(obj, attr, self.wrap(name, getattr(obj, attr)))

    def snapshot(self):
        """{part: (seconds, calls)} so far, with the library's time inside clnode's custom
        calls under jax.jit (measured in C around the solves and the reverse passes,
        clnode.jax.tape_stats, where the package has them) added to "solve" and "vjp"."""
        out = {k: tuple(v) for k, v in self.acc.items()}
        try:
            import clnode.jax
            st = clnode.jax.tape_stats()
        except (ImportError, AttributeError):
            return out
        for name, ns, calls in (("solve", "solve_ns", "solves"),
                                ("vjp", "reverse_ns", "reverses")):
            sec, n = out.get(name, (0.0, 0))
            out[name] = (sec + st[ns] * 1e-9, n + st[calls])
        return out

    def since(self, before):
        """{part: (seconds, calls)} since the snapshot `before`."""
        return {k: (v[0] - before.get(k, (0.0, 0))[0], v[1] - before.get(k, (0.0, 0))[1])
                for k, v in self.snapshot().items()}


# ---------------------------------------------------------------- --train (a training step)

TRAIN_BATCH, TRAIN_WIDTH, TRAIN_DEPTH, TRAIN_POINTS, TRAIN_DATA = 32, 64, 2, 100, 256


def train_worker(kind, precision):
    """A training step of diffrax's neural_ode setup, as a worker (see serve): kind "diffrax"
    (diffrax.diffeqsolve), "clnode" (clnode.jax.diffeqsolve, its callbacks timed) or "floor"
    (the solve replaced by y0 plus one field evaluation). A request's "batch" is the number of
    points of the series trained on (10: 10%, 100: the whole)."""
    import numpy as np
    import jax
    if precision == "fp64":
        jax.config.update("jax_enable_x64", True)
    probe = CallbackTimer() if kind == "clnode" else None  # before clnode.jax is imported
    import jax.numpy as jnp
    import jax.random as jr
    import diffrax
    import equinox as eqx
    import optax

    if kind == "clnode":
        from clnode.jax import diffeqsolve
        probe.attach()
    else:
        diffeqsolve = diffrax.diffeqsolve
    dt = jnp.float64 if precision == "fp64" else jnp.float32

    class Field(eqx.Module):
        """out_scale * MLP(y): softplus hidden layers, tanh on the output."""
        out_scale: jax.Array
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.out_scale * self.mlp(y)

    def trajectory(field, ts, y0):
        """The model's trajectory at the points ts, from y0 at ts[0] (every time traced)."""
        if kind == "floor":  # no solve: y0 at every point, plus one field evaluation
            return y0 + (ts - ts[0])[:, None] * field(ts[0], y0, None)
        sol = diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), t0=ts[0], t1=ts[-1],
                          dt0=ts[1] - ts[0], y0=y0, saveat=diffrax.SaveAt(ts=ts),
                          stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6))
        return sol.ys, sol.stats["num_steps"]

    def spirals():
        """TRAIN_DATA series of TRAIN_POINTS points on t in [0, 10]: dy/dt = (x1, -x0) with
        x = y / (1 + y), from y0 uniform in [-0.6, 1)^2, solved with Tsit5 at dt 0.1."""
        ts = jnp.linspace(0.0, 10.0, TRAIN_POINTS, dtype=dt)

        def one(y0):
            f = diffrax.ODETerm(lambda t, y, a: jnp.stack([y[1] / (1 + y[1]),
                                                           -y[0] / (1 + y[0])]))
            return diffrax.diffeqsolve(f, diffrax.Tsit5(), ts[0], ts[-1], 0.1, y0,
                                       saveat=diffrax.SaveAt(ts=ts)).ys

        y0 = jr.uniform(jr.PRNGKey(0), (TRAIN_DATA, 2), dt, minval=-0.6, maxval=1.0)
        return ts, jax.jit(jax.vmap(one))(y0)

    optim = optax.adabelief(3e-3)

    def loss(field, ts, ys):
        """Mean squared distance of the batch's trajectories (and their mean steps)."""
        out = jax.vmap(trajectory, in_axes=(None, None, 0))(field, ts, ys[:, 0])
        pred, steps = (out, jnp.zeros(())) if kind == "floor" else out
        return jnp.mean((ys - pred) ** 2), jnp.mean(steps.astype(dt))

    @eqx.filter_jit
    def train_step(field, opt_state, ts, ys):
        (value, steps), grads = eqx.filter_value_and_grad(loss, has_aux=True)(field, ts, ys)
        updates, opt_state = optim.update(grads, opt_state)
        return eqx.apply_updates(field, updates), opt_state, value, steps

    all_ts, all_ys = spirals()

    def prepare(points):
        mlp = eqx.nn.MLP(2, 2, TRAIN_WIDTH, TRAIN_DEPTH, activation=jax.nn.softplus,
                         final_activation=jax.nn.tanh, key=jr.PRNGKey(1), dtype=dt)
        # out_scale as the notebook makes it, jnp.array(1.0): weakly typed until its first
        # update, so that the second step compiles again, as the notebook's does
        state = {"field": Field(jnp.array(1.0), mlp), "i": 0, "loss": None}
        state["opt"] = optim.init(eqx.filter(state["field"], eqx.is_inexact_array))
        ts = all_ts[:points]
        batches = [all_ys[j:j + TRAIN_BATCH, :points]
                   for j in range(0, TRAIN_DATA, TRAIN_BATCH)]
        parts = []  # per step: the callbacks' seconds, by part
        seconds = []  # per step: its time

        def step():
            before = probe.snapshot() if probe else None
            ys = batches[state["i"] % len(batches)]
            t0 = time.perf_counter()
            out = train_step(state["field"], state["opt"], ts, ys)
            jax.block_until_ready(out)
            seconds.append(time.perf_counter() - t0)
            state["field"], state["opt"], value, steps = out
            state["i"] += 1
            state["loss"] = float(value)
            if probe:
                parts.append(probe.since(before))
            return float(steps)

        def breakdown(k):
            """The medians over the last k steps of the callbacks' parts (seconds, calls)."""
            last = parts[-k:] if k else []
            return {"loss": state["loss"], "second": seconds[1] if len(seconds) > 1 else None,
                    "parts": {
                name: [statistics.median(p[name][0] for p in last),
                       statistics.median(p[name][1] for p in last)]
                for name in (last[0] if last else {})}}

        return step, lambda steps: steps, None, breakdown

    info = {"device": str(jax.devices()[0]), "jax": jax.__version__,
            "diffrax": diffrax.__version__, "optax": optax.__version__, "kind": kind,
            "clnode": clnode_stamp() if kind == "clnode" else None}
    with jax.default_matmul_precision("highest"):
        serve(prepare, info)


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
            # the exception's own line (JAX may print a note about its traceback after it)
            named = [x for x in lines if re.match(r"[\w.]+(Error|Exception|Exit)\b", x)]
            raise WorkerError(named[-1] if named else lines[-1] if lines
                              else f"exit status {self.proc.returncode}")
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


def write_outputs(args, rows, section, markdown):
    """--json: the rows as JSON; --markdown: the file's `section` replaced by markdown()."""
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.markdown:
        replace_section(args.markdown, section, markdown())


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
                         "keep_tape and clnode_gradient_compute on that device, in process "
                         "(bench_grad_worker, C); diffrax ms: jax.jit(jax.grad) of the vmapped "
                         "solve, compilation excluded; rounds: the lowest and highest of the "
                         "rounds' ratios; dy0 sum rel diff: the two gradients' sums over dL/dy0, "
                         "their relative difference (the same problem was solved)")
        print(f"  {table['note']}")
    write_outputs(args, rows, "bench_peers_grad",
                  lambda: markdown_section(title, tables, sys.argv[1:], head))
    return 0


def clnode_stamp():
    """The imported clnode package: its version and a digest of its files (the package may be
    reinstalled between runs while it is worked on)."""
    import hashlib
    import clnode
    h = hashlib.sha256()
    d = os.path.dirname(clnode.__file__)
    for name in sorted(os.listdir(d)):
        if name.endswith((".py", ".so")):
            with open(os.path.join(d, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    return f"clnode {clnode.__version__} (package files sha256 {h.hexdigest()[:12]})"


def train_turns(workers, points, repeat, rounds, warm, failed):
    """The --train timing of `workers` (name -> Worker) on series of `points` points: each
    first prepares (the first step, compilation included, then `warm` untimed steps), then
    `rounds` rounds share the `repeat` timed steps, each turn after one untimed step, the order
    rotating. Returns {name: {"first", "times", "steps", "loss", "parts": [answers' parts]}}
    and the rounds' ratios diffrax/clnode (empty unless both ran). A clnode worker that fails
    to prepare is dropped from `workers`, its error kept in failed["clnode"]."""
    got = {}
    for name, w in list(workers.items()):
        try:
            a = w.run(points, 0, warm=warm)
        except WorkerError as e:
            if name != "clnode":
                raise
            failed[name] = str(e)
            del workers[name]
            continue
        got[name] = {"first": a["first"], "second": a.get("second"), "times": [],
                     "steps": None, "loss": None, "parts": []}
    rounds = min(rounds, repeat)
    shares = [repeat // rounds + (1 if r < repeat % rounds else 0) for r in range(rounds)]
    names = list(workers)
    ratios = []
    for r, k in enumerate(shares):
        this = {}
        for name in names[r % len(names):] + names[:r % len(names)]:
            a = this[name] = workers[name].run(points, k, warm=1)
            g = got[name]
            g["times"] += a["times"]
            g["steps"], g["loss"] = a["steps"], a.get("loss")
            g["parts"].append(a.get("parts") or {})
        if "diffrax" in this and "clnode" in this:
            ratios.append(statistics.median(this["diffrax"]["times"]) /
                          statistics.median(this["clnode"]["times"]))
    return got, ratios


def train_rows(points, got, ratios):
    """The --train rows for one series length: (figures, timing cells, breakdown cells)."""
    med = {n: statistics.median(g["times"]) for n, g in got.items()}
    d, c, f = got.get("diffrax"), got.get("clnode"), got["floor"]
    row = {"points": points, "floor_seconds": med["floor"], "floor_first_seconds": f["first"],
           "floor_second_seconds": f["second"]}
    ms = lambda s: f"{1e3 * s:.2f}"  # noqa: E731
    if d:
        row.update(diffrax_seconds=med["diffrax"], diffrax_first_seconds=d["first"],
                   diffrax_second_seconds=d["second"],
                   diffrax_steps=d["steps"], diffrax_loss=d["loss"])
    if c:
        row.update(clnode_seconds=med["clnode"], clnode_first_seconds=c["first"],
                   clnode_second_seconds=c["second"],
                   clnode_steps=c["steps"], clnode_loss=c["loss"])
    if d and c:
        row.update(ratio=statistics.median(ratios), ratio_min=min(ratios),
                   ratio_max=max(ratios), first_ratio=d["first"] / c["first"],
                   loss_rel_diff=abs(d["loss"] - c["loss"]) / max(abs(d["loss"]), 1e-300))
    def fs(g):
        if not g:
            return "-"
        return f"{g['first']:.2f}/" + ("-" if g["second"] is None else f"{g['second']:.2f}")

    cells = [f"{points}", fs(d), fs(c), fs(f),
             f"{row['first_ratio']:.1f}x" if "ratio" in row else "-",
             ms(med["diffrax"]) if d else "-", ms(med["clnode"]) if c else "-",
             ms(med["floor"]),
             f"{row['ratio']:.2f}x" if "ratio" in row else "-",
             f"{row['ratio_min']:.2f}-{row['ratio_max']:.2f}" if "ratio" in row else "-",
             (f"{d['steps']:.1f}" if d else "-") + "/" + (f"{c['steps']:.1f}" if c else "-"),
             f"{row['loss_rel_diff']:.1e}" if "ratio" in row else "-"]
    bcells = None
    if c:
        parts = {}
        for p in c["parts"]:  # the rounds' medians: their median
            for name, (s, n) in p.items():
                parts.setdefault(name, []).append((s, n))
        part = {name: (statistics.median(s for s, _ in v), statistics.median(n for _, n in v))
                for name, v in parts.items()}
        row["clnode_parts"] = part
        host = part["callbacks"][0] if "callbacks" in part else \
            sum(part.get(k, (0.0, 0))[0] for k in ("solve", "vjp"))
        row["clnode_rest_seconds"] = med["clnode"] - host

        def cell(name):
            return f"{ms(part[name][0])} ({part[name][1]:g})" if name in part else "-"

        bcells = [f"{points}", ms(med["clnode"]), cell("callbacks"), cell("solve"), cell("vjp"),
                  cell("field check"), ms(row["clnode_rest_seconds"]), ms(med["floor"])]
    return row, cells, bcells


TRAIN_HEAD = ["points", "diffrax 1st/2nd s", "clnode 1st/2nd s", "floor 1st/2nd s",
              "1st d/c", "diffrax ms", "clnode ms", "floor ms", "diffrax/clnode", "rounds",
              "steps d/c", "loss rel diff"]
TRAIN_PARTS_HEAD = ["points", "clnode ms", "callbacks ms (calls)", "solve ms (calls)",
                    "vjp ms (calls)", "field check ms (calls)", "rest ms", "floor ms"]


def train_main(args):
    """--train: the training step of diffrax's neural_ode setup, diffrax.diffeqsolve against
    clnode.jax.diffeqsolve and the floor, in turns; diffrax and the floor are needed."""
    lengths = [int(round(TRAIN_POINTS * float(x))) for x in args.lengths.split(",") if x]
    if not lengths or min(lengths) < 2 or max(lengths) > TRAIN_POINTS:
        raise SystemExit("bench_peers --train: --lengths must be fractions of the series, each "
                         f"giving 2 to {TRAIN_POINTS} points")
    rows, tables = [], []
    rounds = min(args.rounds, args.repeat)
    title = (f"the training step of diffrax's neural_ode example (batch {TRAIN_BATCH}, width "
             f"{TRAIN_WIDTH}, depth {TRAIN_DEPTH}, out_scale * MLP(y), tsit5, PID rtol 1e-3 "
             f"atol 1e-6, SaveAt(ts), optax adabelief); median of {args.repeat} steps each "
             f"after {args.warm} untimed, the three sides taking turns in {rounds} rounds")
    print(title)
    for precision in args.precisions.split(","):
        workers, why = {}, {}
        for kind in ("diffrax", "clnode", "floor"):
            python = args.clnode_python if kind == "clnode" else sys.executable
            workers[kind], why[kind] = start_worker(python, "train-worker", kind,
                                                    "--precisions", precision)
        if workers["diffrax"] is None or workers["floor"] is None:
            raise SystemExit(f"bench_peers --train: diffrax not run ({why['diffrax']}"
                             f"{why['floor']})")
        info = workers["diffrax"].info
        heading = (f"{precision}: diffrax {info['diffrax']} on JAX {info['jax']} "
                   f"({info['device']}), optax {info['optax']}"
                   + (f"; {workers['clnode'].info['clnode']}" if workers["clnode"] else ""))
        table = {"heading": heading, "rows": [], "parts": []}
        tables.append(table)
        print(heading)
        print("  " + " ".join(f"{h:>14}" for h in TRAIN_HEAD))
        try:
            for points in lengths:
                live = {k: w for k, w in workers.items() if w is not None}
                failed = {}
                try:
                    got, ratios = train_turns(live, points, args.repeat, rounds, args.warm,
                                              failed)
                except WorkerError as e:
                    raise SystemExit(f"bench_peers: a worker failed at {points} points: "
                                     f"{e}") from None
                if "clnode" in failed:
                    why["clnode"] = failed["clnode"]
                    workers["clnode"].close()
                    workers["clnode"] = None
                    print(f"  clnode failed at {points} points ({why['clnode']}): diffrax and "
                          "the floor only")
                row, cells, bcells = train_rows(points, got, ratios)
                row["precision"] = precision
                print("  " + " ".join(f"{x:>14}" for x in cells), flush=True)
                rows.append(row)
                table["rows"].append({"cells": cells, "clnode_device": "-"})
                if bcells:
                    table["parts"].append(bcells)
        finally:
            for w in workers.values():
                if w is not None:
                    w.close()
        if table["parts"]:
            print("  clnode's step, where its time goes (medians per step):")
            print("  " + " ".join(f"{h:>22}" for h in TRAIN_PARTS_HEAD))
            for b in table["parts"]:
                print("  " + " ".join(f"{x:>22}" for x in b))
        table["note"] = train_note(why["clnode"], table["parts"])
        print(f"  {table['note']}")
    write_outputs(args, rows, "bench_peers_train",
                  lambda: train_markdown(title, tables, sys.argv[1:]))
    return 0


def train_note(clnode_why, parts):
    """The note under a --train table."""
    note = ("1st/2nd s: the first step (tracing, compilation and the step; the 10% series "
            "first, then the whole, in one process per side, as the notebook's two phases) and "
            "the second (which compiles again: out_scale, jnp.array(1.0) as in the notebook, "
            "is weakly typed until its first update); 1st d/c: diffrax's first step over "
            "clnode's; ms: the "
            "steady state, the median step; floor: the same step with the solve replaced by y0 "
            "plus one field evaluation; rounds: the lowest and highest of the rounds' steady-state "
            "ratios; loss rel diff: the last timed step's losses (both sides train from the same "
            "model on the same batches)")
    if clnode_why:
        note += f". clnode not run: {clnode_why}"
    elif parts:
        note += (". Parts of clnode's step: the time inside jax.pure_callback callbacks (none "
                 "where clnode.jax runs as XLA custom calls); solve and vjp: the library's "
                 "forward solves and reverse passes (inside the custom calls, by "
                 "clnode.jax.tape_stats' clocks; inside callbacks, clnode.solve and "
                 "Solution.vjp), with their calls per step; the drop-in's field check; rest: the "
                 "step less the callbacks (with custom calls, the whole step)")
    return note


def train_markdown(title, tables, argv):
    """The --train section's text."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"### {title}", "", f"Machine: {machine_stamp()}. Commit {commit_stamp()}. "
           f"Date: {date}.", "",
           f"Run: `python3 {os.path.relpath(os.path.abspath(__file__), ROOT)} "
           + " ".join(argv) + "`"]
    for t in tables:
        out += ["", t["heading"], "", "| " + " | ".join(TRAIN_HEAD) + " |",
                "|" + "---:|" * len(TRAIN_HEAD)]
        out += ["| " + " | ".join(r["cells"]) + " |" for r in t["rows"]]
        if t["parts"]:
            out += ["", "| " + " | ".join(TRAIN_PARTS_HEAD) + " |",
                    "|" + "---:|" * len(TRAIN_PARTS_HEAD)]
            out += ["| " + " | ".join(b) + " |" for b in t["parts"]]
        out += ["", t["note"]]
    return "\n".join(out) + "\n"


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
    ap.add_argument("--train", action="store_true",
                    help="time a training step instead (see --train above)")
    ap.add_argument("--lengths", default="0.1,1",
                    help="--train: the fractions of the series trained on")
    ap.add_argument("--warm", type=int, default=5,
                    help="--train: untimed steps after the first, per series length and side")
    ap.add_argument("--diffrax-worker", help=argparse.SUPPRESS)
    ap.add_argument("--train-worker", help=argparse.SUPPRESS)
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
    if args.train_worker:
        train_worker(args.train_worker, args.precisions)
        return 0
    if args.grad:
        return grad_main(args, batches)
    if args.train:
        return train_main(args)
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
    write_outputs(args, rows, "bench_peers",
                  lambda: markdown_section(title, tables, sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
