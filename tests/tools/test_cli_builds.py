#!/usr/bin/env python3
"""test_cli_builds.py - a kernel build is never silent: the first solve on PoCL with an empty
kernel cache (a fresh POCL_CACHE_DIR) compiles for tens of seconds, and the tools say so on
stderr, one line naming the device and what it builds before it starts and one with its time when
done (the library's CLNODE_LOG_BUILD messages); --quiet silences them, and a host solve builds
nothing.

    test_cli_builds.py SOLVE

fp64 is the smallest build (CLBlast's fp64 GEMM and the fp64 program). Exit status 0 when every
check passes, 1 otherwise, 77 (skipped) without a PoCL device unless $CLNODE_REQUIRE_DEVICES
names opencl:pocl. Standard library only.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOLVE = os.path.abspath(sys.argv[1])
FAILED = []


def run(args, cache, timeout=600):
    env = dict(os.environ, POCL_CACHE_DIR=cache)
    p = subprocess.run(args, capture_output=True, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else "\n      " + detail),
          flush=True)
    if not cond:
        FAILED.append(name)


def builds(err, prog):
    """The build lines of stderr: (building/built, what, device, seconds or None), in order."""
    out = []
    for line in err.splitlines():
        m = re.match(r"%s: building (.+?) for (.+)$" % prog, line)
        if m:
            out.append(("building", m.group(1), m.group(2), None))
            continue
        m = re.match(r"%s: built (.+?) for (.+) in ([0-9.]+) s$" % prog, line)
        if m:
            out.append(("built", m.group(1), m.group(2), float(m.group(3))))
    return out


def check_pairs(name, lines, whats):
    """Each of `whats` built once: its "building" line, then its "built" line with the time, for
    the same device."""
    for what in whats:
        idx = [i for i, b in enumerate(lines) if b[1] == what]
        kinds = [lines[i][0] for i in idx]
        check("%s: %s announced before it starts, then timed" % (name, what),
              kinds == ["building", "built"] and lines[idx[0]][2] == lines[idx[1]][2]
              and lines[idx[1]][3] >= 0.0, "lines: %r" % (lines,))


def main():
    fresh = tempfile.mkdtemp(prefix="clnode-pocl-cache-")
    try:
        rc, _, err = run([SOLVE, "--device", "opencl:pocl", "--precision", "fp64", "--t1", "0.5"],
                         fresh)
        if rc != 0:
            if "opencl:pocl" in os.environ.get("CLNODE_REQUIRE_DEVICES", "").split(","):
                check("opencl:pocl, required here (CLNODE_REQUIRE_DEVICES), solves", False, err)
                return 1
            print("skip: no PoCL device (opencl:pocl): %s" % err.strip()[:300])
            return 77
        lines = builds(err, "clnode-solve")
        check_pairs("clnode-solve, empty PoCL cache", lines,
                    ["the OpenCL program (fp64)", "CLBlast's fp64 GEMM kernels"])
        check("clnode-solve: the device is named (PoCL's)",
              bool(lines) and all("Portable Computing Language" in b[2] for b in lines),
              "lines: %r" % (lines,))
        rc, _, err = run([SOLVE, "--device", "opencl:pocl", "--precision", "fp64", "--t1", "0.5",
                          "--quiet"], fresh)
        check("clnode-solve --quiet: no build lines", rc == 0 and not builds(err, "clnode-solve"),
              "exit %d; stderr: %s" % (rc, err.strip()[:600]))
        rc, _, err = run([SOLVE, "--device", "host", "--precision", "fp64", "--t1", "0.5"], fresh)
        check("clnode-solve on the host builds nothing",
              rc == 0 and "build" not in err, "exit %d; stderr: %s" % (rc, err.strip()[:600]))
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    if FAILED:
        print("%d check(s) failed: %s" % (len(FAILED), ", ".join(FAILED)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
