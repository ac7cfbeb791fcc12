#!/usr/bin/env python3
"""Produce clnode's reference data with the real diffrax 0.7.2 (JAX, CPU).

How to run (from anywhere; paths are taken relative to the repository root):

    python3 scripts/make_reference.py                 # models + the full solve matrix
    python3 scripts/make_reference.py --only-models   # only the two .safetensors files
    python3 scripts/make_reference.py --only-ensemble # only the per-trajectory (ensemble) files
    python3 scripts/make_reference.py --only-forms    # only the scaled models and forms files
    BUILD/python-venv/bin/python scripts/make_reference.py --only-grad --no-venv  # gradients
    BUILD/python-venv/bin/python scripts/make_reference.py --only-jvp --no-venv   # forward mode
    CLNODE_TORCH_PYTHON=/path/to/venv/bin/python scripts/make_reference.py --only-dt0  # peers

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

``--only-forms`` writes only these (and touches none of the files above): the forms of diffrax's
neural ODE and latent ODE examples (docs/examples/neural_ode.ipynb, latent_ode.ipynb), a vector
field ``out_scale * mlp(y)`` with ``eqx.nn.MLP(activation=softplus, final_activation=tanh)``.

* ``tests/data/models/node2x64s.safetensors``, ``node2x64v.safetensors`` -- the neural ODE
  example's shape, ``eqx.nn.MLP(2, 2, width_size=64, depth=2, key=PRNGKey(5678))`` with every
  parameter multiplied by 3 in float32 (trained weights are larger than equinox's
  initialisation, and so the adaptive solves take tens of steps), and the float32 tensor
  ``out_scale``: the scalar 0.8 (shape []) or one value per component, (0.7, 1.3) (shape [2]).
* ``tests/data/models/latent16.safetensors`` -- the latent ODE example's decoder field,
  ``eqx.nn.MLP(16, 16, width_size=16, depth=2, key=PRNGKey(2024))``, parameters times 4,
  ``out_scale`` 0.6 (shape []).  All three carry the metadata ``activation = "softplus"``,
  ``final_activation = "tanh"`` and ``producer``.
* ``tests/data/diffrax/forms-<fp32|fp64>.json`` -- diffrax's step counts, results and saved points
  of: ``neural_ode`` (Tsit5, PIDController (1e-3, 1e-6) as the example and (1e-6, 1e-9), t0 = 0,
  t1 = 10, dt0 = ts[1] - ts[0], SaveAt(ts) on linspace(0, 10, 100) or SaveAt(steps), jax.vmap
  over four y0, both node2x64 models); ``latent_decoder`` (ConstantStepSize, dt0 = 0.4, under
  jax.vmap over (y0, ts) with six samples each its own 20 sorted times and its own interval
  [ts[0], ts[-1]], forwards and backwards, five methods); ``pid_rows`` (those rows with the PID
  controller, tsit5 and dopri5, two tolerances); ``constant_vmap`` (ConstantStepSize under
  jax.vmap over (y0, t0, t1, dt0) of five trajectories, one shared list of save times, SaveAt
  t1, ts and steps, forwards and backwards, five methods).  Every input (times, steps, initial
  states) is a float32 number in both files, so fp32 and fp64 solve the same problem; fp64 widens
  the float32 weights and scale exactly.  max_steps = 4096, throw=False.

``--only-dt0`` writes only ``tests/data/peers/dt0-fp64.json``: the automatic first steps of
torchode 1.0.1 (per sample) and torchdiffeq 0.2.5 (per trajectory) for clnode's dt0_auto, by
``scripts/reference_dt0.py`` (its docstring says what is recorded) run with the interpreter that
``CLNODE_TORCH_PYTHON`` names: one with torch, torchode and torchdiffeq, which the pinned
reference environment does not hold (PyPI's torch is its 3 GB CUDA build; install torchode and
torchdiffeq with ``--no-deps``, then torchtyping, ``typeguard<3`` and scipy).

``--only-grad`` writes only these (and touches none of the files above).  It needs the clnode
Python package beside jax, equinox and diffrax in the interpreter that runs it (the venv of
``scripts/test_python.sh BUILD`` has all of them: run it there with ``--no-venv``), because the
reference gradients are taken at clnode's own step ends:

* ``tests/data/models/grad-<name>.safetensors`` -- six small models 2 -> 16 -> 16 -> 2 (the
  input [y], [y, t], [y, c] or [y, t, c] with two conditioning inputs), one per pair of
  activation and final activation among identity, relu, tanh, sigmoid, softplus, silu and gelu,
  with no output scale, a scalar or one per component (GRAD_MODELS): numpy normal weights
  (seeded) times 2 / sqrt(fan_in), float32, written by ``clnode.MLP.save(dtype="float32")``.
* ``tests/data/diffrax/grad-<fp64|fp32>.npz`` -- per case (GRAD_CASES: every method, SaveAt t0,
  ts, steps and t1 alone and together, save times shared or one row per trajectory, PID and
  constant steps, one interval or each trajectory its own t0, t1 and dt0, forwards and
  backwards, time input and conditioning inputs, a trajectory that ends with
  max_steps_reached; 2 to 4 trajectories each) the problem, clnode's accepted step ends in that
  precision, a seeded random cotangent in clnode's saved-points layout (batch x slots x dim, the
  slots the most points of any trajectory, zero at padding), and the gradient of
  L = sum(cot * ys) with respect to y0, the inputs and every parameter (summed over the batch)
  from jax.grad through jax.vmap(diffrax.diffeqsolve):
  ``g_stepto`` with StepTo at clnode's step ends (in that precision; diffrax's StepTo lets a
  trajectory's list end in repeats of t1, never reached, so that trajectories of different step
  counts share one vmap), ``ys_stepto`` the values it saved;
  ``g_adaptive`` (fp64) through diffrax's own controller, with diffrax's step counts and
  ``dx_step_ends`` its accepted step ends (NaN where its count is not clnode's);
  ``g64_stepto`` (fp32) the float64 StepTo gradient at clnode float32's step ends.  The times
  are arguments that are not differentiated.  Every input is a float32 number.  The layout of
  the members (all float64; integers exact; strings as rows of character codes in ``names``):
  GRAD_MEMBERS, GRAD_CASE_COLS (member ``cases``) and GRAD_TRAJ_COLS (``traj_counts``).

``--only-jvp`` writes only ``tests/data/diffrax/jvp-fp64.npz``: diffrax's forward-mode JVPs
(``adjoint=diffrax.ForwardMode()``, float64) over a matrix of the field forms clnode.jax takes,
methods, saves, jax.vmap, constant steps and backward time, at clnode's own step ends (StepTo)
and with diffrax's own controller (its step counts and step ends recorded), by
``scripts/reference_jvp.py`` (its docstring lists the cases and members).  Like ``--only-grad``
it needs the clnode Python package (run it with ``--no-venv`` in the test venv).

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
# The forms of diffrax's neural ODE and latent ODE examples (--only-forms)
# --------------------------------------------------------------------------------------------

# Models of the examples' shapes, f(t, y) = out_scale * mlp(y) with softplus inside and tanh as
# the final activation, exported with a scale as a trained model has it (float32, like the
# weights).  Every weight and bias is multiplied by `gain` in float32, as training grows them, so
# that the adaptive solves take tens of steps and reject some (at equinox's initialisation the
# field is nearly constant and the PID controller crosses [0, 10] in three steps).  The two
# node2x64 models share their weights (the same key) and differ in the scale.
FORMS_MODELS = {
    "node2x64s": {"state": 2, "width": 64, "depth": 2, "seed": 5678, "gain": 3.0,
                  "out_scale": 0.8, "path": "tests/data/models/node2x64s.safetensors"},
    "node2x64v": {"state": 2, "width": 64, "depth": 2, "seed": 5678, "gain": 3.0,
                  "out_scale": [0.7, 1.3], "path": "tests/data/models/node2x64v.safetensors"},
    "latent16": {"state": 16, "width": 16, "depth": 2, "seed": 2024, "gain": 4.0,
                 "out_scale": 0.6, "path": "tests/data/models/latent16.safetensors"},
}
FORMS_METHODS = ("tsit5", "dopri5", "bosh3", "heun", "dopri8")
FORMS_MAX_STEPS = 4096
# neural_ode: the example's grid and controller, and a tighter tolerance.
NODE_TS = (0.0, 10.0, 100)
NODE_BATCH = 4
NODE_TOLERANCES = ((1e-3, 1e-6), (1e-6, 1e-9))
# latent_decoder: the example's constant steps of 0.4 and its irregular sorted times per sample.
LATENT_BATCH, LATENT_POINTS, LATENT_DT0 = 6, 20, 0.4
# constant_vmap: constant steps, each trajectory its own y0, t0, t1 and step, one shared list.
CONST_SPANS = {
    "forward": {"t0": [0.0, 0.25, -0.5, 0.1, 0.3], "t1": [2.0, 3.0, 2.2, 4.1, 2.75],
                "dt0": [0.4, 0.4, 0.3, 0.25, 0.35]},
    "backward": {"t0": [2.0, 3.0, 2.2, 4.1, 2.75], "t1": [0.0, 0.25, -0.5, 0.1, 0.3],
                 "dt0": [-0.4, -0.4, -0.3, -0.25, -0.35]},
}
CONST_TS = {"forward": [0.3, 0.75, 1.2, 1.6, 2.0], "backward": [2.0, 1.6, 1.2, 0.75, 0.3]}
# pid_rows: each sample its own times (the latent_decoder rows) under the PID controller.
ROWS_METHODS = ("tsit5", "dopri5")
ROWS_TOLERANCES = ((1e-3, 1e-6), (1e-6, 1e-9))
FORMS_SEED = 20240601  # numpy.random.default_rng seed of the initial states and save times


def forms_out_json_path(precision: str) -> Path:
    return REPO / "tests" / "data" / "diffrax" / f"forms-{precision}.json"


def as_f32(values):
    """float64 values rounded once to float32 and widened back: every input of the forms data is
    a float32 number, so that the fp32 and fp64 files solve exactly the same problem."""
    import numpy as np
    return np.asarray(values, np.float64).astype(np.float32).astype(np.float64)


def build_forms_mlp(spec: dict):
    """The example's MLP: softplus inside, tanh last (float32 under JAX defaults), every
    parameter multiplied by the spec's gain."""
    import equinox as eqx
    import jax
    mlp = eqx.nn.MLP(in_size=spec["state"], out_size=spec["state"], width_size=spec["width"],
                     depth=spec["depth"], activation=jax.nn.softplus,
                     final_activation=jax.nn.tanh, key=jax.random.PRNGKey(spec["seed"]))
    return jax.tree_util.tree_map(lambda x: x * spec["gain"] if eqx.is_array(x) else x, mlp)


