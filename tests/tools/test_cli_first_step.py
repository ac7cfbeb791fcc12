#!/usr/bin/env python3
"""clnode-solve reports each trajectory's first step: --json's "first_step" and the summary's
"first step X". Oracles: the step given (--dt0, --dt0-file; after the --dtmax clip, before the
clip to the interval; 0 for t0 == t1), and for --dt0 auto the choice given back (--dt0-file of
the reported steps): the same steps and points, one evaluation fewer (tsit5's first step reuses
the choice's f0).

usage: test_cli_first_step.py CLNODE_SOLVE

Standard library only. Exit status 0 when every check passes, 1 otherwise."""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

SOLVE = os.path.abspath(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="clnode-first-step-")
FAILED = []
DIM = 10  # the built-in seed model's


def check(ok, what):
    if not ok:
        FAILED.append(what)


def write_npy(name, values, shape):
    """A little-endian float64 .npy of `shape` (numpy.save's format 1.0)."""
    dims = "(%d,)" % shape[0] if len(shape) == 1 else "(%s)" % ", ".join(map(str, shape))
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % dims
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dd" % len(values), *values))
    return path


def solve(*args):
    """(exit status, the --json document or stderr, the summary lines of the same solve)."""
    r = subprocess.run([SOLVE, "--json", "--json-points", *args], capture_output=True, text=True)
    if r.returncode != 0:
        return r.returncode, r.stderr, []
    s = subprocess.run([SOLVE, *args], capture_output=True, text=True)
    return r.returncode, json.loads(r.stdout), s.stdout.splitlines()


def summary_steps(lines):
    """The "first step X" of each trajectory's summary line, as printed."""
    return [m.group(1) for m in (re.search(r"^  traj \d+: .*, first step (\S+),", x)
                                 for x in lines) if m]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def given():
    for prec, round_ in (("fp64", float), ("fp32", f32)):
        for t1, dt0 in (("1", "0.05"), ("-1", "-0.05")):
            rc, doc, lines = solve("--precision", prec, "--t1", t1, "--dt0", dt0)
            if rc:
                FAILED.append(f"--precision {prec} --t1 {t1} --dt0 {dt0}: exit {rc}: {doc}")
                continue
            got = doc["trajectories"][0].get("first_step")
            check(got is not None and round_(got) == round_(float(dt0)),
                  f"{prec} --dt0 {dt0}: first_step {got}, want {dt0} (signed, as given)")
            check(summary_steps(lines) == [dt0], f"{prec} --dt0 {dt0}: summary {lines}")
            check(doc.get("dt0_auto") is False, f"--dt0 {dt0}: dt0_auto {doc.get('dt0_auto')}")
    # after --dtmax, before the interval (0.2 long)
    rc, doc, lines = solve("--precision", "fp64", "--t1", "0.2", "--dt0", "0.5", "--dtmax", "0.25")
    got = doc["trajectories"][0].get("first_step") if rc == 0 else doc
    check(got == 0.25, f"--dt0 0.5 --dtmax 0.25 --t1 0.2: first_step {got}, want 0.25")
    rc, doc, lines = solve("--t0", "1", "--t1", "1", "--dt0", "0.05")
    got = doc["trajectories"][0].get("first_step") if rc == 0 else doc
    check(got == 0, f"--t0 1 --t1 1: first_step {got}, want 0 (no step)")
    # per trajectory
    steps = [0.01, 0.02, 0.04, 0.08]
    rc, doc, _ = solve("--precision", "fp64", "--t1", "1", "--batch", "4", "--dt0-file",
                       write_npy("dt0.npy", steps, (4,)))
    got = [t.get("first_step") for t in doc["trajectories"]] if rc == 0 else doc
    check(got == steps, f"--dt0-file {steps}: first_step {got}")


def chosen():
    # y0 of different scales (a zero one too): a different choice for each
    y0 = []
    for scale in (0.0, 0.3, 1.0, 3.0, 10.0):
        y0 += [scale * (1 + 0.1 * j) for j in range(DIM)]
    y0_file = write_npy("y0.npy", y0, (5, DIM))
    for prec in ("fp64", "fp32"):
        for t1 in ("2", "-2"):
            common = ["--precision", prec, "--t1", t1, "--rtol", "1e-5", "--atol", "1e-7",
                      "--save", "steps", "--y0-file", y0_file]
            rc, auto, lines = solve(*common, "--dt0", "auto")
            if rc:
                FAILED.append(f"{prec} --t1 {t1} --dt0 auto: exit {rc}: {auto}")
                continue
            first = [t.get("first_step") for t in auto["trajectories"]]
            sign = -1.0 if t1.startswith("-") else 1.0  # the reported step is signed
            if None in first or len(set(first)) < 4 or not all(0 < sign * h < 2 for h in first):
                FAILED.append(f"{prec} --t1 {t1} --dt0 auto: first_step {first}")
                continue
            rnd = f32 if prec == "fp32" else float
            check([rnd(float(x)) for x in summary_steps(lines)] == [rnd(h) for h in first],
                  f"{prec} --dt0 auto: summary {lines}, JSON {first}")
            check(len(summary_steps(lines)) == 5 and auto.get("dt0_auto") is True and
                  any(x.startswith("interval [0, ") and "dt0 auto" in x for x in lines),
                  f"{prec} --dt0 auto: summary {lines}, dt0_auto {auto.get('dt0_auto')}")
            path = write_npy(f"first-{prec}{t1}.npy", first, (5,))
            rc, back, _ = solve(*common, "--dt0-file", path)
            if rc:
                FAILED.append(f"{prec} --t1 {t1} --dt0-file of the chosen steps: exit {rc}: {back}")
                continue
            for b, (a, g) in enumerate(zip(auto["trajectories"], back["trajectories"])):
                what = f"{prec} --t1 {t1} trajectory {b}"
                check(g["first_step"] == a["first_step"], f"{what}: first_step {g['first_step']}"
                      f" given back, {a['first_step']} chosen")
                check(g["points"] == a["points"] and g["num_steps"] == a["num_steps"],
                      f"{what}: --dt0 auto and its first step given back differ")
                check(g["num_rhs_evals"] + 1 == a["num_rhs_evals"],
                      f"{what}: {a['num_rhs_evals']} evaluations, given back "
                      f"{g['num_rhs_evals']}: want one fewer")
    # one trajectory: the step given back on the command line, forwards and backwards (the
    # reported step is signed as the direction, so that it reads back as --dt0)
    for t1 in ("2", "-2"):
        rc, auto, _ = solve("--precision", "fp64", "--t1", t1, "--dt0", "auto")
        first = auto["trajectories"][0].get("first_step") if rc == 0 else None
        rc2, back, err = solve("--precision", "fp64", "--t1", t1, "--dt0", repr(first))
        check(first is not None and rc2 == 0 and back["trajectories"][0]["points"] ==
              auto["trajectories"][0]["points"],
              f"--t1 {t1}: --dt0 auto ({first}) and --dt0 {first!r} differ: {rc2} {err}")
    rc, doc, _ = solve("--precision", "fp64", "--t1", "-2", "--dt0", "-0.05")
    got = doc["trajectories"][0].get("first_step") if rc == 0 else doc
    check(got == -0.05, f"--t1 -2 --dt0 -0.05: first_step {got}, want -0.05")


def main():
    given()
    chosen()
    for f in FAILED:
        print("FAIL:", f)
    print(f"{len(FAILED)} failures")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
