#!/usr/bin/env python3
"""Runs a program with Oclgrind registered as one more OpenCL platform and fails on any report of
Oclgrind's checkers.

Usage: oclgrind_check.py OCLGRIND_ICD [--expect REGEX] PROGRAM [ARGS...]

OCLGRIND_ICD is the .icd file that names Oclgrind's ICD library (tests/backend/meson.build generates
it in the build directory: Debian installs liboclgrind-rt-icd.so without one). The program sees the
platforms of /etc/OpenCL/vendors (or of $OCL_ICD_VENDORS when it is a folder) plus Oclgrind,
through a vendors folder made for this run, with Oclgrind's checks on: --check-api --data-races
--uninitialized, set for the ICD as OCLGRIND_CHECK_API, OCLGRIND_DATA_RACES and
OCLGRIND_UNINITIALIZED. Oclgrind writes each report to stderr as a block that names the kernel
("Kernel: cln_stage") or the API function ("Function: clEnqueueNDRangeKernel"); any such block,
or anything else on stderr, fails the run, as does a standard output that REGEX (--expect) does
not match. Exit status: the program's when it failed or skipped
(77), 1 on a report, else 0.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter


def vendors_folder(icd, tmp):
    system = os.environ.get("OCL_ICD_VENDORS", "/etc/OpenCL/vendors")
    if not os.path.isdir(system):
        system = "/etc/OpenCL/vendors"
    for f in sorted(glob.glob(os.path.join(system, "*.icd"))):
        if os.path.basename(f) != "oclgrind.icd":
            shutil.copy(f, tmp)
    shutil.copy(icd, os.path.join(tmp, "oclgrind.icd"))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    icd, cmd, expect = sys.argv[1], sys.argv[2:], None
    if cmd[0] == "--expect" and len(cmd) > 2:
        expect, cmd = cmd[1], cmd[2:]
    with tempfile.TemporaryDirectory(prefix="clnode-icd-") as tmp:
        vendors_folder(icd, tmp)
        env = dict(os.environ)
        env.update(OCL_ICD_VENDORS=tmp, OCLGRIND_CHECK_API="1", OCLGRIND_DATA_RACES="1",
                   OCLGRIND_UNINITIALIZED="1")
        # Oclgrind's runtime is loaded by the ICD loader after ASan's: tell ASan that is fine
        asan = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "verify_asan_link_order=0"
        run = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, errors="replace")
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        sys.stdout.write(run.stderr[-20000:])
        sys.exit(run.returncode)

    reports, other = Counter(), []
    for block in re.split(r"\n\s*\n", run.stderr):
        if not block.strip():
            continue
        m = re.search(r"^\s*(Kernel|Function):\s*(\S+)", block, re.M)
        if m:
            reports["%s %s: %s" % (m.group(1).lower(), m.group(2),
                                   block.strip().splitlines()[0])] += 1
        else:
            other.append(block.strip())
    for what, n in sorted(reports.items()):
        print("oclgrind report x%d: %s" % (n, what))
    for block in other:
        print("unexpected output on stderr:\n" + block)
    missing = expect is not None and not re.search(expect, run.stdout, re.M)
    if missing:
        print("FAIL: the output does not match %r" % expect)
    if reports or other or missing:
        print("FAIL: %d Oclgrind reports, %d other messages" % (sum(reports.values()),
                                                               len(other)))
        sys.exit(1)
    print("Oclgrind (--check-api --data-races --uninitialized): no report")


if __name__ == "__main__":
    main()
