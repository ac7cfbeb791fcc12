#!/usr/bin/env python3
"""test_cli_values.py - every value clnode-solve is given means what it says in the working
precision, or is refused by name: times that collapse in fp32 (t0 and t1 the same float, a
first step that does not move t0, a dt0 or dtmax that rounds to 0), finite doubles beyond the
float range (y0, t1, dtmax, a save time, an F64 weight) and max_steps outside the library's one
range, [1, 2147483647]. Each refusal exits 2 with one line naming the option; the same problem
in fp64, where it means what it says, solves.

    test_cli_values.py SOLVE

Standard library only (the safetensors file is written literally). Exit status 0 when every
check passes, 1 otherwise.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

SOLVE = os.path.abspath(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="clnode-cli-values-")
FAILED = []
Y0 = "--y0=" + ",".join(["0"] * 10)  # the seed model's state


def run(args):
    p = subprocess.run([SOLVE] + args, capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else "\n      " + detail))
    if not cond:
        FAILED.append(name)


def refused(name, args, *words):
    """Exit 2, nothing on stdout, and one message naming every word."""
    rc, out, err = run(args)
    lines = [l for l in err.splitlines() if l.strip()]
    ok = rc == 2 and out == "" and len(lines) == 1 and all(w in err for w in words)
    check(name, ok, "exit %d (want 2); stderr: %s; stdout: %s" % (rc, err.strip()[:600],
                                                                 out.strip()[:300]))


def solves(name, args, steps_at_least=1):
    """Exit 0 with every trajectory successful after at least steps_at_least steps."""
    rc, out, err = run(["--json"] + args)
    try:
        js = json.loads(out)
        steps = [t["num_steps"] for t in js["trajectories"]]
        ok = rc == 0 and all(t["result"] == "success" for t in js["trajectories"]) and \
            min(steps) >= steps_at_least
    except (ValueError, KeyError, TypeError):
        ok, steps = False, None
    check(name, ok, "exit %d; steps %s; stderr: %s" % (rc, steps, err.strip()[:600]))


def npy_f8(path, values):
    """A (B,) float64 .npy file."""
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() +
                struct.pack("<%dd" % len(values), *values))
    return path


def safetensors_f64(path, weight, bias):
    """A one-layer 1 -> 1 model in F64: weight and bias as given."""
    hdr = json.dumps({"layers.0.weight": {"dtype": "F64", "shape": [1, 1], "data_offsets": [0, 8]},
                      "layers.0.bias": {"dtype": "F64", "shape": [1], "data_offsets": [8, 16]}})
    hdr = hdr.encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + struct.pack("<2d", weight, bias))
    return path


# --- times that collapse in fp32 (the t0 = t1 of 1.7e9 and 1700000060 solved in 0 steps) ---
refused("t0 and t1 the same float in fp32", [Y0, "--t0", "1.7e9", "--t1", "1700000060"],
        "t0 = 1700000000", "t1 = 1700000060", "fp32")
solves("the same interval in fp64", [Y0, "--t0", "1.7e9", "--t1", "1700000060", "--precision",
                                     "fp64"])
solves("t0 == t1 as given stays a solve of no step",
       [Y0, "--t0", "1.7e9", "--t1", "1.7e9"], steps_at_least=0)
t0s = npy_f8(os.path.join(TMP, "t0.npy"), [0.0, 1.7e9])
t1s = npy_f8(os.path.join(TMP, "t1.npy"), [1.0, 1700000060.0])
refused("per-trajectory times that collapse name the trajectory",
        [Y0, "--batch", "2", "--t0-file", t0s, "--t1-file", t1s], "trajectory 1", "fp32")

# --- steps that do not move t in fp32 (4096 zero-length steps) ---
refused("--dt0 that rounds to 0", [Y0, "--dt0", "1e-50"], "dt0 = 1e-50", "rounds to 0")
refused("--dtmax that rounds to 0", [Y0, "--dtmax", "1e-50"], "dtmax = 1e-50", "rounds to 0")
refused("--dt0 too small to move t0", [Y0, "--t0", "1e8", "--t1", "100000050", "--dt0", "1"],
        "dt0 = 1", "does not move t0", "fp32")
refused("--dtmax too small to move t0", [Y0, "--t0", "1e8", "--t1", "100000050", "--dt0", "100",
                                         "--dtmax", "2"], "dtmax = 2", "does not move t0")
solves("the same step in fp64 moves t0", [Y0, "--t0", "1e8", "--t1", "100000050", "--dt0", "1",
                                          "--precision", "fp64"])

# --- finite doubles beyond the float range (inf in an fp32 solve, nonfinite at t = 0) ---
refused("--y0 beyond fp32", ["--y0=1e39," + ",".join(["0"] * 9)], "y0 of trajectory 0",
        "component 0", "fp32 range")
refused("--t1 beyond fp32", [Y0, "--t1", "1e308"], "t1 = 1e+308", "fp32 range")
refused("--dtmax beyond fp32", [Y0, "--dtmax", "1e39"], "dtmax = 1e+39", "fp32 range")
model = safetensors_f64(os.path.join(TMP, "big-bias.safetensors"), -1.0, 1e300)
refused("an F64 weight beyond fp32 names its tensor", ["--model", model, "--y0", "1"],
        "tensor 'layers.0.bias'", "1e+300", "fp32 range")
solves("the same model in fp64", ["--model", model, "--y0", "1", "--precision", "fp64"])

# --- max_steps: one range, the library's ---
refused("--max-steps beyond the library's range", [Y0, "--max-steps", "2147483648"],
        "--max-steps", "[1, 2147483647]")
refused("--max-steps 0", [Y0, "--max-steps", "0"], "--max-steps", "[1, 2147483647]")
refused("--max-steps beyond the range with saved steps",
        [Y0, "--max-steps", "9223372036854775807", "--save", "steps"], "[1, 2147483647]")
solves("--max-steps at the top of the range, saved steps", [Y0, "--max-steps", "2147483647",
                                                            "--save", "steps", "--t1", "1"])
rc, out, err = run(["--help"])
check("--help states the range", "[1, 2147483647]" in out, out[:300])

print("%d check(s) failed" % len(FAILED) if FAILED else "every check passed")
sys.exit(1 if FAILED else 0)