def export_forms_models() -> None:
    """Write the three models: equinox's tensor names, the tensor out_scale (shape [] for a
    scalar, [N] per component), all float32, and the metadata the C loader reads."""
    import equinox as eqx
    import numpy as np
    from safetensors.numpy import save

    for name, spec in FORMS_MODELS.items():
        mlp = build_forms_mlp(spec)
        tensors = {}
        for i, layer in enumerate(mlp.layers):
            tensors[f"layers.{i}.weight"] = np.ascontiguousarray(np.asarray(layer.weight))
            tensors[f"layers.{i}.bias"] = np.ascontiguousarray(np.asarray(layer.bias))
            assert tensors[f"layers.{i}.weight"].dtype == np.float32
        tensors["out_scale"] = np.asarray(spec["out_scale"], np.float32)
        metadata = {"activation": "softplus", "final_activation": "tanh",
                    "producer": f"equinox {eqx.__version__}"}
        path = REPO / spec["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(sort_safetensors_metadata(save(tensors, metadata=metadata)))
        print(f"[make_reference] wrote {spec['path']} ({path.stat().st_size} bytes)", flush=True)


def load_forms_field(spec: dict, dtype):
    """The vector field `out_scale * mlp(y)` with the committed float32 tensors cast to dtype."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file

    path = REPO / spec["path"]
    with safe_open(str(path), framework="numpy") as handle:
        meta = handle.metadata()
    assert meta["activation"] == "softplus" and meta["final_activation"] == "tanh"
    tensors = load_file(str(path))
    skeleton = build_forms_mlp(spec)
    n = len(skeleton.layers)
    ws = [jnp.asarray(tensors[f"layers.{i}.weight"].astype(dtype)) for i in range(n)]
    bs = [jnp.asarray(tensors[f"layers.{i}.bias"].astype(dtype)) for i in range(n)]
    if dtype == np.float32:  # the same key and gain give the exported file's tensors
        for i, layer in enumerate(skeleton.layers):
            assert np.array_equal(np.asarray(layer.weight), tensors[f"layers.{i}.weight"])
            assert np.array_equal(np.asarray(layer.bias), tensors[f"layers.{i}.bias"])
    mlp = eqx.tree_at(lambda m: [l.weight for l in m.layers] + [l.bias for l in m.layers],
                      skeleton, ws + bs)

    class ScaledField(eqx.Module):
        out_scale: jax.Array
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.out_scale * self.mlp(y)

    return ScaledField(jnp.asarray(tensors["out_scale"].astype(dtype)), mlp)


def forms_inputs() -> dict:
    """The initial states and save times of the forms cases, every one a float32 number."""
    import numpy as np
    rng = np.random.default_rng(FORMS_SEED)
    node_y0 = as_f32(rng.uniform(-0.6, 1.0, (NODE_BATCH, 2)))
    node_ts = as_f32(np.linspace(*NODE_TS))
    latent_y0 = as_f32(rng.normal(0.0, 1.0, (LATENT_BATCH, FORMS_MODELS["latent16"]["state"])))
    rows = []
    for _ in range(LATENT_BATCH):
        t1 = 2.0 + rng.uniform()
        row = as_f32(np.sort(rng.uniform(0.0, 1.0, LATENT_POINTS) * t1))
        assert np.all(np.diff(row) > 0), "the save times of a sample must be distinct"
        rows.append(row)
    const_y0 = as_f32(rng.normal(0.0, 1.0, (5, FORMS_MODELS["latent16"]["state"])))
    return {"node_y0": node_y0, "node_ts": node_ts, "latent_y0": latent_y0,
            "latent_ts": np.stack(rows), "const_y0": const_y0}


def forms_solve_fn(field, method: str, controller: str, rtol, atol, save: str):
    """(y0, t0, t1, dt0, save_ts) -> raw diffeqsolve outputs of f = field."""
    import diffrax

    solver = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "bosh3": diffrax.Bosh3,
              "heun": diffrax.Heun, "dopri8": diffrax.Dopri8}[method]()
    term = diffrax.ODETerm(field)
    if controller == "pid":
        ctrl = diffrax.PIDController(rtol=rtol, atol=atol)
    else:
        ctrl = diffrax.ConstantStepSize()

    def solve(y0, t0, t1, dt0, save_ts):
        saveat = {"ts": lambda: diffrax.SaveAt(ts=save_ts),
                  "steps": lambda: diffrax.SaveAt(steps=True),
                  "t1": lambda: diffrax.SaveAt(t1=True)}[save]()
        sol = diffrax.diffeqsolve(term, solver, t0, t1, dt0, y0, saveat=saveat,
                                  stepsize_controller=ctrl, max_steps=FORMS_MAX_STEPS,
                                  throw=False)
        return (sol.ts, sol.ys, sol.result._value, sol.stats["num_steps"],
                sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"])
    return solve


def forms_case_list(inputs: dict) -> list[dict]:
    """Every case of the forms files, before solving: what diffrax is given."""
    import numpy as np
    cases = []
    node_ts = inputs["node_ts"]
    for model in ("node2x64s", "node2x64v"):
        for rtol, atol in NODE_TOLERANCES:
            for save in ("ts", "steps"):
                b = NODE_BATCH
                cases.append({"form": "neural_ode", "model": model, "method": "tsit5",
                              "controller": "pid", "rtol": rtol, "atol": atol,
                              "direction": "forward", "save": save, "ts_per_trajectory": False,
                              "vmap": "y0", "t0s": [node_ts[0]] * b, "t1s": [node_ts[-1]] * b,
                              "dt0s": [node_ts[1] - node_ts[0]] * b, "y0": inputs["node_y0"],
                              "save_ts": node_ts if save == "ts" else None})
    rows = inputs["latent_ts"]
    for direction in ("forward", "backward"):
        r = rows if direction == "forward" else rows[:, ::-1].copy()
        sign = 1.0 if direction == "forward" else -1.0
        base = {"model": "latent16", "direction": direction, "save": "ts",
                "ts_per_trajectory": True, "vmap": "y0, t0, t1, save_ts",
                "t0s": r[:, 0], "t1s": r[:, -1], "y0": inputs["latent_y0"], "save_ts": r}
        for method in FORMS_METHODS:
            cases.append({"form": "latent_decoder", "method": method, "controller": "constant",
                          "rtol": None, "atol": None, **base,
                          "dt0s": as_f32([sign * LATENT_DT0] * LATENT_BATCH)})
        for method in ROWS_METHODS:
            for rtol, atol in ROWS_TOLERANCES:
                cases.append({"form": "pid_rows", "method": method, "controller": "pid",
                              "rtol": rtol, "atol": atol, **base,
                              "dt0s": as_f32([sign * LATENT_DT0] * LATENT_BATCH)})
    for direction, span in CONST_SPANS.items():
        for method in FORMS_METHODS:
            for save in ("t1", "ts", "steps"):
                cases.append({"form": "constant_vmap", "model": "latent16", "method": method,
                              "controller": "constant", "rtol": None, "atol": None,
                              "direction": direction, "save": save, "ts_per_trajectory": False,
                              "vmap": "y0, t0, t1, dt0", "t0s": as_f32(span["t0"]),
                              "t1s": as_f32(span["t1"]), "dt0s": as_f32(span["dt0"]),
                              "y0": inputs["const_y0"],
                              "save_ts": as_f32(CONST_TS[direction]) if save == "ts" else None})
    for case in cases:
        for key in ("t0s", "t1s", "dt0s", "y0"):
            case[key] = np.asarray(case[key], np.float64)
    return cases


def solve_forms_case(case: dict, fields: dict, dtype, names: dict) -> list[dict]:
    """One jax.vmap(diffeqsolve) of a case, in the in_axes of its "vmap" entry."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    fn = forms_solve_fn(fields[case["model"]], case["method"], case["controller"], case["rtol"],
                        case["atol"], case["save"])
    shared = case["vmap"] == "y0"  # the neural ODE example: one interval, vmap over y0 only
    axes = (0, None, None, None, None) if shared else (0, 0, 0, 0, 0 if
                                                        case["ts_per_trajectory"] else None)
    save_ts = case["save_ts"] if case["save_ts"] is not None else np.zeros(1)
    args = [case["y0"], case["t0s"][0] if shared else case["t0s"],
            case["t1s"][0] if shared else case["t1s"],
            case["dt0s"][0] if shared else case["dt0s"], save_ts]
    args = [jnp.asarray(np.asarray(a, np.float64).astype(dtype)) for a in args]
    outs = [np.asarray(o) for o in jax.jit(jax.vmap(fn, in_axes=axes))(*args)]
    ts, ys, res, nsteps, nacc, nrej = outs
    trajs = []
    for b in range(len(case["y0"])):
        traj = {"result": names[int(res[b])], "num_steps": int(nsteps[b]),
                "num_accepted": int(nacc[b]), "num_rejected": int(nrej[b])}
        tb, yb = ts[b], ys[b]
        if case["save"] == "steps":
            n = traj["num_accepted"]
            assert np.all(np.isfinite(tb[:n])) and np.all(np.isinf(tb[n:])), "unexpected padding"
            keep = list(range(n))
        else:
            keep = [i for i in range(len(tb)) if np.isfinite(tb[i])]
        traj["ts"] = [num(v) for v in tb[keep]]
        traj["ys"] = [[num(v) for v in yb[i]] for i in keep]
        trajs.append(traj)
    return trajs


