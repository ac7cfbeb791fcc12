#!/usr/bin/env python3
"""Produce clnode's reference data with the real diffrax 0.7.2 (JAX, CPU).

How to run (from anywhere; paths are taken relative to the repository root):

    python3 scripts/make_reference.py                 # models + the full solve matrix
    python3 scripts/make_reference.py --only-models   # only the two .safetensors files
    python3 scripts/make_reference.py --only-ensemble # only the per-trajectory (ensemble) files

The first run creates a virtual environment at ``.venv-reference`` in the repository root
(override with the environment variable ``CLNODE_REF_VENV``), installs the pinned CPU-only
packages of ``scripts/requirements-reference.txt`` from PyPI into it and re-executes itself there.
Later runs reuse it (it is reinstalled only when the requirements file changes).  The pinned
JAX needs Python 3.11 or newer.  A full run takes about 10 minutes on two CPU cores.

What it writes (all files are overwritten; the output is deterministic):

* ``lib/model/seed.safetensors`` -- the seed model of DESIGN.md section 1,
  ``eqx.nn.MLP(10, 10, width_size=100, depth=2, activation=softplus, key=PRNGKey(42))``.
  The C build embeds this file.
* ``tests/data/models/tanh64.safetensors`` --
  ``eqx.nn.MLP(10, 10, width_size=64, depth=3, activation=tanh, key=PRNGKey(7))``.
  Both hold float32 tensors ``layers.<i>.weight`` (out x in) and ``layers.<i>.bias`` with the
  string metadata ``activation``, ``final_activation`` and ``producer``.
* ``tests/data/diffrax/<model>-<fp32|fp64>.json`` -- diffrax's step counts, results and
  trajectories for methods {tsit5, dopri5, bosh3, heun, dopri8} x (rtol, atol) in {(1e-3, 1e-6),
  (1e-4, 1e-6), (1e-6, 1e-9)} x y0 in {zero, ramp} x batch in {1, 2} x SaveAt {steps, ts},
  with t in [0, 50], dt0 = 0.02, PIDController defaults otherwise, max_steps = 4096,
  throw=False and "highest" default matmul precision.  fp64 uses the same float32 weights
  widened to float64.  Batch 1 is a plain ``diffeqsolve``; batch 2 is ``jax.vmap`` over two
  identical copies of y0 (as in the original failure report).  Every float is written with
  Python's shortest round-trip ``repr`` of the exact value, so it parses back bit-exactly.

``--only-ensemble`` writes only these (and touches none of the files above):

* ``tests/data/models/cond4x2.safetensors`` -- a model with conditioning inputs,
  ``eqx.nn.MLP(in_size=4 + 2, out_size=4, width_size=32, depth=2, activation=tanh,
  key=PRNGKey(3))`` with every parameter multiplied by 3 in float32 (so that the problems take
  tens of steps), with the metadata ``inputs = "2"``: the vector field is
  ``f(t, y, args) = mlp(concatenate([y, args]))``.
* ``tests/data/diffrax/ensemble-<fp32|fp64>.json`` -- diffrax under ``jax.vmap`` over
  (y0, t0, t1, dt0, args) at once: five trajectories with their own interval, first step and
  inputs, forwards and backwards, for methods {tsit5, dopri5, bosh3, heun, dopri8} x (rtol,
  atol) in {(1e-3, 1e-6), (1e-6, 1e-9)} x SaveAt {t1, ts, steps} (and ts_clip at the
  tighter tolerance).  SaveAt(ts) is one list
  shared by the batch inside every trajectory's interval (diffrax refuses save times outside
  a trajectory's interval); save "ts_clip" is a longer shared list solved trajectory by
  trajectory, each with only the times inside its own interval (clnode's documented clipping
  of a shared list).  In fp32 every time is a float32 value, as diffrax sees it without x64.
* ``tests/data/diffrax/ensemble-spread-fp64.json`` -- how far diffrax's own dopri8 solution of
  each of those trajectories moves (step counts, step ends, final state, dense output at the
  shared ts) when the network's sums are taken in other orders (reversed, and in two halves):
  dopri8's error estimate on these problems is partly rounding noise even in float64, so a
  different but equally exact GEMM moves its steps; the C test bounds clnode's dopri8 deviation
  from diffrax by this spread.

Only this script needs JAX: the C build, its tests and CI read the committed files and never
run Python.  Each precision is solved in its own subprocess because ``jax_enable_x64`` is a
process-global switch.  The processes run one after another, never concurrently.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "scripts" / "requirements-reference.txt"
DEFAULT_VENV = REPO / ".venv-reference"
GENERATOR = "scripts/make_reference.py"

# The two models, in export order: the seed model comes first because the C build embeds it.
MODELS = {
    "seed": {"width": 100, "depth": 2, "activation": "softplus", "seed": 42,
             "path": "lib/model/seed.safetensors"},
    "tanh64": {"width": 64, "depth": 3, "activation": "tanh", "seed": 7,
               "path": "tests/data/models/tanh64.safetensors"},
}
STATE_SIZE = 10

# The solve matrix.
METHODS = ("tsit5", "dopri5", "bosh3", "heun", "dopri8")
TOLERANCES = ((1e-3, 1e-6), (1e-4, 1e-6), (1e-6, 1e-9))
PRECISIONS = ("fp32", "fp64")
Y0_NAMES = ("zero", "ramp")
BATCHES = (1, 2)
SAVES = ("steps", "ts")
T0, T1, DT0, MAX_STEPS = 0.0, 50.0, 0.02, 4096
NUM_SAVE_TS = 11

# Row thinning for SaveAt(steps=True): (keep every row up to this many accepted steps,
# otherwise aim for about this many rows).  Later entries are used only if a file would
# exceed MAX_JSON_BYTES with the earlier ones.
THINNING_LEVELS = ((200, 100), (100, 50), (50, 25), (20, 10))
MAX_JSON_BYTES = 3_000_000


def out_json_path(model: str, precision: str) -> Path:
    return REPO / "tests" / "data" / "diffrax" / f"{model}-{precision}.json"


# --------------------------------------------------------------------------------------------
# Virtual environment bootstrap (standard library only)
# --------------------------------------------------------------------------------------------

def venv_dir() -> Path:
    return Path(os.environ.get("CLNODE_REF_VENV", str(DEFAULT_VENV))).expanduser().absolute()


def running_in(venv: Path) -> bool:
    return Path(sys.prefix).resolve() == venv.resolve()


def ensure_venv(venv: Path) -> Path:
    """Create the venv if needed, (re)install the pinned requirements, return its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"[make_reference] creating virtual environment {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # A stamp with the requirements' hash tells whether this venv is already up to date.
    stamp = venv / ".clnode-requirements.sha256"
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text().strip() != digest:
        print(f"[make_reference] installing {REQUIREMENTS.name} into {venv}", flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                        "-q", "-r", str(REQUIREMENTS)], check=True)
        stamp.write_text(digest + "\n")
    return python


