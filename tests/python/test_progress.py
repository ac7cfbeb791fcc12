"""Progress and kernel builds as they happen: clnode.solve's and Solution.vjp's progress=, diffrax's
progress meters in clnode.jax (and no Python run for progress without one), and the library's
kernel-build lines forwarded while the build runs."""
import importlib.machinery
import logging
import sys
import time
import types

import numpy as np
import pytest

import clnode
from clnode import _solve

# the library reports progress only once the work has run for about a second, then at most once
# a second: the long solve's batch is sized to take about 2.5 s here (long_batch)
LONG = dict(t0=0, t1=50, dt0=0.02, rtol=1e-9, atol=1e-9, precision="fp64", max_steps=100000,
            precision_guard="off")


class Recorder:
    def __init__(self, fail_at=None):
        self.calls, self.fail_at = [], fail_at

    def __call__(self, fraction, active, batch, steps):
        self.calls.append((fraction, active, batch, steps))
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise KeyError("stop here")


def long_y0(B):
    return np.linspace(-1, 1, B * 10).reshape(B, 10)


@pytest.fixture(scope="module")
def long_batch():
    """The batch of the long solve that takes about 2.5 s on this machine (timed at 200, after a
    first solve that warms the context up). A shared machine's load changes between the timing
    and the solves: the tests that need a report double the batch until one comes (at most
    three times), so that a quieter moment cannot make the solve too short to report."""
    clnode.solve(clnode.seed_model(), long_y0(8), device="host", **LONG)
    t = time.monotonic()
    clnode.solve(clnode.seed_model(), long_y0(200), device="host", **LONG)
    return int(min(50000, max(200, 200 * 2.5 / max(time.monotonic() - t, 1e-3))))


def until_reported(solve, batch):
    """solve(B) -> (what it reported, its result) with B = batch, doubled while nothing was
    reported (at most three times)."""
    for k in range(4):
        reported, out = solve(batch << k)
        if reported:
            break
    return reported, out


@pytest.fixture(scope="module")
def long_solves(long_batch):
    """The long solve with a recording callback, and without one (the same problem)."""
    ctx = clnode.Context("host")

    def solve(B):
        rec = Recorder()
        return rec.calls, (rec, ctx.solve(clnode.seed_model(), long_y0(B), progress=rec,
                                          keep_tape=True, **LONG), B)

    _, (rec, with_cb, B) = until_reported(solve, long_batch)
    without = ctx.solve(clnode.seed_model(), long_y0(B), keep_tape=True, **LONG)
    return rec, with_cb, without


def test_solve_progress_callback(long_solves):
    """The callback sees the fraction of [t0, t1] (in [0, 1)), the active trajectories of the
    batch and the steps so far; it changes no bit of the solution."""
    rec, with_cb, without = long_solves
    B = with_cb.ys.shape[0]
    assert rec.calls, "a solve of seconds reported no progress"
    fr = [c[0] for c in rec.calls]
    assert all(0.0 <= f < 1.0 for f in fr)
    assert all(c[2] == B and 0 < c[1] <= B for c in rec.calls)
    steps = [c[3] for c in rec.calls]
    assert steps == sorted(steps) and steps[0] > 0
    assert steps[-1] <= int(np.max(with_cb.stats["num_steps"]))
    np.testing.assert_array_equal(with_cb.ys, without.ys)
    np.testing.assert_array_equal(with_cb.stats["num_steps"], without.stats["num_steps"])


def test_progress_exception_stops_the_solve(long_batch):
    """An exception raised by the callback stops the solve and is the one raised."""
    rec = Recorder(fail_at=1)
    y0 = long_y0(4 * long_batch)  # about 10 s, stopped after one
    with pytest.raises(KeyError, match="stop here"):
        clnode.solve(clnode.seed_model(), y0, device="host", progress=rec, **LONG)
    assert len(rec.calls) == 1


def test_vjp_progress_callback(long_solves):
    """Solution.vjp's progress: the fraction of the batch gone back through (rising, in [0, 1)),
    the trajectories not yet done, the steps gone back through; the same gradient bits."""
    _, sol, other = long_solves
    rec = Recorder()
    cot = np.ones_like(sol.ys)
    g = sol.vjp(cot, progress=rec)
    ref = other.vjp(cot)
    for k in ref.params:
        np.testing.assert_array_equal(g.params[k], ref.params[k])
    np.testing.assert_array_equal(g.y0, ref.y0)
    assert rec.calls, "a reverse pass of seconds reported no progress"
    fr = [c[0] for c in rec.calls]
    B = sol.ys.shape[0]
    assert all(0.0 <= f < 1.0 for f in fr) and fr == sorted(fr)
    assert all(c[2] == B and c[1] == round(B * (1 - c[0])) for c in rec.calls)
    with pytest.raises(TypeError, match="progress must be"):
        sol.vjp(cot, progress="yes")


def test_progress_true(capfd, long_batch):
    """progress=True: a line on stderr rewritten in place, ended once the solve returns."""
    def solve(B):
        clnode.solve(clnode.seed_model(), long_y0(B), device="host", progress=True, **LONG)
        err = capfd.readouterr().err
        return "% " in err, err

    _, err = until_reported(solve, long_batch)
    assert "% " in err and "trajectories active" in err and err.startswith("\r"), err
    assert err.endswith("\n") and err.count("\n") == 1, err
    with pytest.raises(TypeError, match="progress must be"):
        clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=1, progress=1.5)


