#!/usr/bin/env python3
"""test_cli_settings.py - clnode-solve --model takes the solve settings the model file carries
(metadata "clnode.<option>" and "clnode.save_ts", doc/deploy.md) as its defaults, the options
given on the command line winning; a file without them gets the library's defaults (those of
clnode.solve), not the seed problem's; every bad setting is refused (exit 2) with a message
naming the file and the key.

    test_cli_settings.py SOLVE

The model is the linear field dy/dt = -y (one layer, identity), whose solution y0 exp(-t) is the
oracle of the saved values. Standard library only: safetensors files are written literally.
Exit status 0 when every check passes, 1 otherwise.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SOLVE = os.path.abspath(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="clnode-cli-settings-")
FAILED = []
N = 2


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else "\n      " + detail))
    if not cond:
        FAILED.append(name)


def model(meta, name="m.safetensors"):
    """dy/dt = -y: one F64 layer -I, no bias, with the string metadata `meta`."""
    w = [-1.0 if i == j else 0.0 for i in range(N) for j in range(N)]
    blob = struct.pack("<%dd" % len(w), *w)
    header = {"__metadata__": dict(meta),
              "layers.0.weight": {"dtype": "F64", "shape": [N, N], "data_offsets": [0, len(blob)]}}
    h = json.dumps(header).encode()
    p = os.path.join(TMP, name)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)
    return p


def run(args):
    p = subprocess.run([SOLVE] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120, cwd=TMP)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def solve_json(args):
    rc, out, err = run(args + ["--json", "--json-points"])
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, err


TRAINED = {"clnode.method": "dopri5", "clnode.precision": "fp64", "clnode.t0": "0.0",
           "clnode.t1": "2.0", "clnode.dt0": "0.05", "clnode.rtol": "1e-08",
           "clnode.atol": "1e-10", "clnode.max_steps": "1000", "clnode.save_t0": "false",
           "clnode.save_t1": "false", "clnode.save_steps": "false",
           "clnode.save_ts": "0.5,1.0,2.0", "clnode.safety": "0.8"}
Y0 = [1.0, -2.0]
m = model(TRAINED)

# ---- the file's settings are the defaults ----
rc, d, err = solve_json(["--model", m, "--y0", "1,-2"])
ok = rc == 0 and d is not None
check("a model with settings solves (exit 0)", ok, "exit %d: %s" % (rc, err))
if ok:
    check("its settings are used: method, precision, interval, dt0, tolerances, max_steps",
          (d["method"], d["precision"], d["t0"], d["t1"], d["dt0"], d["rtol"], d["atol"],
           d["max_steps"]) == ("dopri5", "fp64", 0.0, 2.0, 0.05, 1e-8, 1e-10, 1000), str(d))
    check("the JSON names the options taken from the file",
          sorted(d.get("settings_from_model") or []) ==
          sorted(k[len("clnode."):] for k in TRAINED), str(d))
    pts = d["trajectories"][0]["points"]
    check("its save times are the saved points", pts["t"] == [0.5, 1.0, 2.0] and
          pts["kind"] == ["ts"] * 3, str(pts))
    err_max = max(abs(y - y0 * math.exp(-t)) for t, row in zip(pts["t"], pts["y"])
                  for y, y0 in zip(row, Y0))
    check("at rtol 1e-8 in fp64 the saved states are y0 exp(-t) within 1e-7", err_max < 1e-7,
          "largest error %g" % err_max)
rc, out, err = run(["--model", m, "--y0", "1,-2"])
check("the summary says the settings came from the file, naming them",
      rc == 0 and "settings from " + m + ": " in out and " rtol " in out and "save_ts" in out,
      out)

# ---- a setting given on the command line wins ----
rc, d, err = solve_json(["--model", m, "--y0", "1,-2", "--rtol", "1e-6", "--method", "tsit5",
                         "--precision", "fp32"])
check("--rtol, --method, --precision given win over the file's",
      rc == 0 and d is not None and (d["rtol"], d["method"], d["precision"], d["atol"]) ==
      (1e-6, "tsit5", "fp32", 1e-10) and
      "rtol" not in (d.get("settings_from_model") or []) and
      "atol" in (d.get("settings_from_model") or []),
      "exit %d %s %s" % (rc, d and {k: d[k] for k in ("rtol", "method", "precision")}, err))
rc, d, err = solve_json(["--model", m, "--y0", "1,-2", "--save", "t1"])
check("--save replaces the file's save settings (its save times too)",
      rc == 0 and d is not None and d["trajectories"][0]["points"]["t"] == [2.0] and
      "save_ts" not in (d.get("settings_from_model") or []), "exit %d %s" % (rc, err))
rc, out, err = run(["--model", m, "--y0", "1,-2", "--t1", "1", "--quiet"])
check("--t1 1 with the file's save time 2 is refused, naming clnode.save_ts and --save",
      rc == 2 and "clnode.save_ts" in err and "--save" in err, "exit %d: %s" % (rc, err))
rc, d, err = solve_json(["--model", m, "--y0", "1,-2", "--t1", "1", "--save", "ts:0.25,1"])
check("--t1 1 --save ts:0.25,1: both given, the rest from the file",
      rc == 0 and d is not None and d["t1"] == 1.0 and d["rtol"] == 1e-8 and
      d["trajectories"][0]["points"]["t"] == [0.25, 1.0], "exit %d %s" % (rc, err))

# ---- dt0 and dt0_auto say the first step together: the one given, the file's pair is not taken ----
rc, d, err = solve_json(["--model", m, "--y0", "1,-2", "--dt0", "auto"])
rc2, d2, err2 = solve_json(["--model", model({}, "flags.safetensors"), "--y0", "1,-2",
                            "--method", "dopri5", "--precision", "fp64", "--t1", "2",
                            "--rtol", "1e-8", "--atol", "1e-10", "--max-steps", "1000",
                            "--save", "ts:0.5,1,2", "--safety", "0.8", "--dt0", "auto"])
check("--dt0 auto over the file's clnode.dt0 0.05: the chosen step, as with every setting typed",
      rc == 0 and rc2 == 0 and d is not None and d2 is not None and
      d["trajectories"][0]["points"] == d2["trajectories"][0]["points"] and
      "dt0" not in (d.get("settings_from_model") or []),
      "exit %d %s / exit %d %s" % (rc, err, rc2, err2))
auto = model(dict(TRAINED, **{"clnode.dt0": "0", "clnode.dt0_auto": "true"}), "auto.safetensors")
rc, d, err = solve_json(["--model", auto, "--y0", "1,-2", "--dt0", "0.05"])
rc2, d2, err2 = solve_json(["--model", m, "--y0", "1,-2"])
check("--dt0 0.05 over the file's clnode.dt0_auto true: the first step 0.05, as the file with dt0 0.05",
      rc == 0 and rc2 == 0 and d is not None and d2 is not None and d["dt0"] == 0.05 and
      d["trajectories"][0]["points"] == d2["trajectories"][0]["points"] and
      "dt0_auto" not in (d.get("settings_from_model") or []),
      "exit %d %s / exit %d %s" % (rc, err, rc2, err2))
rc, d, err = solve_json(["--model", auto, "--y0", "1,-2"])
check("the file's clnode.dt0_auto true alone: the solver chooses the first step",
      rc == 0 and d is not None and "dt0_auto" in (d.get("settings_from_model") or []) and
      d["trajectories"][0]["points"] != d2["trajectories"][0]["points"],
      "exit %d %s" % (rc, err))

# ---- a file without settings: the library's defaults, not the seed problem's ----
bare = model({}, "bare.safetensors")
rc, d, err = solve_json(["--model", bare, "--y0", "1,-2"])
check("a file without settings gets the library's defaults (clnode.solve's)",
      rc == 0 and d is not None and
      (d["t0"], d["t1"], d["dt0"], d["rtol"], d["atol"], d["method"], d["precision"],
       d["max_steps"], d.get("settings_from_model")) ==
      (0.0, 1.0, 0.0, 1e-3, 1e-6, "tsit5", "fp32", 4096, []), "exit %d %s %s" % (rc, d, err))
rc, d, err = solve_json([])
check("without --model the seed problem's defaults stay (t1 50, rtol 1e-4, dt0 0.02)",
      rc == 0 and d is not None and
      (d["t1"], d["rtol"], d["dt0"], d.get("settings_from_model")) == (50.0, 1e-4, 0.02, None),
      "exit %d %s" % (rc, err))
other = model({"activation": "identity", "format": "pt"}, "other.safetensors")
rc, d, err = solve_json(["--model", other, "--y0", "1,-2"])
check("metadata outside clnode.* is no setting", rc == 0 and d is not None and
      d.get("settings_from_model") == [] and d["t1"] == 1.0, "exit %d %s" % (rc, err))

# ---- every bad setting is refused, naming the file and the key ----
BAD = [
    ("clnode.rtol", "-1", "rtol"), ("clnode.rtol", "abc", "a number"),
    ("clnode.rtol", "1e-4 ", "a number"), ("clnode.rtol", "", "a number"),
    ("clnode.t1", "inf", "t1"), ("clnode.t1", "nan", "t1"),
    ("clnode.precision", "fp16", "fp32"), ("clnode.method", "rk4", "tsit5"),
    ("clnode.max_steps", "0", "max_steps"), ("clnode.max_steps", "1.5", "max_steps"),
    ("clnode.factormin", "1.5", "factormin"),
    ("clnode.save_t1", "yes", '"true" or "false"'), ("clnode.constant_step", "1", "true"),
    ("clnode.rtl", "1e-4", "no solve setting"), ("clnode.compact", "true", "changes no result"),
    ("clnode.keep_tape", "true", "changes no result"), ("clnode.", "1", "no solve setting"),
    ("clnode.save_ts", "0.5,,1", "empty"), ("clnode.save_ts", "0.5,nan", "save_ts"),
    ("clnode.save_ts", "", "save_ts"),
    ("clnode.save_ts", "3", "outside the interval"), ("clnode.save_ts", "1,0.5", "direction"),
    ("clnode.dt0", "-0.1", "sign"),
]
for key, value, says in BAD:
    meta = dict(TRAINED, **{key: value})
    p = model(meta, "bad.safetensors")
    rc, out, err = run(["--model", p, "--y0", "1,-2", "--quiet"])
    check("metadata %s = %r is refused (2), naming the file and the key" % (key, value),
          rc == 2 and p in err and "metadata" in err and key in err and says in err,
          "exit %d: %s" % (rc, err.strip()))
# a bad setting is refused even where the command line gives that option
p = model(dict(TRAINED, **{"clnode.rtol": "-1"}), "bad.safetensors")
rc, out, err = run(["--model", p, "--y0", "1,-2", "--rtol", "1e-3", "--quiet"])
check("a bad setting is refused also when its option is given", rc == 2 and "clnode.rtol" in err,
      "exit %d: %s" % (rc, err))

shutil.rmtree(TMP, ignore_errors=True)
print("%d failed" % len(FAILED) if FAILED else "all passed")
sys.exit(1 if FAILED else 0)