def encode_forms_case(case: dict, trajs: list[dict]) -> dict:
    """The JSON form of a case: what diffrax was given (exact numbers), then what it returned."""
    import numpy as np

    def nums(a):
        a = np.asarray(a)
        return [nums(r) for r in a] if a.ndim > 1 else [num(v) for v in a]

    out = {k: case[k] for k in ("form", "model", "method", "controller")}
    if case["controller"] == "pid":
        out["rtol"], out["atol"] = case["rtol"], case["atol"]
    out.update({k: case[k] for k in ("direction", "save", "ts_per_trajectory", "vmap")})
    out["max_steps"] = FORMS_MAX_STEPS
    for key in ("t0s", "t1s", "dt0s", "y0"):
        out[key] = nums(case[key])
    if case["save_ts"] is not None:
        out["save_ts"] = nums(case["save_ts"])
    out["trajectories"] = trajs
    return out


def forms_worker(precision: str) -> None:
    """Solve the forms cases in one precision and write forms-<precision>.json."""
    import jax
    jax.config.update("jax_enable_x64", precision == "fp64")
    jax.config.update("jax_default_matmul_precision", "highest")
    import numpy as np

    dtype = np.float64 if precision == "fp64" else np.float32
    names = result_names()
    fields = {name: load_forms_field(spec, dtype) for name, spec in FORMS_MODELS.items()}
    started = time.time()
    cases = []
    for case in forms_case_list(forms_inputs()):
        trajs = solve_forms_case(case, fields, dtype, names)
        cases.append(encode_forms_case(case, trajs))
        tol = f" rtol={case['rtol']:g}" if case["controller"] == "pid" else ""
        print(f"[{precision}] forms {case['form']:14s} {case['model']:9s} {case['method']:6s} "
              f"{case['direction']:8s} save={case['save']:5s}{tol} "
              f"num_steps={[t['num_steps'] for t in trajs]} ({time.time() - started:.0f}s)",
              flush=True)
    notes = {
        "vector_field": "f(t, y, args) = out_scale * mlp(y) (one multiplication after the final "
                        "tanh), mlp and out_scale the float32 tensors of the case's model file" +
                        (", widened exactly to float64" if precision == "fp64" else ""),
        "forms": {
            "neural_ode": "diffrax's neural ODE example: Tsit5, PIDController(rtol, atol), "
                          "t0 = ts[0], t1 = ts[-1], dt0 = ts[1] - ts[0], SaveAt(ts=ts) on "
                          "linspace(0, 10, 100) or SaveAt(steps=True); jax.vmap over y0 only",
            "latent_decoder": "the latent ODE example's decoder: ConstantStepSize, dt0 = 0.4 "
                              "(-0.4 backward), jax.vmap over (y0, ts) with diffeqsolve(term, "
                              "solver, ts[0], ts[-1], dt0, y0, saveat=SaveAt(ts=ts)): save_ts "
                              "holds one row of save times per trajectory",
            "pid_rows": "the latent_decoder rows under PIDController(rtol, atol)",
            "constant_vmap": "ConstantStepSize under jax.vmap over (y0, t0, t1, dt0), one "
                             "shared list of save times inside every interval",
        },
        "numbers": "t0s, t1s, dt0s, save_ts and y0 are float32 numbers in both files (the same "
                   "problem in fp32 and fp64); ts and ys hold every point diffrax saved (save "
                   "steps: every accepted step's end; padding left out)",
        "max_steps": "max_steps = 4096 and throw=False throughout",
        "jax_config": {"jax_enable_x64": precision == "fp64",
                       "jax_default_matmul_precision": "highest", "platform": "cpu"},
    }
    models = {name: {"file": spec["path"], "out_scale_shape": list(np.shape(spec["out_scale"])),
                     "out_scale": [num(v) for v in np.ravel(np.float32(spec["out_scale"]))]}
              for name, spec in FORMS_MODELS.items()}
    header = {"generator": GENERATOR + " --only-forms", "versions": versions(),
              "models": models, "precision": precision, "notes": notes}
    text = render_json(header, cases)
    assert json.loads(text) == {**header, "cases": cases}
    path = forms_out_json_path(precision)
    path.write_text(text)
    print(f"[{precision}] wrote {path.relative_to(REPO)} ({len(text.encode())} bytes)",
          flush=True)


