#!/usr/bin/env python3
"""test_cli_values.py - every value clnode-solve is given means what it says, or is refused by
name: max_steps outside the library's one range, [1, 2147483647]. Each refusal exits 2 with one
line naming the option.

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
