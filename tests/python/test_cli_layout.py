"""One layout of saved points: clnode-solve --out FILE.npz and clnode.solve return the same
arrays, bit for bit, for the same problem: per-trajectory intervals that hold only some of the
save times, a trajectory that fails early (max_steps), forward and backward, fp32 and fp64.
With saved steps the CLI keeps only the most points of any trajectory (doc/cli.md): its rows
are the first slots of Python's, whose other slots are padding.

The CLI is $CLNODE_SOLVE, else tools/clnode-solve under the working directory (the
build directory, where scripts/test_python.sh runs pytest)."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

import clnode

SOLVE = pathlib.Path(os.environ.get("CLNODE_SOLVE",
                                    pathlib.Path.cwd() / "tools/clnode-solve"))
pytestmark = pytest.mark.skipif(not SOLVE.is_file(), reason=f"no clnode-solve at {SOLVE}")

# the seed problem (dim 10); trajectory 0 needs 12 steps for [0, 50]: max_steps 8 fails it
T0S = np.array([0.0, 1.0, 0.0, 2.0])
T1S = np.array([50.0, 5.0, 3.0, 30.0])
TS = np.array([0.5, 2.0, 4.0, 10.0, 45.0])
Y0 = (0.01 * (np.arange(40) % 7) - 0.03).reshape(4, 10)


def cli(tmp, direction, precision, save, max_steps):
    np.save(tmp / "y0.npy", Y0)
    np.save(tmp / "t0.npy", direction * T0S)
    np.save(tmp / "t1.npy", direction * T1S)
    saves = []
    for s in save:
        saves += ["--save", "ts:" + ",".join(repr(float(t)) for t in direction * TS)
                  if s == "ts" else s]
    out = tmp / "out.npz"
    subprocess.run([str(SOLVE), "--y0-file", str(tmp / "y0.npy"), "--t0-file",
                    str(tmp / "t0.npy"), "--t1-file", str(tmp / "t1.npy"), "--dt0",
                    repr(direction * 0.02), "--rtol", "1e-4", "--atol", "1e-6", "--precision",
                    precision, "--max-steps", str(max_steps), "--device", "host", "--quiet",
                    "--out", str(out)] + saves, check=False, capture_output=True)
    with np.load(out) as d:
        return {k: d[k] for k in d.files}


def python(direction, precision, save, max_steps):
    sa = clnode.SaveAt(t0="t0" in save, t1="t1" in save, steps="steps" in save,
                       ts=direction * TS if "ts" in save else None)
    return clnode.solve(clnode.seed_model(), Y0, t0=direction * T0S, t1=direction * T1S,
                        dt0=direction * 0.02, rtol=1e-4, atol=1e-6, precision=precision,
                        max_steps=max_steps, saveat=sa, device="host")


@pytest.mark.parametrize("direction", [1.0, -1.0])
@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("save", [("t0", "ts", "t1"), ("ts", "t1"), ("t1",), ("ts",),
                                  ("steps",), ("t0", "steps"), ("t0", "ts", "steps")])
def test_cli_and_python_same_arrays(tmp_path, direction, precision, save):
    max_steps = 8
    c = cli(tmp_path, direction, precision, save, max_steps)
    p = python(direction, precision, save, max_steps)
    assert c["format_version"] == 2
    np.testing.assert_array_equal(c["result"], [int(r) for r in p.result])  # the codes
    assert c["result"][0] == 1 and c["result"][1] == 0  # failed early, and a success
    np.testing.assert_array_equal(c["num_steps"], p.stats["num_steps"])
    T = c["ts"].shape[1]
    if "steps" in save:
        assert p.ts.shape[1] == max_steps + ("t0" in save) + ("ts" in save) * len(TS)
        assert T == max(int(np.sum(np.isfinite(r))) for r in p.ts)  # the most points
        assert np.all(p.ts[:, T:] == np.inf) and np.all(p.ys[:, T:] == np.inf)
    else:
        assert T == p.ts.shape[1]
    assert c["ts"].dtype == p.ts.dtype and c["ys"].dtype == p.ys.dtype
    assert c["ts"].tobytes() == np.ascontiguousarray(p.ts[:, :T]).tobytes()
    assert c["ys"].tobytes() == np.ascontiguousarray(p.ys[:, :T]).tobytes()
    # the failed trajectory: packed from slot 0, the stop point right after its last point
    n = int(np.sum(np.isfinite(c["ts"][0])))
    if "t1" in save and "steps" not in save:
        assert c["ts"][0, n - 1] == p.t_final[0].astype(c["ts"].dtype)
    assert np.all(c["ts"][0, n:] == np.inf)  # +inf padding, also backward (diffrax's)