# --------------------------------------------------------------------------------------------
# Gradients: jax.grad through diffrax against clnode's reverse pass (--only-grad)
# --------------------------------------------------------------------------------------------

# Small models f(t, y, args) = out_scale * mlp(input), 2 -> 16 -> 16 -> 2 with the input [y],
# [y, t], [y, c] or [y, t, c], one per activation pair: numpy.random.default_rng(seed) normal
# weights times gain / sqrt(fan_in), rounded to float32, written by clnode.MLP.save(dtype=
# "float32") (equinox's tensor names and the metadata clnode's loader reads).
GRAD_MODELS = {
    "g_tanh": {"act": "tanh", "final": "identity", "time": False, "inputs": 0, "scale": None,
               "seed": 11},
    "g_softplus": {"act": "softplus", "final": "tanh", "time": False, "inputs": 0,
                   "scale": 0.8, "seed": 12},
    "g_relu": {"act": "relu", "final": "sigmoid", "time": False, "inputs": 0,
               "scale": [-0.7, 1.3], "seed": 13},
    "g_silu_t": {"act": "silu", "final": "gelu", "time": True, "inputs": 0, "scale": None,
                 "seed": 14},
    "g_gelu_c": {"act": "gelu", "final": "softplus", "time": False, "inputs": 2,
                 "scale": [-0.9, 0.6], "seed": 15},
    "g_sigmoid_tc": {"act": "sigmoid", "final": "identity", "time": True, "inputs": 2,
                     "scale": 1.5, "seed": 16},
}
GRAD_STATE, GRAD_WIDTH, GRAD_GAIN = 2, 16, 2.0
GRAD_SEED = 20260601  # numpy.random.default_rng seed of initial states, inputs and cotangents
GRAD_MAX_STEPS = 200
GRAD_METHODS = ("tsit5", "dopri5", "dopri8", "bosh3", "heun", "euler")
GRAD_SAVES = ("t0", "ts", "steps", "t1")
GRAD_ACTS = ("identity", "relu", "tanh", "sigmoid", "softplus", "silu", "gelu")

# The matrix: (name, model, method, controller, rtol, atol, saves, batch, span, ts, max_steps).
# span: "shared" (one interval), "own" (each trajectory its own t0, t1, dt0), "back" (own,
# backwards); ts: None, "shared" (one list inside every interval) or "rows" (each trajectory
# its own row).
GRAD_CASES = (
    ("tsit5_ts", "g_tanh", "tsit5", "pid", 1e-6, 1e-9, ("ts",), 3, "shared", "shared", None),
    ("dopri5_steps", "g_softplus", "dopri5", "pid", 1e-6, 1e-9, ("steps",), 3, "own", None,
     None),
    ("dopri8_t0t1", "g_relu", "dopri8", "pid", 1e-7, 1e-10, ("t0", "t1"), 2, "shared", None,
     None),
    ("bosh3_rows", "g_silu_t", "bosh3", "pid", 1e-4, 1e-7, ("ts",), 4, "own", "rows", None),
    ("heun_t1_inputs", "g_gelu_c", "heun", "pid", 1e-3, 1e-6, ("t1",), 4, "own", None, None),
    ("euler_steps_const", "g_tanh", "euler", "constant", None, None, ("steps",), 3, "own",
     None, None),
    ("heun_ts_const", "g_sigmoid_tc", "heun", "constant", None, None, ("ts",), 3, "shared",
     "shared", None),
    ("tsit5_all", "g_sigmoid_tc", "tsit5", "pid", 1e-6, 1e-9, ("t0", "ts", "steps"), 3, "own",
     "shared", None),
    ("dopri5_back_rows", "g_silu_t", "dopri5", "pid", 1e-6, 1e-9, ("ts", "t1"), 3, "back",
     "rows", None),
    ("tsit5_back_steps_const", "g_softplus", "tsit5", "constant", None, None, ("steps",), 3,
     "back", None, None),
    ("dopri8_rows_const", "g_gelu_c", "dopri8", "constant", None, None, ("ts",), 3, "own",
     "rows", None),
    ("bosh3_max_steps", "g_softplus", "bosh3", "pid", 1e-6, 1e-9, ("steps",), 3, "own", None,
     12),
    ("euler_back_t1_const", "g_relu", "euler", "constant", None, None, ("t1",), 2, "back",
     None, None),
    ("tsit5_loose_ts", "g_relu", "tsit5", "pid", 1e-3, 1e-6, ("ts",), 4, "shared", "shared",
     None),
    ("dopri5_t0t1_const", "g_sigmoid_tc", "dopri5", "constant", None, None, ("t0", "t1"), 3,
     "own", None, None),
    ("heun_steps", "g_gelu_c", "heun", "pid", 1e-3, 1e-6, ("steps", "t0"), 4, "own", None, None),
    ("bosh3_back_t0ts", "g_tanh", "bosh3", "pid", 1e-5, 1e-8, ("t0", "ts"), 3, "back",
     "shared", None),
    ("dopri8_steps", "g_silu_t", "dopri8", "pid", 1e-8, 1e-11, ("steps",), 2, "own", None,
     None),
)
# The members of each .npz, in order (numpy.savez of float64 arrays; integers exact).
GRAD_MEMBERS = ("names", "cases", "tols", "traj", "traj_counts", "y0", "inputs", "save_ts",
                "cot", "step_ends", "dx_step_ends", "ys_stepto", "g_stepto", "g_adaptive",
                "g64_stepto")