# --------------------------------------------------------------------------------------------
# Helpers that need the venv's packages (imported lazily inside each function)
# --------------------------------------------------------------------------------------------

def versions() -> dict:
    import diffrax
    import equinox
    import jax
    import jaxlib
    import numpy
    import safetensors
    return {"python": platform.python_version(), "jax": jax.__version__,
            "jaxlib": jaxlib.__version__, "equinox": equinox.__version__,
            "diffrax": diffrax.__version__, "numpy": numpy.__version__,
            "safetensors": safetensors.__version__}


def activation_fn(name: str):
    import jax
    return {"softplus": jax.nn.softplus, "tanh": jax.nn.tanh}[name]


def build_mlp(spec: dict):
    """The equinox MLP exactly as a user would create it (float32 under JAX defaults)."""
    import equinox as eqx
    import jax
    return eqx.nn.MLP(in_size=STATE_SIZE, out_size=STATE_SIZE, width_size=spec["width"],
                      depth=spec["depth"], activation=activation_fn(spec["activation"]),
                      key=jax.random.PRNGKey(spec["seed"]))


def export_models() -> None:
    """Write both models as float32 safetensors with equinox's tensor names."""
    import equinox as eqx
    import numpy as np
    from safetensors.numpy import save

    for name, spec in MODELS.items():
        mlp = build_mlp(spec)
        tensors = {}
        for i, layer in enumerate(mlp.layers):
            weight = np.asarray(layer.weight)
            bias = np.asarray(layer.bias)
            assert weight.dtype == np.float32 and bias.dtype == np.float32, "expected float32"
            assert weight.shape == (layer.out_features, layer.in_features)
            tensors[f"layers.{i}.weight"] = np.ascontiguousarray(weight)
            tensors[f"layers.{i}.bias"] = np.ascontiguousarray(bias)
        metadata = {"activation": spec["activation"], "final_activation": "identity",
                    "producer": f"equinox {eqx.__version__}"}
        path = REPO / spec["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(sort_safetensors_metadata(save(tensors, metadata=metadata)))
        nparams = sum(t.size for t in tensors.values())
        print(f"[make_reference] wrote {spec['path']} ({nparams} parameters, "
              f"{path.stat().st_size} bytes)", flush=True)


def sort_safetensors_metadata(blob: bytes) -> bytes:
    """Put the header's metadata keys in sorted order so that the file is reproducible.

    safetensors writes `__metadata__` in hash-map order, which changes from run to run.  The
    sorted object has exactly the same length, so it is swapped in place and no offset moves.
    """
    size = int.from_bytes(blob[:8], "little")
    header = blob[8:8 + size].decode("utf-8")
    meta = json.loads(header)["__metadata__"]
    compact = (",", ":")
    as_written = '"__metadata__":' + json.dumps(meta, separators=compact)
    in_order = '"__metadata__":' + json.dumps(dict(sorted(meta.items())), separators=compact)
    assert header.count(as_written) == 1 and len(as_written) == len(in_order)
    return blob[:8] + header.replace(as_written, in_order).encode("utf-8") + blob[8 + size:]


def load_mlp(spec: dict, dtype):
    """Rebuild the MLP and load the committed float32 tensors into it, cast to `dtype`.

    Loading the file (rather than trusting the PRNG) makes the reference describe exactly the
    weights the C side reads.  For fp64 the float32 values are widened exactly.
    """
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file

    path = REPO / spec["path"]
    with safe_open(str(path), framework="numpy") as handle:
        meta = handle.metadata()
    assert meta["activation"] == spec["activation"], f"{path}: activation mismatch"
    tensors = load_file(str(path))
    skeleton = build_mlp(spec)
    nlayers = len(skeleton.layers)
    weights = [jnp.asarray(tensors[f"layers.{i}.weight"].astype(dtype)) for i in range(nlayers)]
    biases = [jnp.asarray(tensors[f"layers.{i}.bias"].astype(dtype)) for i in range(nlayers)]
    if dtype == np.float32:
        # Same key, same weights: a cheap consistency check of the exported file.  (Under x64
        # equinox draws float64 weights, so the skeleton differs there; it is replaced anyway.)
        for i, layer in enumerate(skeleton.layers):
            assert np.array_equal(np.asarray(layer.weight), tensors[f"layers.{i}.weight"])
            assert np.array_equal(np.asarray(layer.bias), tensors[f"layers.{i}.bias"])
    return eqx.tree_at(lambda m: [l.weight for l in m.layers] + [l.bias for l in m.layers],
                       skeleton, weights + biases)


def result_names() -> dict:
    """Map diffrax's RESULTS integer codes to the names used in the JSON files."""
    import diffrax
    import numpy as np
    # equinox enumerations keep their members in `_name_to_item`; there is no public listing.
    names = {}
    for name, item in diffrax.RESULTS._name_to_item.items():
        names[int(np.asarray(item._value))] = "success" if name == "successful" else name
    return names


def num(x) -> float | str:
    """A float that round-trips exactly; non-finite values (never expected) become strings."""
    value = float(x)  # exact for float32 and float64
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def thin_indices(n: int, keep_all_up_to: int, target_rows: int) -> list[int]:
    """Which of n accepted-step rows to keep: all, or every k-th plus the last one."""
    if n <= keep_all_up_to:
        return list(range(n))
    k = math.ceil(n / target_rows)
    idx = list(range(0, n, k))
    if idx[-1] != n - 1:
        idx.append(n - 1)
    return idx


# --------------------------------------------------------------------------------------------
# One precision's worker process
# --------------------------------------------------------------------------------------------

def make_solve(mlp, method: str, rtol: float, atol: float, save: str, dtype, dt0=DT0,
               max_steps=MAX_STEPS):
    """A function y0 -> raw diffeqsolve outputs for one configuration."""
    import diffrax
    import jax.numpy as jnp
    import numpy as np

    solver = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "bosh3": diffrax.Bosh3,
              "heun": diffrax.Heun, "dopri8": diffrax.Dopri8}[method]()
    term = diffrax.ODETerm(lambda t, y, args: mlp(y))
    controller = diffrax.PIDController(rtol=rtol, atol=atol)
    if save == "steps":
        saveat = diffrax.SaveAt(steps=True)
    else:
        saveat = diffrax.SaveAt(ts=jnp.asarray(np.linspace(T0, T1, NUM_SAVE_TS).astype(dtype)))

    def solve(y0):
        sol = diffrax.diffeqsolve(term, solver, T0, T1, dt0, y0, saveat=saveat,
                                  stepsize_controller=controller, max_steps=max_steps,
                                  throw=False)
        return (sol.ts, sol.ys, sol.result._value, sol.stats["num_steps"],
                sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"])
    return solve


def run_case(mlp, method, rtol, atol, save, batch, y0, dtype, names):
    """Solve one case and return its trajectories as plain numpy/python data."""
    import jax
    import numpy as np

    solve = make_solve(mlp, method, rtol, atol, save, dtype)
    if batch == 1:
        outs = jax.jit(solve)(y0)
        outs = [np.asarray(o)[None] for o in outs]  # give everything a batch axis
    else:
        outs = jax.jit(jax.vmap(solve))(jax.numpy.stack([y0] * batch))
        outs = [np.asarray(o) for o in outs]
    ts, ys, res, nsteps, nacc, nrej = outs
    trajectories = []
    for b in range(batch):
        trajectories.append({"y0": np.asarray(y0), "result": names[int(res[b])],
                             "num_steps": int(nsteps[b]), "num_accepted": int(nacc[b]),
                             "num_rejected": int(nrej[b]), "ts": ts[b], "ys": ys[b]})
    return trajectories


def encode_trajectory(traj: dict, save: str, level: tuple[int, int]) -> dict:
    """The JSON form of one trajectory, with the saved rows selected as documented."""
    import numpy as np

    ts, ys = traj["ts"], traj["ys"]
    if save == "steps":
        n = traj["num_accepted"]
        # Accepted steps fill the first n slots; diffrax pads the rest with +inf.
        assert np.all(np.isfinite(ts[:n])) and np.all(np.isinf(ts[n:])), "unexpected padding"
        ts = ts[:n]
        idx = thin_indices(n, *level)
    else:
        # All requested times; a solve that stopped early leaves later slots at +inf.
        idx = [i for i in range(len(ts)) if np.isfinite(ts[i])]
        ts = ts[idx]
    return {"y0": [num(v) for v in traj["y0"]], "result": traj["result"],
            "num_steps": traj["num_steps"], "num_accepted": traj["num_accepted"],
            "num_rejected": traj["num_rejected"], "ts": [num(v) for v in ts],
            "ys": [[num(v) for v in ys[i]] for i in idx], "ys_index": idx}


def check_dt0_none(mlp, dtype) -> dict:
    """Check reference section 2.6: dt0=None gives dt0 = 0.01 for an ODE in diffrax 0.7.2.

    Two independent observations on the seed problem (tsit5, rtol 1e-4, atol 1e-6, y0 = 0):
    (a) with tolerances so loose that the first step is accepted, the first saved time is the
        end of the first step, t0 + dt0;
    (b) the whole solve with dt0=None is bit-identical to the one with dt0=0.01.
    Also records what the Hairer-Norsett-Wanner selection would have picked if it ran.
    """
    import diffrax
    import jax
    import jax.numpy as jnp
    import numpy as np

    y0 = jnp.zeros(STATE_SIZE, dtype)
    loose = make_solve(mlp, "tsit5", 1e6, 1e6, "steps", dtype, dt0=None, max_steps=1)
    ts_loose = np.asarray(jax.jit(loose)(y0)[0])
    first_step = float(ts_loose[0])

    none_out = jax.jit(make_solve(mlp, "tsit5", 1e-4, 1e-6, "steps", dtype, dt0=None))(y0)
    fixed_out = jax.jit(make_solve(mlp, "tsit5", 1e-4, 1e-6, "steps", dtype, dt0=0.01))(y0)
    identical = all(np.array_equal(np.asarray(a), np.asarray(b))
                    for a, b in zip(none_out, fixed_out))

    # What PIDController.init picks when handed an unwrapped ODETerm (diffeqsolve wraps it).
    term = diffrax.ODETerm(lambda t, y, args: mlp(y))
    controller = diffrax.PIDController(rtol=1e-4, atol=1e-6)
    tnext, _ = controller.init(term, T0, T1, y0, None, None,
                               lambda terms, t, y, args: terms.vf(t, y, args), 5)
    hnw = float(tnext) - T0

    confirmed = first_step == float(np.asarray(0.01, dtype)) and identical
    return {"claim": "reference section 2.6: dt0=None yields dt0 = 0.01 for an ODE "
                     "(diffeqsolve wraps the term, so the initial-step heuristic never runs)",
            "confirmed": confirmed,
            "first_step_end_with_dt0_none": first_step,
            "solve_identical_to_dt0_0.01": identical,
            "num_steps_with_dt0_none": int(np.asarray(none_out[3])),
            "heuristic_dt0_if_term_were_unwrapped": hnw}


def worker(precision: str, models: list[str]) -> None:
    """Solve the whole matrix for one precision and write one JSON file per model."""
    import jax
    jax.config.update("jax_enable_x64", precision == "fp64")
    jax.config.update("jax_default_matmul_precision", "highest")
    import numpy as np

    dtype = np.float64 if precision == "fp64" else np.float32
    names = result_names()
    vers = versions()
    y0s = {"zero": np.zeros(STATE_SIZE), "ramp": np.linspace(-1.0, 1.0, STATE_SIZE)}
    save_ts = np.linspace(T0, T1, NUM_SAVE_TS).astype(dtype)

    for model in models:
        spec = MODELS[model]
        mlp = load_mlp(spec, dtype)
        started = time.time()
        raw_cases = []
        for method in METHODS:
            for rtol, atol in TOLERANCES:
                for save in SAVES:
                    for batch in BATCHES:
                        for y0_name in Y0_NAMES:
                            # y0 is built in float64 and rounded once to the state dtype.
                            y0 = jax.numpy.asarray(y0s[y0_name].astype(dtype))
                            trajs = run_case(mlp, method, rtol, atol, save, batch, y0,
                                             dtype, names)
                            raw_cases.append(((method, rtol, atol, y0_name, batch, save), trajs))
                counts = [t["num_steps"] for key, ts in raw_cases[-8:] for t in ts]
                print(f"[{precision}] {model} {method:6s} rtol={rtol:g} atol={atol:g} "
                      f"num_steps={counts} ({time.time() - started:.0f}s)", flush=True)

        notes = {
            "batch": "batch 1 is a plain diffeqsolve; batch 2 is jax.vmap(diffeqsolve) over two "
                     "identical copies of y0",
            "y0": "zero = zeros(10); ramp = numpy.linspace(-1, 1, 10) in float64, rounded once "
                  "to the state precision",
            "weights": "the float32 tensors of model_file" + (
                ", widened exactly to float64" if precision == "fp64" else ""),
            "jax_config": {"jax_enable_x64": precision == "fp64",
                           "jax_default_matmul_precision": "highest", "platform": "cpu"},
            "steps_rows": "save=steps: ts holds every accepted step's end time; ys holds all "
                          "rows when num_accepted <= {0}, otherwise every k-th row, "
                          "k = ceil(num_accepted / {1}), plus the last; ys_index says which",
            "non_finite": "a non-finite number would be written as the string nan, inf or -inf",
        }
        if model == "seed":
            notes["dt0_none"] = check_dt0_none(mlp, dtype)

        # Encode, thinning the step rows further only if the file would be too large.
        for level in THINNING_LEVELS:
            cases = []
            for (method, rtol, atol, y0_name, batch, save), trajs in raw_cases:
                case = {"method": method, "rtol": rtol, "atol": atol, "y0_name": y0_name,
                        "batch": batch, "save": save, "t0": T0, "t1": T1, "dt0": DT0,
                        "max_steps": MAX_STEPS}
                if save == "ts":
                    case["save_ts"] = [num(v) for v in save_ts]
                case["trajectories"] = [encode_trajectory(t, save, level) for t in trajs]
                cases.append(case)
            notes_level = dict(notes)
            notes_level["steps_rows"] = notes["steps_rows"].format(*level)
            header = {"generator": GENERATOR, "versions": vers, "model": model,
                      "model_file": spec["path"], "precision": precision,
                      "notes": notes_level}
            text = render_json(header, cases)
            if len(text.encode()) <= MAX_JSON_BYTES:
                break
            print(f"[{precision}] {model}: {len(text)} bytes with thinning {level}, "
                  "thinning further", flush=True)
        # The file must parse back to exactly the data that was encoded.
        assert json.loads(text) == {**header, "cases": cases}
        path = out_json_path(model, precision)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"[{precision}] wrote {path.relative_to(REPO)} ({len(text.encode())} bytes)",
              flush=True)


