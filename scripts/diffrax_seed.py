#!/usr/bin/env python3
"""The seed experiment in diffrax itself: the built-in seed model, y0 = 0, t in [0, 50],
dt0 = 0.02, Tsit5 with PIDController(rtol=1e-4, atol=1e-6), float32, at batch 1 (a plain
diffeqsolve) and batch 2 (jax.vmap over two identical copies), with JAX's default matmul
precision and with "highest". On Ampere and newer NVIDIA GPUs the default runs float32 matrix
products in TF32: this is the failure clnode was born from (14 steps became 162 on an RTX 3090).

    python3 scripts/diffrax_seed.py [--json FILE]

Needs jax, equinox-free: only jax, diffrax, numpy and safetensors (scripts/make_reference.py's
virtual environment has them; GPU machines with JAX usually do too). Prints one line per run.
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--model", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "lib", "model", "seed.safetensors"))
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import diffrax
    from safetensors.numpy import load_file

    tensors = load_file(args.model)
    n_layers = len([k for k in tensors if k.endswith(".weight")])
    weights = [(jnp.asarray(tensors[f"layers.{i}.weight"], jnp.float32),
                jnp.asarray(tensors[f"layers.{i}.bias"], jnp.float32)) for i in range(n_layers)]

    def field(t, y, args):
        # eqx.nn.MLP: weight @ x + bias, softplus between layers, identity at the end
        for i, (w, b) in enumerate(weights):
            y = w @ y + b
            if i + 1 < n_layers:
                y = jax.nn.softplus(y)
        return y

    def solve(y0):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(field), diffrax.Tsit5(), t0=0.0, t1=50.0, dt0=0.02, y0=y0,
            stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6), max_steps=4096,
            throw=False)

    results = []
    dev = jax.devices()[0]
    for precision in ("default", "highest"):
        with jax.default_matmul_precision(None if precision == "default" else "highest"):
            for batch in (1, 2):
                t0 = time.time()
                if batch == 1:
                    sol = jax.jit(solve)(jnp.zeros(10, jnp.float32))
                    steps = [int(sol.stats["num_steps"])]
                    rej = [int(sol.stats["num_rejected_steps"])]
                    res = [int(sol.result._value)]
                else:
                    sol = jax.jit(jax.vmap(solve))(jnp.zeros((batch, 10), jnp.float32))
                    steps = [int(s) for s in sol.stats["num_steps"]]
                    rej = [int(s) for s in sol.stats["num_rejected_steps"]]
                    res = [int(r) for r in np.asarray(sol.result._value)]
                dt = time.time() - t0
                line = {"device": str(dev), "precision": precision, "batch": batch,
                        "num_steps": steps, "num_rejected": rej, "result_codes": res,
                        "seconds": round(dt, 2)}
                results.append(line)
                print(f"diffrax {diffrax.__version__} jax {jax.__version__} on {dev}: matmul "
                      f"precision {precision:8s} batch {batch}: num_steps {steps} "
                      f"(rejected {rej}, result codes {res}) [{dt:.1f} s]", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