# The columns of the member "cases" and of "traj_counts" (documented in the header notes).
GRAD_CASE_COLS = ("name", "model", "method", "constant", "save_t0", "save_ts", "save_steps",
                  "save_t1", "ts_rows", "n_ts", "batch", "slots", "max_steps", "traj_off",
                  "y0_off", "in_off", "ts_off", "cot_off", "grad_off", "grad_len",
                  "adaptive_ok")
GRAD_TRAJ_COLS = ("result", "num_steps", "num_accepted", "ends_off", "dx_num_steps",
                  "dx_num_accepted", "dx_result")


def grad_model_path(name: str) -> Path:
    return REPO / "tests" / "data" / "models" / f"grad-{name}.safetensors"


def grad_out_path(precision: str) -> Path:
    return REPO / "tests" / "data" / "diffrax" / f"grad-{precision}.npz"


def grad_model_params(name: str) -> dict:
    """The float32 parameters of a gradient model (the file's values)."""
    import numpy as np
    spec = GRAD_MODELS[name]
    rng = np.random.default_rng(spec["seed"])
    n_in = GRAD_STATE + int(spec["time"]) + spec["inputs"]
    sizes = (n_in, GRAD_WIDTH, GRAD_WIDTH, GRAD_STATE)
    ws, bs = [], []
    for i in range(3):
        w = rng.normal(0.0, 1.0, (sizes[i + 1], sizes[i])) * GRAD_GAIN / math.sqrt(sizes[i])
        ws.append(w.astype(np.float32))
        bs.append((rng.normal(0.0, 0.5, sizes[i + 1])).astype(np.float32))
    scale = None if spec["scale"] is None else np.asarray(spec["scale"], np.float32)
    return {"W": ws, "b": bs, "s": scale}


def check_grad_matrix() -> None:
    """The matrix covers what the reverse pass's tests promise: every method, every kind of saved
    point, every activation (inside or last), both controllers and directions, per-trajectory
    save times, time and conditioning inputs, both kinds of output scale, max_steps."""
    cases = GRAD_CASES
    assert {c[2] for c in cases} == set(GRAD_METHODS), "a method without a case"
    assert {s for c in cases for s in c[6]} == set(GRAD_SAVES), "a SaveAt without a case"
    used = {GRAD_MODELS[c[1]][k] for c in cases for k in ("act", "final")}
    assert used == set(GRAD_ACTS), f"activations without a case: {set(GRAD_ACTS) - used}"
    assert {c[3] for c in cases} == {"pid", "constant"}
    assert {c[8] for c in cases} == {"shared", "own", "back"}
    assert {c[9] for c in cases} == {None, "shared", "rows"}
    models = [GRAD_MODELS[c[1]] for c in cases]
    assert any(m["time"] for m in models) and any(m["inputs"] for m in models)
    assert {len(m["scale"]) if isinstance(m["scale"], list) else m["scale"] is not None
            for m in models} >= {False, True, 2}
    assert any(c[10] is not None for c in cases), "no case that stops at max_steps"
    assert all(c[3] == "constant" for c in cases if c[2] == "euler"), "euler needs constant steps"


def export_grad_models() -> None:
    """Write the gradient models with clnode's own writer, and read them back."""
    import clnode
    import numpy as np
    check_grad_matrix()
    for name, spec in GRAD_MODELS.items():
        p = grad_model_params(name)
        m = clnode.MLP([w.astype(np.float64) for w in p["W"]],
                       [b.astype(np.float64) for b in p["b"]], activation=spec["act"],
                       final_activation=spec["final"], time_input=spec["time"],
                       inputs=spec["inputs"],
                       out_scale=None if p["s"] is None else p["s"].astype(np.float64))
        path = grad_model_path(name)
        m.save(path, dtype="float32")
        back = clnode.MLP.load(path)
        for w, v in zip(p["W"], back.weights):
            assert np.array_equal(w.astype(np.float64), v)
        print(f"[make_reference] wrote {path.relative_to(REPO)} ({path.stat().st_size} bytes)",
              flush=True)


def grad_inputs(index: int, case: tuple) -> dict:
    """What a case solves: initial states, inputs, intervals, save times; float32 numbers."""
    import numpy as np
    name, model, method, controller, rtol, atol, saves, B, span, tsmode, max_steps = case
    rng = np.random.default_rng([GRAD_SEED, index])
    spec = GRAD_MODELS[model]
    y0 = as_f32(rng.uniform(-1.0, 1.0, (B, GRAD_STATE)))
    c = as_f32(rng.uniform(-1.0, 1.0, (B, spec["inputs"])))
    if span == "shared":
        t0s, t1s = np.zeros(B), np.full(B, 1.5)
    else:
        t0s = rng.uniform(-0.3, 0.3, B)
        t1s = t0s + rng.uniform(0.8, 1.8, B)
        if max_steps is not None:
            t1s = t0s + np.linspace(0.6, 3.0, B)  # the last one stops at max_steps
    dt0s = rng.uniform(0.08, 0.2, B) if controller == "constant" else np.full(B, 0.05)
    if span == "back":
        t0s, t1s = t1s, t0s
        dt0s = -dt0s
    t0s, t1s, dt0s = as_f32(t0s), as_f32(t1s), as_f32(dt0s)
    ts = None
    if tsmode == "shared":  # inside every interval
        lo, hi = np.max(np.minimum(t0s, t1s)), np.min(np.maximum(t0s, t1s))
        ts = as_f32(np.linspace(lo, hi, 7)[1:-1] + np.array([0, 0.01, 0, -0.02, 0]))
        if span == "back":
            ts = ts[::-1].copy()
    elif tsmode == "rows":
        rows = []
        for b in range(B):
            lo, hi = sorted((t0s[b], t1s[b]))
            row = as_f32(np.sort(rng.uniform(lo, hi, 6)))
            assert np.all(np.diff(row) > 0) and row[0] > lo and row[-1] < hi
            rows.append(row if span != "back" else row[::-1].copy())
        ts = np.stack(rows)
    return {"y0": y0, "c": c, "t0s": t0s, "t1s": t1s, "dt0s": dt0s, "ts": ts,
            "max_steps": GRAD_MAX_STEPS if max_steps is None else max_steps}


def grad_clnode_solve(case: tuple, inp: dict, precision: str, steps_only: bool):
    """clnode's forward solve of a case (the installed clnode Python package)."""
    import clnode
    import numpy as np
    name, model, method, controller, rtol, atol, saves, B, span, tsmode, _ = case
    m = clnode.MLP.load(grad_model_path(model))
    if steps_only:
        saveat = clnode.SaveAt(steps=True)
    else:
        saveat = clnode.SaveAt(t0="t0" in saves, t1="t1" in saves, steps="steps" in saves,
                               ts=inp["ts"] if "ts" in saves else None)
    opts = {"method": method, "precision": precision, "max_steps": inp["max_steps"],
            "precision_guard": "off", "constant_step": controller == "constant"}
    if controller == "pid":
        opts.update(rtol=rtol, atol=atol)
    sol = clnode.solve(m, inp["y0"], t0=inp["t0s"], t1=inp["t1s"], dt0=inp["dt0s"],
                       args=inp["c"] if inp["c"].shape[1] else None, saveat=saveat, **opts)
    return sol, np.asarray(sol.ts, np.float64), np.asarray(sol.ys, np.float64)