@pytest.fixture
def given_progress(monkeypatch):
    """Whether each solve's call of the extension is given a progress callable (a list)."""
    seen = []
    real = _solve._run

    def spy(context, device, model, y, opts, extra):
        seen.append("progress" in extra)
        return real(context, device, model, y, opts, extra)

    monkeypatch.setattr(_solve, "_run", spy)
    return seen


def test_no_progress_runs_no_python(given_progress):
    """Without progress= (or with progress=False) the extension gets no callable: the library's
    callback stays NULL and no Python runs for progress."""
    seen = given_progress
    clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=1, dt0=0.02)
    clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=1, dt0=0.02, progress=False)
    clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=1, dt0=0.02, progress=print)
    assert seen == [False, False, True]


# ---- clnode.jax: diffrax's progress meters ----

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

from clnode.jax import diffeqsolve  # noqa: E402


def jax_solve(meter, solve=diffeqsolve, **kw):
    mlp = eqx.nn.MLP(4, 4, 16, 1, activation=jnp.tanh, key=jax.random.PRNGKey(3),
                     dtype=jnp.float64)
    return solve(diffrax.ODETerm(lambda t, y, a: mlp(y)), diffrax.Tsit5(), 0.0, 1.0, 0.05,
                 jnp.ones(4, jnp.float64), progress_meter=meter,
                 stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9), **kw)


def test_jax_text_progress_meter(capsys):
    """TextProgressMeter prints diffrax's lines: "0.00%" first, "100.00%" last, each a
    percentage with two decimals (a short solve: no report between)."""
    sol = jax_solve(diffrax.TextProgressMeter())
    lines = capsys.readouterr().out.split()
    assert lines[0] == "0.00%" and lines[-1] == "100.00%", lines
    assert all(ln.endswith("%") and float(ln[:-1]) <= 100 for ln in lines)
    ref = jax_solve(diffrax.TextProgressMeter(), solve=diffrax.diffeqsolve)
    jax.block_until_ready(ref.ys)
    want = capsys.readouterr().out.split()
    assert (lines[0], lines[-1]) == (want[0], want[-1])
    assert int(sol.stats["num_steps"]) == int(ref.stats["num_steps"])


def test_jax_tqdm_progress_meter(monkeypatch):
    """TqdmProgressMeter drives a tqdm bar as diffrax's does (total 100 in "%", closed at 100);
    a stand-in tqdm module records it."""
    bars = []

    class Bar:
        def __init__(self, **kw):
            self.kw, self.n, self.closed, self.ns = kw, 0, False, []
            bars.append(self)

        def update(self, n=1):
            self.ns.append(self.n)

        def refresh(self):
            pass

        def close(self):
            self.closed = True

    fake = types.ModuleType("tqdm")
    fake.__spec__ = importlib.machinery.ModuleSpec("tqdm", None)
    fake.tqdm = Bar
    monkeypatch.setitem(sys.modules, "tqdm", fake)
    jax_solve(diffrax.TqdmProgressMeter())
    assert len(bars) == 1
    assert bars[0].kw["total"] == 100 and bars[0].kw["unit"] == "%"
    assert bars[0].closed and bars[0].n == 100.0


def test_jax_no_progress_meter_runs_no_python(given_progress):
    """NoProgressMeter (the default): the solve gets no progress callable; a meter diffrax has
    and clnode does not map is refused by name (with fallback="error"; else diffrax solves)."""
    seen = given_progress
    jax_solve(diffrax.NoProgressMeter())
    jax_solve(diffrax.TextProgressMeter())
    assert seen == [False, True]

    class Other(diffrax.NoProgressMeter):
        pass
    with pytest.raises(ValueError, match="progress_meter"):
        jax_solve(Other(), fallback="error")


# ---- kernel builds ----

def test_build_lines_arrive_while_the_build_runs(pocl):
    """A new context's first solve on PoCL builds its program (and CLBlast's kernels): each build
    is announced before it starts and timed after, through the logger "clnode.build", while the
    solve still runs (the context is busy when the line arrives), not after it returns."""
    ctx = clnode.Context(pocl)
    got = []

    class Handler(logging.Handler):
        def emit(self, record):
            try:
                ctx.supports("fp32")
                during = False
            except clnode.ContextBusyError:
                during = True
            got.append((record.getMessage(), during))

    log = logging.getLogger("clnode.build")
    h = Handler()
    log.addHandler(h)
    try:
        ctx.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=0.5, dt0=0.02)
    finally:
        log.removeHandler(h)
    msgs = [m for m, _ in got]
    assert any(m.startswith("building the OpenCL program (fp32) for ") for m in msgs), msgs
    assert any(m.startswith("built the OpenCL program (fp32) for ") and m.endswith(" s")
               for m in msgs), msgs
    first = [i for i, m in enumerate(msgs) if "the OpenCL program (fp32)" in m]
    assert msgs[first[0]].startswith("building") and msgs[first[1]].startswith("built")
    assert all(during for _, during in got), got


def test_build_lines_on_stderr_without_handlers(pocl, capfd, monkeypatch):
    """Without a logging handler anywhere, the build lines go to stderr ("clnode: building
    ..."); the logger at WARNING silences them."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    clnode.Context(pocl).solve(clnode.seed_model(), np.zeros(10), t0=0, t1=0.5, dt0=0.02)
    err = capfd.readouterr().err
    assert "clnode: building the OpenCL program (fp32) for " in err, err
    log = logging.getLogger("clnode.build")
    log.setLevel(logging.WARNING)  # setLevel: the logger's cache of levels is cleared
    try:
        clnode.Context(pocl).solve(clnode.seed_model(), np.zeros(10), t0=0, t1=0.5, dt0=0.02)
    finally:
        log.setLevel(logging.INFO)
    assert "building" not in capfd.readouterr().err