def render_json(header: dict, cases: list[dict]) -> str:
    """Indented header, one compact line per case: small, diff-friendly, exact floats."""
    lines = ["{"]
    for key, value in header.items():
        lines.append(f" {json.dumps(key)}: {json.dumps(value, allow_nan=False)},")
    lines.append(' "cases": [')
    body = [" " + json.dumps(c, separators=(",", ":"), allow_nan=False) for c in cases]
    lines.append(",\n".join(body))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Per-trajectory problems (--only-ensemble)
# --------------------------------------------------------------------------------------------

ENS_MODEL = {"name": "cond4x2", "state": 4, "inputs": 2, "width": 32, "depth": 2,
             "activation": "tanh", "seed": 3, "scale": 3.0,
             "path": "tests/data/models/cond4x2.safetensors"}
ENS_METHODS = ("tsit5", "dopri5", "bosh3", "heun", "dopri8")
ENS_TOLERANCES = ((1e-3, 1e-6), (1e-6, 1e-9))
ENS_SAVES = ("t1", "ts", "steps", "ts_clip")
ENS_MAX_STEPS = 4096
# Five trajectories of their own: (t0, t1, dt0, args) per direction; y0 below.
ENS_SPANS = {
    "forward": {"t0": [0.0, 0.5, -1.0, 0.3, 0.1], "t1": [6.0, 12.0, 4.0, 9.0, 20.0],
                "dt0": [0.02, 0.05, 0.01, 0.1, 0.03]},
    "backward": {"t0": [6.0, 12.0, 4.0, 9.0, 20.0], "t1": [0.0, 0.5, -1.0, 0.3, 0.1],
                 "dt0": [-0.02, -0.05, -0.01, -0.1, -0.03]},
}
ENS_ARGS = [[0.0, 0.0], [1.0, -0.5], [-2.0, 0.75], [0.3, 1.7], [-0.9, -1.1]]
ENS_Y0 = [[0.0, 0.0, 0.0, 0.0], [0.5, -0.5, 0.25, 1.0], [-1.0, 0.3, 0.7, -0.2],
          [0.1, 0.2, 0.3, 0.4], [2.0, -1.0, 0.0, 0.5]]