def grad_act(name: str):
    import jax
    return {"identity": lambda x: x, "relu": jax.nn.relu, "tanh": jax.nn.tanh,
            "sigmoid": jax.nn.sigmoid, "softplus": jax.nn.softplus, "silu": jax.nn.silu,
            "gelu": jax.nn.gelu}[name]


def grad_fn(case: tuple, inp: dict, controller: str):
    """A jitted (y0s, cs, params, cot, t0s, t1s, dt0s, ts, steps) -> (grads, (ts, ys, stats)):
    jax.grad of L = sum(cot * ys) (over the finite saved points) w.r.t. (y0s, cs, params)
    through jax.vmap(diffrax.diffeqsolve); controller "stepto" (StepTo at the given step ends,
    padded with t1), or the case's own ("pid", "constant"). The times are arguments that are not
    differentiated."""
    import diffrax
    import jax
    import jax.numpy as jnp

    name, model, method, _, rtol, atol, saves, B, span, tsmode, _ = case
    spec = GRAD_MODELS[model]
    act, fin = grad_act(spec["act"]), grad_act(spec["final"])
    solver = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "bosh3": diffrax.Bosh3,
              "heun": diffrax.Heun, "dopri8": diffrax.Dopri8, "euler": diffrax.Euler}[method]()

    class PaddedStepTo(diffrax.AbstractStepSizeController):
        """diffrax.StepTo's steps (its init and adapt_step_size, called as StepTo's), with a list
        that may end in repeats of t1, never reached, so that trajectories of different step
        counts share one jax.vmap. Not a StepTo: diffeqsolve then stops at t1 (tprev < t1), not
        after len(ts) - 1 steps (its shortcut for StepTo)."""

        ts: jax.Array

        def wrap(self, direction):
            return type(self)(ts=self.ts * direction)

        def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
            return diffrax.StepTo.init(self, terms, t0, t1, y0, dt0, args, func, error_order)

        def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order,
                            controller_state):
            return diffrax.StepTo.adapt_step_size(self, t0, t1, y0, y1_candidate, args,
                                                  y_error, error_order, controller_state)

    def field(t, y, args):
        c, p = args
        parts = [y] + ([jnp.asarray(t, y.dtype)[None]] if spec["time"] else []) + [c]
        x = jnp.concatenate(parts)
        for i in range(3):
            x = p["W"][i] @ x + p["b"][i]
            x = act(x) if i < 2 else fin(x)
        return p["s"] * x if "s" in p else x

    term = diffrax.ODETerm(field)

    def one(y0, c, params, t0, t1, dt0, ts, steps):
        if controller == "stepto":
            ctrl, dt = PaddedStepTo(ts=steps), None
        elif controller == "pid":
            ctrl, dt = diffrax.PIDController(rtol=rtol, atol=atol), dt0
        else:
            ctrl, dt = diffrax.ConstantStepSize(), dt0
        saveat = diffrax.SaveAt(t0="t0" in saves, ts=ts if "ts" in saves else None,
                                steps="steps" in saves,
                                t1="t1" in saves and "steps" not in saves)
        sol = diffrax.diffeqsolve(term, solver, t0, t1, dt, y0, args=(c, params), saveat=saveat,
                                  stepsize_controller=ctrl, max_steps=inp["max_steps"],
                                  throw=False)
        return sol.ts, sol.ys, (sol.stats["num_steps"], sol.stats["num_accepted_steps"],
                                sol.result._value)

    ts_axis = 0 if tsmode == "rows" else None
    batched = jax.vmap(one, in_axes=(0, 0, None, 0, 0, 0, ts_axis, 0))

    def loss(y0s, cs, params, cot, t0s, t1s, dt0s, ts, steps):
        ts_out, ys, stats = batched(y0s, cs, params, t0s, t1s, dt0s, ts, steps)
        keep = jnp.isfinite(ts_out)[:, :, None]
        return jnp.sum(jnp.where(keep, ys, 0.0) * cot), (ts_out, ys, stats)

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))


def grad_merge(ts_row, saves: tuple, n_ts: int, direction: float) -> list:
    """Positions of diffrax's finite saved points in clnode's order: t0, then the save times and
    the step ends merged in time (a save time first on a tie), then t1."""
    import numpy as np
    fin = np.isfinite(ts_row)
    pos, k = [], 0
    if "t0" in saves:
        pos.append(0)
        k = 1
    dense = [k + i for i in range(n_ts) if fin[k + i]] if "ts" in saves else []
    k += n_ts if "ts" in saves else 0
    steps = []
    if "steps" in saves:
        steps = [i for i in range(k, len(ts_row)) if fin[i]]
    merged, i, j = [], 0, 0
    while i < len(dense) or j < len(steps):
        if j == len(steps) or (i < len(dense) and
                               direction * ts_row[dense[i]] <= direction * ts_row[steps[j]]):
            merged.append(("ts", dense[i]))
            i += 1
        else:
            merged.append(("steps", steps[j]))
            j += 1
    out = [("t0", p) for p in pos] + merged
    if "t1" in saves and "steps" not in saves:
        out.append(("t1", len(ts_row) - 1))
    return out


def grad_flat(g) -> "list":
    """(dy0, dc, dparams) as one float64 vector: y0 (B x N), inputs (B x k), then W0, b0, W1, b1,
    W2, b2 and the output scale (clnode_gradient_params' order)."""
    import numpy as np
    gy, gc, gp = g
    parts = [np.ravel(gy), np.ravel(gc)]
    for w, b in zip(gp["W"], gp["b"]):
        parts += [np.ravel(w), np.ravel(b)]
    if "s" in gp:
        parts.append(np.ravel(gp["s"]))
    return np.concatenate([np.asarray(p, np.float64) for p in parts])


def grad_diffrax_layout(case: tuple, inp: dict) -> int:
    """The number of slots of diffrax's saved arrays for the case."""
    saves, n_ts = case[6], 0 if inp["ts"] is None else inp["ts"].shape[-1]
    return (int("t0" in saves) + (n_ts if "ts" in saves else 0) +
            (inp["max_steps"] if "steps" in saves else 0) +
            int("t1" in saves and "steps" not in saves))


