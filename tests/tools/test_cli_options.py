#!/usr/bin/env python3
"""The tools' solve options come from the library's one table (CLNODE_SOLVE_OPTION_LIST in
include/clnode/solver.h): every row but the SaveAt ones is a long option of clnode-solve and
clnode-compare (--NAME with '-' for '_', booleans as --NAME and --no-NAME), listed in --help with
its doc line and default, and accepted by clnode-solve with a valid value (the tape's options,
keep_tape and checkpoint_every, with --cotangents and --grad-out: clnode-solve refuses them
without). A row that a tool missed fails here. Oracle: the rows as the header writes them. And
--dt0 auto: the first step chosen (read off a solve of one attempt), given back as --dt0, gives the
same final state with one evaluation fewer (tsit5's first step reuses the choice's f0); refused
with --constant-step, and "auto" for another option.

usage: test_cli_options.py SOLVER_H CLNODE_SOLVE CLNODE_COMPARE"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

# the options that mean something only for the gradient (clnode-solve refuses them without it)
GRADIENT_ONLY = ("keep_tape", "checkpoint_every")


def gradient_args(tmp):
    """--cotangents (ones, for the seed model's one saved point) and --grad-out in tmp."""
    head = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 10), }"
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    cot = os.path.join(tmp, "cot.npy")
    with open(cot, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() +
                struct.pack("<10d", *[1.0] * 10))
    return ["--cotangents", cot, "--grad-out", os.path.join(tmp, "g.npz")]


def list_body(header):
    """The text of CLNODE_SOLVE_OPTION_LIST's definition, its lines joined."""
    text = open(header, encoding="utf-8").read()
    body = text[text.index("#define CLNODE_SOLVE_OPTION_LIST(X)"):]
    return body[:body.index("\n\n")].replace("\\\n", " ")


def rows(header):
    """(name, type, flags, doc) of every row of the table, in its order."""
    body = list_body(header)
    out = []
    for m in re.finditer(r'X\(([^,]+(?:\*)?),\s*(\w+),\s*(\w+),\s*(\w+),\s*([^,]+),\s*([^,]+),'
                         r'\s*([^,]+),\s*([^"]+?),\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', body):
        doc = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(9)))
        out.append((m.group(2), m.group(3), m.group(8).strip(), doc))
    return out


def solve_json(solve, *args):
    r = subprocess.run([solve, "--precision", "fp64", "--t1", "1", "--json", *args],
                       capture_output=True, text=True)
    # exit 1: the trajectory stopped at --max-steps
    return r.returncode, (json.loads(r.stdout)["trajectories"][0] if r.returncode in (0, 1) else
                          r.stderr)


def dt0_auto(solve):
    """--dt0 auto against the same solve given the chosen first step."""
    failures = []
    rc, one = solve_json(solve, "--dt0", "auto", "--max-steps", "1")
    rc2, auto = solve_json(solve, "--dt0", "auto")
    if rc != 1 or rc2 != 0 or not 0 < one["t_final"] < 1 or one["num_rejected"]:
        return [f"--dt0 auto: exit {rc}, {rc2}: {one}"]
    rc, given = solve_json(solve, "--dt0", repr(one["t_final"]))
    if rc != 0 or given["y_final"] != auto["y_final"] or \
            given["num_rhs_evals"] + 1 != auto["num_rhs_evals"]:
        failures.append(f"--dt0 auto ({auto}) and --dt0 {one['t_final']!r} ({given}) differ")
    for args, what in ((["--dt0", "auto", "--constant-step"], "dt0_auto"),
                       (["--rtol", "auto"], "rtol")):
        r = subprocess.run([solve, "--quiet", *args], capture_output=True, text=True)
        if r.returncode != 2 or what not in r.stderr:
            failures.append(f"{' '.join(args)}: exit {r.returncode}, {r.stderr.strip()!r}: want 2 "
                            f"naming {what}")
    return failures


def main():
    header, solve, compare = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="clnode-options-")
    table = rows(header)
    failures = []
    n_rows = list_body(header).count(" X(")
    if len(table) != n_rows or len(table) < 20:
        failures.append(f"read {len(table)} rows of {n_rows} from {header}")
    helps = {tool: subprocess.run([tool, "--help"], capture_output=True, text=True).stdout
             for tool in (solve, compare)}
    for name, typ, flags, doc in table:
        if "CLNODE_OPTION_SAVE" in flags:
            continue  # --save sets them
        opt = "--" + name.replace("_", "-")
        for tool, text in helps.items():
            words = re.findall(r"--[a-z0-9-]+", text)
            if opt not in words or (typ == "BOOLEAN" and "--no-" + opt[2:] not in words):
                failures.append(f"{tool} --help does not list {opt}")
            if " ".join(doc.split()[:3]) not in " ".join(text.split()):
                failures.append(f"{tool} --help does not show the doc line of {name}: {doc!r}")
        value = []
        if typ != "BOOLEAN":  # the default --help shows, given back
            m = re.search(re.escape(opt) + r" .*?\(default ([^)]+)\)", helps[solve], re.S)
            value = [m.group(1) if m else "?"]
        args = [solve, "--t0", "1", "--t1", "1", "--dt0", "0", "--quiet", opt] + value
        if name in ("t0", "t1", "dt0"):
            args = [solve, "--quiet", "--t0", "1", "--t1", "1", opt, "1" if name != "dt0" else "0"]
        if name in GRADIENT_ONLY:
            args += gradient_args(tmp)
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"clnode-solve {opt} {' '.join(value)}: exit {r.returncode}: "
                            f"{r.stderr.strip()}")
    r = subprocess.run([solve, "--quiet", "--rtol", "0"], capture_output=True, text=True)
    if r.returncode != 2 or "rtol" not in r.stderr or "(0, inf)" not in r.stderr:
        failures.append(f"--rtol 0: exit {r.returncode}, {r.stderr.strip()!r}: want 2 naming the "
                        "range (0, inf)")
    failures += dt0_auto(solve)
    for name in GRADIENT_ONLY:  # without the gradient: refused (2), naming the option
        opt = "--" + name.replace("_", "-")
        r = subprocess.run([solve, "--quiet", opt] + ([] if name == "keep_tape" else ["2"]),
                           capture_output=True, text=True)
        if r.returncode != 2 or opt not in r.stderr or "--cotangents" not in r.stderr:
            failures.append(f"clnode-solve {opt} without --cotangents: exit {r.returncode}, "
                            f"{r.stderr.strip()!r}: want 2 naming it and --cotangents")
        r = subprocess.run([compare, "--devices", "host", opt] +
                           ([] if name == "keep_tape" else ["2"]), capture_output=True, text=True)
        if r.returncode != 2 or opt not in r.stderr or "forward" not in r.stderr:
            failures.append(f"clnode-compare {opt}: exit {r.returncode}, {r.stderr.strip()!r}: "
                            "want 2 naming it (compare solves forward only)")
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    for f in failures:
        print("FAIL:", f)
    print(f"{len(table)} options, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
