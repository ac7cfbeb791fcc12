#!/usr/bin/env python3
"""The peers' automatic first steps (tests/data/peers/dt0-fp64.json), for clnode's dt0_auto.

Run by ``scripts/make_reference.py --only-dt0`` with the interpreter named by the environment
variable ``CLNODE_TORCH_PYTHON``, or directly with any Python that has torch, torchode 1.0.1 and
torchdiffeq 0.2.5 (PyPI's torch is the CUDA build; it runs on the CPU). Deterministic output.

What it records, in float64, for two small tanh MLPs written into the file (numpy-seeded
weights; one takes [y] and one [y, t]), each field ``s * MLP(.)``:

* per case: method (tsit5, dopri5, bosh3, heun, dopri8: only the order p enters), (rtol, atol),
  the scale of y0 (0: zero y0, 1, 100), the field's scale s (1e-3, 1, 1e3), forwards [0, 2] or
  backwards [1, -1], three initial states (seeded rows times the y0 scale);
* ``torchode``: each trajectory's |dt0| from torchode's own
  ``IntegralController._select_initial_step`` on the batch (per sample, convergence order p,
  ``dt_max = |t1 - t0|``), as ``AutoDiffAdjoint.solve`` calls it with ``dt0=None``, with
  torch's default dtype float64 (torchode keeps atol and rtol as buffers of the default dtype:
  float32 ones, 1e-3 rounded to float32, move its steps by about 1e-8 relative);
* ``torchdiffeq``: each trajectory alone, torchdiffeq's ``_select_initial_step`` with ``order -
  1`` and its RMS norm, as its RK solvers call it; backwards, on the reversed field -f(-t, y)
  from -t0, as ``odeint`` integrates decreasing times;
* ``capped``: whether torchode's cap of h0 at |t1 - t0| (which torchdiffeq does not apply)
  changed h0 for that trajectory: there the two peers differ, and clnode follows torchode;
* ``kappa``: the condition of the step on the rounding of the field's values, |f0| / |f1 - f0|
  where d2 sets the step (else 0): with h0 = 1e-6 (zero y0) f1 - f0 cancels, and the peers
  themselves then differ by up to about 1e-11 (a batch's GEMM rounds apart from a row's).
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torchdiffeq
import torchode
from torchdiffeq._impl.misc import _rms_norm, _select_initial_step as tdq_select

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "peers" / "dt0-fp64.json"
ORDERS = {"tsit5": 5, "dopri5": 5, "bosh3": 3, "heun": 2, "dopri8": 8}
TOLS = [(1e-3, 1e-6), (1e-6, 1e-9)]
Y_SCALES = [0.0, 1.0, 100.0]
F_SCALES = [1e-3, 1.0, 1e3]
INTERVALS = [(0.0, 2.0), (1.0, -1.0)]
N = 4


def make_model(seed, time_input):
    rng = np.random.RandomState(seed)
    sizes = [N + (1 if time_input else 0), 16, 16, N]
    ws = [rng.normal(size=(sizes[i + 1], sizes[i])) * 2.0 / np.sqrt(sizes[i])
          for i in range(3)]
    bs = [rng.normal(size=sizes[i + 1]) * 0.5 for i in range(3)]
    return {"sizes": sizes, "time_input": time_input, "activation": "tanh",
            "final_activation": "identity", "weights": [w.tolist() for w in ws],
            "biases": [b.tolist() for b in bs]}


def field(model, scale):
    ws = [torch.tensor(w, dtype=torch.float64) for w in model["weights"]]
    bs = [torch.tensor(b, dtype=torch.float64) for b in model["biases"]]

    def f(t, y):
        x = y
        if model["time_input"]:
            tt = t.reshape(-1, 1).expand(y.shape[0], 1) if t.dim() else t.expand(y.shape[0], 1)
            x = torch.cat([y, tt.to(y.dtype)], dim=1)
        for i in range(3):
            x = x @ ws[i].T + bs[i]
            if i < 2:
                x = torch.tanh(x)
        return scale * x
    return f


def torchode_steps(f, y0, t0, t1, rtol, atol, order):
    B = y0.shape[0]
    term = torchode.ODETerm(f)
    # torchode keeps atol and rtol as buffers of the default dtype: float64 here (main)
    ctrl = torchode.IntegralController(atol=atol, rtol=rtol, term=term)
    assert ctrl.atol.dtype == torch.float64
    ts = torch.full((B,), t0, dtype=torch.float64)
    direction = torch.full((B,), 1.0 if t1 > t0 else -1.0, dtype=torch.float64)
    dt_max = torch.full((B,), abs(t1 - t0), dtype=torch.float64)
    stats = {"n_f_evals": torch.zeros(B, dtype=torch.long)}
    dt0, _ = ctrl._select_initial_step(None, ts, y0, direction, dt_max, order, stats, None)
    return dt0.abs().tolist()


def torchdiffeq_step(f, y0, t0, t1, rtol, atol, order):
    if t1 > t0:
        func, ts = f, torch.tensor(t0, dtype=torch.float64)
    else:  # odeint: decreasing times integrate -f(-t, y) from -t0
        def func(t, y):
            return -f(-t, y)
        ts = torch.tensor(-t0, dtype=torch.float64)
    h = tdq_select(func, ts, y0, order - 1, rtol, atol, _rms_norm)
    return float(abs(h))


def conditioning(f, y0, t0, t1, rtol, atol, order):
    """Per row: whether torchode's cap min(h0, |t1 - t0|) changes HNW's h0, and kappa, the
    condition of the step on the field's rounding: |f0| / |f1 - f0| where d2 sets the step
    (h1 < 100 h0 and d2 > d1: f1 - f0 cancels, and a relative error e in f moves the step by
    about e kappa / p), else 0."""
    B = y0.shape[0]
    direction = 1.0 if t1 > t0 else -1.0
    tt = torch.full((B,), t0, dtype=torch.float64)
    f0 = f(tt, y0)
    sc = atol + y0.abs() * rtol
    rms = torchode.step_size_controllers.rms_norm
    d0, d1 = rms(y0 / sc), rms(f0 / sc)
    h0 = torch.where((d0 < 1e-5) | (d1 < 1e-5), torch.full_like(d0, 1e-6), 0.01 * d0 / d1)
    capped = h0 > abs(t1 - t0)
    h0 = torch.clamp(h0, max=abs(t1 - t0))
    f1 = f(tt + direction * h0, y0 + (direction * h0)[:, None] * f0)
    d2 = rms((f1 - f0) / sc) / h0
    h1 = (0.01 / torch.maximum(d1, d2)) ** (1.0 / order)
    kappa = torch.linalg.vector_norm(f0, dim=1) / torch.linalg.vector_norm(f1 - f0, dim=1)
    kappa = torch.where((h1 < 100 * h0) & (d2 > d1), kappa, torch.zeros_like(kappa))
    return capped.tolist(), kappa.tolist()


def main():
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    models = {"plain": make_model(11, False), "time": make_model(12, True)}
    rows = np.random.RandomState(13).normal(size=(3, N))
    cases = []
    for mname, model in models.items():
        for method, order in ORDERS.items():
            for rtol, atol in TOLS:
                for ys in Y_SCALES:
                    for fs in F_SCALES:
                        for t0, t1 in INTERVALS:
                            f = field(model, fs)
                            y0 = torch.tensor(rows * ys, dtype=torch.float64)
                            tdq = [torchdiffeq_step(f, y0[b:b + 1], t0, t1, rtol, atol, order)
                                   for b in range(y0.shape[0])]
                            cap, kappa = conditioning(f, y0, t0, t1, rtol, atol, order)
                            cases.append({
                                "model": mname, "method": method, "order": order,
                                "rtol": rtol, "atol": atol, "y_scale": ys, "out_scale": fs,
                                "t0": t0, "t1": t1, "y0": y0.tolist(),
                                "torchode": torchode_steps(f, y0, t0, t1, rtol, atol, order),
                                "torchdiffeq": tdq,
                                "capped": cap, "kappa": kappa})
    doc = {"producer": "scripts/reference_dt0.py", "torch": torch.__version__,
           "torchode": getattr(torchode, "__version__", "1.0.1"),
           "torchdiffeq": torchdiffeq.__version__, "models": models, "cases": cases}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{OUT}: {len(cases)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