def grad_run_diffrax(case, inp, fn, dtype, ends, t1s, cot, npts, ref_ts):
    """Solves through fn twice (forward, then the gradient of L): the mapping of clnode's saved
    points (cot: B x slots x N, points npts[b]) onto diffrax's output, checked against clnode's
    saved times ref_ts when given. Returns (flat gradient or None when the points differ,
    diffrax's saved values in clnode's layout, stats, kinds)."""
    import jax.numpy as jnp
    import numpy as np
    B, N = len(inp["y0"]), GRAD_STATE
    td = grad_diffrax_layout(case, inp)
    steps = np.empty((B, inp["max_steps"] + 1))
    for b in range(B):
        e = np.concatenate([[inp["t0s"][b]], ends[b]])
        steps[b] = np.concatenate([e, np.full(inp["max_steps"] + 1 - len(e), e[-1])])
    p = grad_model_params(case[1])
    params = {"W": [jnp.asarray(w.astype(dtype)) for w in p["W"]],
              "b": [jnp.asarray(b.astype(dtype)) for b in p["b"]]}
    if p["s"] is not None:
        params["s"] = jnp.asarray(p["s"].astype(dtype))
    ts = inp["ts"] if inp["ts"] is not None else np.zeros(1)
    args = [jnp.asarray(np.asarray(a, np.float64).astype(dtype)) for a in
            (inp["t0s"], t1s, inp["dt0s"], ts, steps)]
    y0, c = jnp.asarray(inp["y0"].astype(dtype)), jnp.asarray(inp["c"].astype(dtype))
    _, (dts, dys, stats) = fn(y0, c, params, jnp.zeros((B, td, N), dtype), *args)
    dts, dys = np.asarray(dts, np.float64), np.asarray(dys, np.float64)
    n_ts = 0 if inp["ts"] is None else inp["ts"].shape[-1]
    direction = 1.0 if inp["t1s"][0] > inp["t0s"][0] else -1.0
    cot_dx = np.zeros((B, td, N))
    ys = np.zeros(cot.shape)
    kinds, ok = [], True
    for b in range(B):
        merged = grad_merge(dts[b], case[6], n_ts, direction)
        kinds.append([k for k, _ in merged])
        if len(merged) != npts[b]:
            ok = False
            continue
        pos = [q for _, q in merged]
        if ref_ts is not None:
            assert np.array_equal(dts[b][pos], ref_ts[b][:npts[b]]), \
                f"{case[0]}: diffrax's saved times are not clnode's (trajectory {b})"
        cot_dx[b, pos] = cot[b, :npts[b]]
        ys[b, :npts[b]] = dys[b, pos]
    stats = [np.asarray(s) for s in stats]
    if not ok:
        return None, ys, stats, kinds
    g, _ = fn(y0, c, params, jnp.asarray(cot_dx.astype(dtype)), *args)
    return grad_flat(g), ys, stats, kinds


def grad_clnode_case(index: int, case: tuple, precision: str) -> dict:
    """clnode's forward of a case in one precision: its saved times, step ends, counts and the
    case's random cotangent (zero at padding)."""
    import numpy as np
    inp = grad_inputs(index, case)
    sol, cts, _ = grad_clnode_solve(case, inp, precision, False)
    ssol, sts, _ = grad_clnode_solve(case, inp, precision, True)
    B = case[7]
    nacc = np.asarray(ssol.stats["num_accepted_steps"])
    results = [str(r) for r in np.atleast_1d(ssol.result)]
    ends, t1s = [], np.array(inp["t1s"], np.float64)
    for b in range(B):
        ends.append(sts[b, :nacc[b]].copy())
        assert nacc[b] > 0 and np.all(np.isfinite(ends[b]))
        if results[b] == "success":
            assert ends[b][-1] == inp["t1s"][b], f"{case[0]}: the last step does not end at t1"
        t1s[b] = ends[b][-1]
    npts = [int(np.sum(np.isfinite(cts[b]))) for b in range(B)]
    slots = max(npts)
    rng = np.random.default_rng([GRAD_SEED, index, 64 if precision == "fp64" else 32])
    cot = rng.normal(0.0, 1.0, (B, slots, GRAD_STATE))
    for b in range(B):
        cot[b, npts[b]:] = 0.0
    return {"inp": inp, "cts": cts, "ends": ends, "t1s": t1s, "npts": npts, "slots": slots,
            "cot": cot, "results": results,
            "num_steps": np.asarray(ssol.stats["num_steps"]), "num_accepted": nacc}


def grad_stepto(case, cl, dtype, fn=None):
    """jax.grad through StepTo at clnode's step ends (cl from grad_clnode_case)."""
    fn = fn or grad_fn(case, cl["inp"], "stepto")
    g, ys, _, kinds = grad_run_diffrax(case, cl["inp"], fn, dtype, cl["ends"], cl["t1s"],
                                       cl["cot"], cl["npts"], cl["cts"])
    assert g is not None, f"{case[0]}: StepTo did not save clnode's points"
    return g, ys, kinds, fn


def grad_adaptive_ends(case: tuple, cl: dict) -> list:
    """diffrax's own accepted step ends (float64, the case's controller, SaveAt(steps=True)) of
    each trajectory where it takes clnode's number of accepted steps; NaN (as many) where not."""
    import jax.numpy as jnp
    import numpy as np
    steps_case = case[:6] + (("steps",),) + case[7:]
    inp, B = cl["inp"], case[7]
    fn = grad_fn(steps_case, inp, case[3])
    p = grad_model_params(case[1])
    params = {"W": [jnp.asarray(w.astype(np.float64)) for w in p["W"]],
              "b": [jnp.asarray(b.astype(np.float64)) for b in p["b"]]}
    if p["s"] is not None:
        params["s"] = jnp.asarray(p["s"].astype(np.float64))
    ts = inp["ts"] if inp["ts"] is not None else np.zeros(1)
    _, (dts, _, _) = fn(jnp.asarray(inp["y0"]), jnp.asarray(inp["c"]), params,
                        jnp.zeros((B, grad_diffrax_layout(steps_case, inp), GRAD_STATE)),
                        jnp.asarray(inp["t0s"]), jnp.asarray(inp["t1s"]),
                        jnp.asarray(inp["dt0s"]), jnp.asarray(ts),
                        jnp.zeros((B, inp["max_steps"] + 1)))
    out = []
    for b in range(B):
        row = np.asarray(dts[b], np.float64)
        row = row[np.isfinite(row)]
        n = len(cl["ends"][b])
        out.append(row if len(row) == n else np.full(n, np.nan))
    return out


def grad_worker32(tmp: Path) -> None:
    """float32: clnode's forward and diffrax float32's StepTo gradient, for grad_worker64."""
    import jax
    jax.config.update("jax_enable_x64", False)
    jax.config.update("jax_default_matmul_precision", "highest")
    import numpy as np
    out = {}
    for i, case in enumerate(GRAD_CASES):
        cl = grad_clnode_case(i, case, "fp32")
        g, ys, _, _ = grad_stepto(case, cl, np.float32)
        out[i] = {"cl": cl, "g32": g, "ys": ys}
        print(f"[fp32] grad {case[0]:24s} accepted={list(cl['num_accepted'])}", flush=True)
    import pickle
    tmp.write_bytes(pickle.dumps(out))


def grad_worker64(tmp: Path) -> None:
    """float64: clnode's forward, StepTo and adaptive gradients; the float64 StepTo gradient at
    clnode float32's step ends; writes both .npz files."""
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_default_matmul_precision", "highest")
    import pickle
    import numpy as np
    names = result_names()
    f32 = pickle.loads(tmp.read_bytes())
    packs = {"fp64": GradPack(), "fp32": GradPack()}
    started = time.time()
    for i, case in enumerate(GRAD_CASES):
        cl = grad_clnode_case(i, case, "fp64")
        g, ys, kinds, fn = grad_stepto(case, cl, np.float64)
        fa = grad_fn(case, cl["inp"], case[3])
        # diffrax's own steps: the step ends are its own (a dummy list for the controller)
        ga, _, st, kinds_a = grad_run_diffrax(case, cl["inp"], fa, np.float64, cl["ends"],
                                              np.asarray(cl["inp"]["t1s"], np.float64),
                                              cl["cot"], cl["npts"], None)
        dx = {"num_steps": st[0], "num_accepted": st[1],
              "result": [names[int(r)] for r in st[2]]}
        same = (np.array_equal(dx["num_steps"], cl["num_steps"]) and
                np.array_equal(dx["num_accepted"], cl["num_accepted"]))
        if ga is None or kinds_a != kinds:
            ga = np.full(g.shape, np.nan)
        dx["ends"] = grad_adaptive_ends(case, cl)
        packs["fp64"].add(case, cl, g, ys, ga=ga, dx=dx,
                          adaptive_ok=same and not np.isnan(ga[0]))
        c32 = f32[i]
        g64, _, _, _ = grad_stepto(case, c32["cl"], np.float64, fn)
        packs["fp32"].add(case, c32["cl"], c32["g32"], c32["ys"], g64=g64)
        print(f"[fp64] grad {case[0]:24s} accepted clnode={list(cl['num_accepted'])} "
              f"diffrax={list(dx['num_accepted'])} ({time.time() - started:.0f}s)", flush=True)
    for precision, pack in packs.items():
        path = grad_out_path(precision)
        pack.write(path)
        print(f"[{precision}] wrote {path.relative_to(REPO)} ({path.stat().st_size} bytes)",
              flush=True)