# SaveAt(ts): inside every interval (the intersection is [0.5, 4] either way); ts_clip: a
# longer list that each trajectory clips to its own interval.
ENS_TS = {"forward": [0.5, 1.1, 2.0, 3.3, 4.0], "backward": [4.0, 3.3, 2.0, 1.1, 0.5]}
ENS_TS_CLIP = {"forward": [-0.5, 0.0, 0.4, 2.5, 5.0, 8.0, 11.0, 15.0],
               "backward": [15.0, 11.0, 8.0, 5.0, 2.5, 0.4, 0.0, -0.5]}


def ens_out_json_path(precision: str) -> Path:
    return REPO / "tests" / "data" / "diffrax" / f"ensemble-{precision}.json"


def build_ens_mlp():
    import equinox as eqx
    import jax
    m = ENS_MODEL
    mlp = eqx.nn.MLP(in_size=m["state"] + m["inputs"], out_size=m["state"],
                     width_size=m["width"], depth=m["depth"],
                     activation=activation_fn(m["activation"]),
                     key=jax.random.PRNGKey(m["seed"]))
    return jax.tree_util.tree_map(lambda x: x * m["scale"] if eqx.is_array(x) else x, mlp)


def export_ens_model() -> None:
    """Write the conditioned model (float32, equinox names, metadata inputs = k)."""
    import equinox as eqx
    import numpy as np
    from safetensors.numpy import save

    mlp = build_ens_mlp()
    tensors = {}
    for i, layer in enumerate(mlp.layers):
        tensors[f"layers.{i}.weight"] = np.ascontiguousarray(np.asarray(layer.weight))
        tensors[f"layers.{i}.bias"] = np.ascontiguousarray(np.asarray(layer.bias))
        assert tensors[f"layers.{i}.weight"].dtype == np.float32
    metadata = {"activation": ENS_MODEL["activation"], "final_activation": "identity",
                "inputs": str(ENS_MODEL["inputs"]), "producer": f"equinox {eqx.__version__}"}
    path = REPO / ENS_MODEL["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(sort_safetensors_metadata(save(tensors, metadata=metadata)))
    print(f"[make_reference] wrote {ENS_MODEL['path']} ({path.stat().st_size} bytes)", flush=True)


def load_ens_mlp(dtype):
    """The conditioned MLP with the committed float32 tensors, cast to `dtype`."""
    import equinox as eqx
    import jax.numpy as jnp
    from safetensors import safe_open
    from safetensors.numpy import load_file

    path = REPO / ENS_MODEL["path"]
    with safe_open(str(path), framework="numpy") as handle:
        assert handle.metadata()["inputs"] == str(ENS_MODEL["inputs"])
    tensors = load_file(str(path))
    skeleton = build_ens_mlp()
    n = len(skeleton.layers)
    ws = [jnp.asarray(tensors[f"layers.{i}.weight"].astype(dtype)) for i in range(n)]
    bs = [jnp.asarray(tensors[f"layers.{i}.bias"].astype(dtype)) for i in range(n)]
    return eqx.tree_at(lambda m: [l.weight for l in m.layers] + [l.bias for l in m.layers],
                       skeleton, ws + bs)


def ens_solve_fn(mlp, method, rtol, atol, save_ts, max_steps=ENS_MAX_STEPS, save="t1"):
    """(y0, t0, t1, dt0, args) -> raw diffeqsolve outputs; the term is MLP([y, args])."""
    import diffrax
    import jax.numpy as jnp

    solver = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "bosh3": diffrax.Bosh3,
              "heun": diffrax.Heun, "dopri8": diffrax.Dopri8}[method]()
    term = diffrax.ODETerm(lambda t, y, args: mlp(jnp.concatenate([y, args])))
    controller = diffrax.PIDController(rtol=rtol, atol=atol)
    if save == "steps":
        saveat = diffrax.SaveAt(steps=True)
    elif save == "t1":
        saveat = diffrax.SaveAt(t1=True)
    else:
        saveat = diffrax.SaveAt(ts=save_ts)

    def solve(y0, t0, t1, dt0, args):
        sol = diffrax.diffeqsolve(term, solver, t0, t1, dt0, y0, args=args, saveat=saveat,
                                  stepsize_controller=controller, max_steps=max_steps,
                                  throw=False)
        return (sol.ts, sol.ys, sol.result._value, sol.stats["num_steps"],
                sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"])
    return solve


def ens_spread_worker() -> None:
    """diffrax's own rounding spread on the fp64 dopri8 ensemble problems: each trajectory solved
    alone with the MLP's sums in three orders (as written, reversed, in two halves)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_default_matmul_precision", "highest")
    import diffrax
    import jax.numpy as jnp
    import numpy as np

    mlp = load_ens_mlp(np.float64)
    layers = [(l.weight, l.bias) for l in mlp.layers]

    def field(order):
        def f(t, y, args):
            h = jnp.concatenate([y, args])
            for i, (w, b) in enumerate(layers):
                if order == "as_written":
                    h = w @ h + b
                elif order == "reversed":
                    h = jnp.einsum("i,oi->o", h[::-1], w[:, ::-1]) + b
                else:  # two halves, summed separately
                    k = h.shape[0] // 2
                    h = (w[:, :k] @ h[:k] + w[:, k:] @ h[k:]) + b
                if i < len(layers) - 1:
                    h = jnp.tanh(h)
            return h
        return f

    def rel(a, b):
        scale = np.maximum(np.max(np.abs(b), axis=-1, keepdims=True), 1e-3)
        return float(np.max(np.abs(a - b) / scale))

    started = time.time()
    cases = []
    for direction, span in ENS_SPANS.items():
        for rtol, atol in ENS_TOLERANCES:
            trajs = []
            for b in range(len(ENS_Y0)):
                solved = {}
                for order in ("as_written", "reversed", "halves"):
                    term = diffrax.ODETerm(field(order))
                    ctrl = diffrax.PIDController(rtol=rtol, atol=atol)
                    out = {}
                    for save, saveat in (("steps", diffrax.SaveAt(steps=True)),
                                         ("ts", diffrax.SaveAt(ts=jnp.asarray(
                                             ENS_TS[direction], jnp.float64)))):
                        sol = jax.jit(lambda y0, a, saveat=saveat, term=term, ctrl=ctrl:
                                      diffrax.diffeqsolve(
                                          term, diffrax.Dopri8(), span["t0"][b], span["t1"][b],
                                          span["dt0"][b], y0, args=a, saveat=saveat,
                                          stepsize_controller=ctrl, max_steps=ENS_MAX_STEPS,
                                          throw=False))(jnp.asarray(ENS_Y0[b], jnp.float64),
                                                        jnp.asarray(ENS_ARGS[b], jnp.float64))
                        out[save] = (np.asarray(sol.ts), np.asarray(sol.ys),
                                     int(sol.stats["num_steps"]),
                                     int(sol.stats["num_accepted_steps"]))
                    solved[order] = out
                base = solved["as_written"]
                steps = [solved[o]["steps"][2] for o in solved]
                step_t = final = dense = 0.0
                for o in ("reversed", "halves"):
                    other = solved[o]
                    n, n2 = base["steps"][3], other["steps"][3]
                    final = max(final, rel(other["steps"][1][n2 - 1], base["steps"][1][n - 1]))
                    dense = max(dense, rel(other["ts"][1], base["ts"][1]))
                    if n == n2:
                        t, t2 = base["steps"][0][:n], other["steps"][0][:n]
                        step_t = max(step_t, float(np.max(np.abs(t2 - t) /
                                                          np.maximum(np.abs(t), 1e-3))))
                    else:
                        step_t = math.inf
                trajs.append({"num_steps": steps, "step_t": num(step_t), "final": num(final),
                              "dense_ts": num(dense)})
            cases.append({"direction": direction, "method": "dopri8", "rtol": rtol,
                          "atol": atol, "trajectories": trajs})
            print(f"[fp64] spread {direction:8s} dopri8 rtol={rtol:g} "
                  f"{[t['num_steps'] for t in trajs]} ({time.time() - started:.0f}s)", flush=True)
    notes = {"what": "each trajectory of ensemble-fp64.json's dopri8 cases solved alone by "
                     "diffrax with the MLP's sums as written, reversed and in two halves; "
                     "num_steps lists the three counts, step_t, final and dense_ts the largest "
                     "relative deviation of the other two from the first (step ends in time, "
                     "the state at t1, the states at the shared ts; 'inf' for step_t where "
                     "the counts differ)"}
    header = {"generator": GENERATOR + " --only-ensemble", "versions": versions(),
              "model": ENS_MODEL["name"], "model_file": ENS_MODEL["path"],
              "precision": "fp64", "notes": notes}
    text = render_json(header, cases)
    path = REPO / "tests" / "data" / "diffrax" / "ensemble-spread-fp64.json"
    path.write_text(text)
    print(f"[fp64] wrote {path.relative_to(REPO)} ({len(text.encode())} bytes)", flush=True)


def ens_worker(precision: str) -> None:
    """Solve the ensemble matrix in one precision and write ensemble-<precision>.json."""
    import jax
    jax.config.update("jax_enable_x64", precision == "fp64")
    jax.config.update("jax_default_matmul_precision", "highest")
    import jax.numpy as jnp
    import numpy as np

    dtype = np.float64 if precision == "fp64" else np.float32
    names = result_names()
    mlp = load_ens_mlp(dtype)
    started = time.time()

    def rounded(values):  # every number as diffrax sees it: rounded once to the dtype
        return np.asarray(values, np.float64).astype(dtype)

    y0 = rounded(ENS_Y0)
    args = rounded(ENS_ARGS)
    cases = []
    for direction, span in ENS_SPANS.items():
        t0s, t1s, dt0s = rounded(span["t0"]), rounded(span["t1"]), rounded(span["dt0"])
        for method in ENS_METHODS:
            for rtol, atol in ENS_TOLERANCES:
                counts = []
                for save in ENS_SAVES:
                    if save == "ts_clip" and rtol != ENS_TOLERANCES[-1][0]:
                        continue
                    save_ts = rounded(ENS_TS_CLIP[direction] if save == "ts_clip"
                                      else ENS_TS[direction])
                    trajs = []
                    if save != "ts_clip":
                        fn = ens_solve_fn(mlp, method, rtol, atol, jnp.asarray(save_ts),
                                          save=save)
                        outs = jax.jit(jax.vmap(fn))(jnp.asarray(y0), jnp.asarray(t0s),
                                                     jnp.asarray(t1s), jnp.asarray(dt0s),
                                                     jnp.asarray(args))
                        outs = [np.asarray(o) for o in outs]
                    else:
                        # each trajectory alone, with the shared times inside its interval
                        rows = []
                        for b in range(len(y0)):
                            lo, hi = sorted((t0s[b], t1s[b]))
                            mine = save_ts[(save_ts >= lo) & (save_ts <= hi)]
                            assert mine.size > 0
                            fn = ens_solve_fn(mlp, method, rtol, atol, jnp.asarray(mine),
                                              save="ts")
                            rows.append([np.asarray(o) for o in jax.jit(fn)(
                                jnp.asarray(y0[b]), t0s[b], t1s[b], dt0s[b],
                                jnp.asarray(args[b]))])
                        outs = [[r[i] for r in rows] for i in range(6)]
                    ts, ys, res, nsteps, nacc, nrej = outs
                    for b in range(len(y0)):
                        traj = {"result": names[int(res[b])], "num_steps": int(nsteps[b]),
                                "num_accepted": int(nacc[b]), "num_rejected": int(nrej[b])}
                        tb, yb = np.asarray(ts[b]), np.asarray(ys[b])
                        if save == "steps":
                            n = traj["num_accepted"]
                            assert np.all(np.isfinite(tb[:n])) and np.all(np.isinf(tb[n:]))
                            keep = list(range(n))
                        else:
                            keep = [i for i in range(len(tb)) if np.isfinite(tb[i])]
                        traj["ts"] = [num(v) for v in tb[keep]]
                        traj["ys"] = [[num(v) for v in yb[i]] for i in keep]
                        trajs.append(traj)
                    counts.append([t["num_steps"] for t in trajs])
                    case = {"direction": direction, "method": method, "rtol": rtol,
                            "atol": atol, "save": save, "max_steps": ENS_MAX_STEPS,
                            "t0s": [num(v) for v in t0s], "t1s": [num(v) for v in t1s],
                            "dt0s": [num(v) for v in dt0s],
                            "y0": [[num(v) for v in r] for r in y0],
                            "args": [[num(v) for v in r] for r in args]}
                    if save in ("ts", "ts_clip"):
                        case["save_ts"] = [num(v) for v in save_ts]
                    case["trajectories"] = trajs
                    cases.append(case)
                print(f"[{precision}] ensemble {direction:8s} {method:6s} rtol={rtol:g} "
                      f"atol={atol:g} num_steps={counts[0]} ({time.time() - started:.0f}s)",
                      flush=True)
    notes = {
        "vmap": "save t1, ts and steps: one jax.vmap(diffeqsolve) over (y0, t0, t1, dt0, args) "
                "of the five trajectories; save ts_clip: each trajectory alone "
                "(diffeqsolve without vmap) with the save times of save_ts inside its own "
                "interval",
        "vector_field": "f(t, y, args) = mlp(jnp.concatenate([y, args])), mlp the float32 "
                        "tensors of model_file" + (", widened exactly to float64"
                                                   if precision == "fp64" else ""),
        "controller": "PIDController(rtol, atol), defaults otherwise; throw=False",
        "numbers": "t0s, t1s, dt0s, save_ts, y0 and args are the values diffrax solved with "
                   "(rounded once from float64 to the state precision)",
        "rows": "ts and ys hold every saved point diffrax wrote (save steps: every accepted "
                "step's end; padding left out)",
        "jax_config": {"jax_enable_x64": precision == "fp64",
                       "jax_default_matmul_precision": "highest", "platform": "cpu"},
    }
    header = {"generator": GENERATOR + " --only-ensemble", "versions": versions(),
              "model": ENS_MODEL["name"], "model_file": ENS_MODEL["path"],
              "precision": precision, "notes": notes}
    text = render_json(header, cases)
    assert json.loads(text) == {**header, "cases": cases}
    path = ens_out_json_path(precision)
    path.write_text(text)
    print(f"[{precision}] wrote {path.relative_to(REPO)} ({len(text.encode())} bytes)",
          flush=True)


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def summarize(models: list[str]) -> None:
    """Print num_steps per (model, precision, method, tolerance) from the written files."""
    print()
    print("num_steps (save=steps; batch 2 lists both trajectories; '!' = differs with save=ts)")
    cols = [(y, b) for y in Y0_NAMES for b in BATCHES]
    print(f"{'model':7s} {'prec':4s} {'method':6s} {'rtol':>5s} {'atol':>5s}  " +
          "  ".join(f"{y}/b{b}".rjust(11) for y, b in cols))
    failures = {}
    for model in models:
        for precision in PRECISIONS:
            path = out_json_path(model, precision)
            data = json.loads(path.read_text())
            table = {}
            for case in data["cases"]:
                key = (case["method"], case["rtol"], case["atol"], case["y0_name"],
                       case["batch"])
                steps = [t["num_steps"] for t in case["trajectories"]]
                table.setdefault(key, {})[case["save"]] = steps
                for t in case["trajectories"]:
                    if t["result"] != "success":
                        # Grouped per configuration: y0, batch and save are listed together.
                        group = (model, precision, case["method"], case["rtol"], case["atol"],
                                 t["result"])
                        entry = failures.setdefault(group, {"count": 0, "where": set()})
                        entry["count"] += 1
                        entry["where"].add(f"{case['y0_name']}/b{case['batch']}/{case['save']}")
            for method in METHODS:
                for rtol, atol in TOLERANCES:
                    cells = []
                    for y0_name, batch in cols:
                        entry = table[(method, rtol, atol, y0_name, batch)]
                        cell = ",".join(str(s) for s in entry["steps"])
                        if entry["steps"] != entry["ts"]:
                            cell += "!"
                        cells.append(cell.rjust(11))
                    print(f"{model:7s} {precision:4s} {method:6s} {rtol:5.0e} {atol:5.0e}  " +
                          "  ".join(cells))
    print()
    if failures:
        print("Trajectories that did not succeed (y0/batch/save):")
        for (model, precision, method, rtol, atol, result), entry in failures.items():
            print(f"  {model} {precision} {method} rtol={rtol:g} atol={atol:g}: {result} in "
                  f"{entry['count']} trajectories ({', '.join(sorted(entry['where']))})")
    else:
        print("Every trajectory ended in success.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only-models", action="store_true",
                        help="export the .safetensors models only; skip the solve matrix")
    parser.add_argument("--only-ensemble", action="store_true",
                        help="write only the per-trajectory model and ensemble-*.json files")
    parser.add_argument("--no-venv", action="store_true",
                        help="use the current interpreter as it is (packages already installed)")
    parser.add_argument("--worker", choices=PRECISIONS, help=argparse.SUPPRESS)
    parser.add_argument("--ensemble-worker", choices=PRECISIONS + ("spread",),
                        help=argparse.SUPPRESS)
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of models (default: all)")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")

    if args.worker:
        worker(args.worker, models)
        return 0
    if args.ensemble_worker == "spread":
        ens_spread_worker()
        return 0
    if args.ensemble_worker:
        ens_worker(args.ensemble_worker)
        return 0

    if sys.version_info < (3, 11):
        sys.exit("make_reference.py: the pinned jax needs Python >= 3.11")
    venv = venv_dir()
    if not args.no_venv and not running_in(venv):
        python = ensure_venv(venv)
        # Re-execute inside the venv; its python sets sys.prefix to the venv.
        os.execv(str(python), [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])

    started = time.time()
    import jax
    jax.config.update("jax_default_matmul_precision", "highest")
    if args.only_ensemble:
        export_ens_model()
        for precision in PRECISIONS + ("spread",):
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--ensemble-worker",
                            precision], check=True)
        print(f"\nwall time: {time.time() - started:.1f} s")
        return 0
    export_models()
    if not args.only_models:
        # One JAX process at a time; each precision needs its own process for jax_enable_x64.
        for precision in PRECISIONS:
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", precision,
                            "--models", ",".join(models)], check=True)
        summarize(models)
    print(f"\nwall time: {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