class GradPack:
    """The members of one gradient .npz, case after case (GRAD_MEMBERS, GRAD_CASE_COLS)."""

    def __init__(self):
        self.names: list = []
        self.rows: dict = {k: [] for k in GRAD_MEMBERS if k != "names"}

    def name(self, s: str) -> int:
        if s not in self.names:
            self.names.append(s)
        return self.names.index(s)

    def size(self, key: str) -> int:
        return sum(len(a) for a in self.rows[key])

    def add(self, case, cl, g, ys, ga=None, dx=None, adaptive_ok=False, g64=None):
        import numpy as np
        inp, B = cl["inp"], case[7]
        saves = case[6]
        n_ts = 0 if inp["ts"] is None else inp["ts"].shape[-1]
        row = {"name": self.name(case[0]), "model": self.name(str(
            grad_model_path(case[1]).relative_to(REPO))), "method": self.name(case[2]),
            "constant": case[3] == "constant", "save_t0": "t0" in saves,
            "save_ts": "ts" in saves, "save_steps": "steps" in saves, "save_t1": "t1" in saves,
            "ts_rows": case[9] == "rows", "n_ts": n_ts, "batch": B, "slots": cl["slots"],
            "max_steps": inp["max_steps"], "traj_off": len(self.rows["traj"]),
            "y0_off": self.size("y0"), "in_off": self.size("inputs"),
            "ts_off": self.size("save_ts"), "cot_off": self.size("cot"),
            "grad_off": self.size("g_stepto"), "grad_len": len(g), "adaptive_ok": adaptive_ok}
        self.rows["cases"].append([float(row[k]) for k in GRAD_CASE_COLS])
        self.rows["tols"].append([case[4] or 0.0, case[5] or 0.0])
        for b in range(B):
            self.rows["traj"].append([inp["t0s"][b], inp["t1s"][b], inp["dt0s"][b]])
            self.rows["traj_counts"].append([
                self.name(cl["results"][b]), cl["num_steps"][b], cl["num_accepted"][b],
                self.size("step_ends"), dx["num_steps"][b] if dx else -1,
                dx["num_accepted"][b] if dx else -1,
                self.name(dx["result"][b]) if dx else -1])
            self.rows["step_ends"].append(cl["ends"][b])
            if dx:
                self.rows["dx_step_ends"].append(dx["ends"][b])
        self.rows["y0"].append(np.ravel(inp["y0"]))
        self.rows["inputs"].append(np.ravel(inp["c"]))
        self.rows["save_ts"].append(np.ravel(inp["ts"]) if "ts" in saves else np.zeros(0))
        self.rows["cot"].append(np.ravel(cl["cot"]))
        self.rows["ys_stepto"].append(np.ravel(ys))
        self.rows["g_stepto"].append(g)
        if ga is not None:
            self.rows["g_adaptive"].append(ga)
        if g64 is not None:
            self.rows["g64_stepto"].append(g64)

    def write(self, path: Path) -> None:
        import numpy as np
        width = max(len(s) for s in self.names) + 1
        members = {"names": np.array([[float(ord(ch)) for ch in s.ljust(width, "\0")]
                                      for s in self.names])}
        for key in GRAD_MEMBERS[1:]:
            parts = self.rows[key]
            if not parts:  # g_adaptive, dx_step_ends in fp64 only, g64_stepto in fp32 only
                continue
            if key in ("cases", "tols", "traj", "traj_counts"):
                members[key] = np.asarray(parts, np.float64)
            else:
                members[key] = np.concatenate([np.asarray(p, np.float64) for p in parts])
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            np.savez(fh, **members)


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
    parser.add_argument("--only-forms", action="store_true",
                        help="write only the scaled models and forms-*.json files")
    parser.add_argument("--only-grad", action="store_true",
                        help="write only the gradient models and grad-*.npz files (needs the "
                             "clnode Python package)")
    parser.add_argument("--only-jvp", action="store_true",
                        help="write only tests/data/diffrax/jvp-fp64.npz (forward mode; needs "
                             "the clnode Python package)")
    parser.add_argument("--grad-worker", choices=PRECISIONS, help=argparse.SUPPRESS)
    parser.add_argument("--grad-tmp", help=argparse.SUPPRESS)
    parser.add_argument("--only-dt0", action="store_true",
                        help="only the peers' first steps (torch: CLNODE_TORCH_PYTHON)")
    parser.add_argument("--no-venv", action="store_true",
                        help="use the current interpreter as it is (packages already installed)")
    parser.add_argument("--worker", choices=PRECISIONS, help=argparse.SUPPRESS)
    parser.add_argument("--ensemble-worker", choices=PRECISIONS + ("spread",),
                        help=argparse.SUPPRESS)
    parser.add_argument("--forms-worker", choices=PRECISIONS, help=argparse.SUPPRESS)
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
    if args.forms_worker:
        forms_worker(args.forms_worker)
        return 0
    if args.grad_worker:
        (grad_worker32 if args.grad_worker == "fp32" else grad_worker64)(Path(args.grad_tmp))
        return 0
    if args.ensemble_worker == "spread":
        ens_spread_worker()
        return 0
    if args.ensemble_worker:
        ens_worker(args.ensemble_worker)
        return 0

    if args.only_dt0:
        torch_python = os.environ.get("CLNODE_TORCH_PYTHON")
        if not torch_python:
            sys.exit("make_reference.py --only-dt0: set CLNODE_TORCH_PYTHON to a Python with "
                     "torch, torchode and torchdiffeq")
        return subprocess.run([torch_python, str(Path(__file__).resolve().parent /
                                                 "reference_dt0.py")]).returncode
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
    if args.only_jvp:
        jax.config.update("jax_enable_x64", True)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import reference_jvp
        path = REPO / "tests" / "data" / "diffrax" / "jvp-fp64.npz"
        reference_jvp.write(path)
        print(f"[fp64] wrote {path.relative_to(REPO)} ({path.stat().st_size} bytes)\n"
              f"wall time: {time.time() - started:.1f} s")
        return 0
    if args.only_grad:
        import tempfile
        export_grad_models()
        with tempfile.TemporaryDirectory() as tmp:
            # float32 first: the float64 worker takes the float64 StepTo gradient at its steps
            for precision in ("fp32", "fp64"):
                subprocess.run([sys.executable, str(Path(__file__).resolve()), "--grad-worker",
                                precision, "--grad-tmp", str(Path(tmp) / "fp32.pickle")],
                               check=True)
        print(f"\nwall time: {time.time() - started:.1f} s")
        return 0
    if args.only_forms:
        export_forms_models()
        for precision in PRECISIONS:
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--forms-worker",
                            precision], check=True)
        print(f"\nwall time: {time.time() - started:.1f} s")
        return 0
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
