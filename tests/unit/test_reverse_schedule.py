#!/usr/bin/env python3
"""The reverse pass is written once: its schedule lives in lib/solver/ alone, over per-step
operations that each backend supplies (cln_rev_ops, lib/backends/backend.h).

Checks, comments left out:
  1. the per-step operations are called (ops->rows ... ops->results) and the schedule's entry
     (cln_rev_schedule) defined in lib/solver/ only, and lib/solver/reverse_schedule.c calls
     every one of them;
  2. the backends' reverse files (lib/backends/host/host_reverse.inc, host_rev.c,
     lib/backends/device/device_reverse.c) hold per-step operations: no loop over reverse steps
     (a `for (size_t s = 0; ...)` loop, the active rows shrunk at a row's last step, the stages
     walked from the last), no ordering of the trajectories (qsort, an insertion sort on steps),
     no recomputation loop over a checkpoint group's steps;
  3. the ops table (struct cln_backend_ops) has no whole-pass operation: every member that
     writes block sums (a `theta` parameter) takes the schedule as a cln_rev_run_fn, and the
     per-step table cln_rev_ops has the operations the schedule calls;
  4. no loop over reverse steps outside lib/solver/: no source of lib/ outside it walks a
     reverse step's stages from the last or repeats steps up to a count of steps (the bare VJP
     loop of clnode/bench.h is the schedule's step, cln_rev_bare, not a backend's loop), and the
     ops table has no bare VJP operation of its own;
  5. the step a save time belongs to is stated once: CLN_TS_STEP_LOOP, defined in cl/cln_layout.h
     alone, is the only comparison of save times with step ends (no CLN_TS_BY_END, no other
     definition), run by the forward's dense output (cl/cln_step.h), the tape that records each
     saved time's step (lib/solver/tape.c) and the count of a trajectory of no step
     (lib/solver/solver_save.c); the reverse pass (lib/solver/gradient.c, the backends) reads
     the recorded step and runs the rule nowhere.
Fails on any hit, printing it; also fails when a file it scans is missing.

usage: test_reverse_schedule.py SOURCE_ROOT
"""
import pathlib
import re
import sys

OPS = ["rows", "setup", "group", "begin", "stage", "y1", "events", "stage_vjp", "sums", "next",
       "finish", "results"]
OP_CALL = re.compile(r"\bops\s*->\s*(" + "|".join(OPS) + r")\s*\(")
SCHEDULE_DEF = re.compile(r"\bcln_rev_schedule\s*\([^;{]*\)\s*\{")
BACKEND_FILES = ["lib/backends/host/host_reverse.inc", "lib/backends/host/host_rev.c",
                 "lib/backends/device/device_reverse.c"]
STEP_LOOPS = {
    "a loop over reverse steps": re.compile(r"\bfor\s*\(\s*size_t\s+s\s*=\s*0\s*;"),
    "the active rows shrunk at a row's last step": re.compile(r"\bM\s*\[\s*A\s*-\s*1\s*\]"),
    "the stages walked from the last": re.compile(
        r"\bfor\s*\(\s*size_t\s+i\s*=\s*(?:\w+\s*->\s*)?S\s*;\s*i\s*--\s*>\s*0"),
    "a checkpoint group's steps recomputed": re.compile(r"\bj\s*\+\s*1\s*<\s*(?:\w+->)?(?:E|seg_len)\b"),
    "the trajectories ordered": re.compile(r"\bqsort\s*\(|\bM\s*\[\s*at\s*-\s*1\s*\]"),
}
ANYWHERE_LOOPS = {
    "the stages walked from the last": re.compile(
        r"\bfor\s*\(\s*size_t\s+\w+\s*=\s*(?:\w+\s*->\s*)?(?:S|stages)\s*;\s*\w+\s*--\s*>\s*0"),
    "steps repeated up to a count of steps": re.compile(
        r"\bfor\s*\(\s*long\s+\w+\s*=\s*0\s*;[^;]*<[^;]*\bsteps\b[^;]*;"),
}
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def code_of(path):
    """The file's text, comments replaced by as many newlines as they held (lines kept)."""
    return COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text())


def line_of(code, pos):
    return code.count("\n", 0, pos) + 1


def struct_body(code, name):
    m = re.search(r"typedef\s+struct\s+" + name + r"\s*\{(.*?)\}\s*" + name + r"\s*;", code,
                  re.DOTALL)
    return m.group(1) if m else None


def check_schedule_room(root, hits):
    sources = [p for p in (root / "lib").rglob("*") if p.suffix in (".c", ".h", ".inc")]
    called = set()
    for path in sources:
        code = code_of(path)
        rel = path.relative_to(root).as_posix()
        in_solver = rel.startswith("lib/solver/")
        for m in OP_CALL.finditer(code):
            if not in_solver:
                hits.append(f"{rel}:{line_of(code, m.start())}: a per-step reverse operation "
                            f"called outside lib/solver/: ops->{m.group(1)}")
            elif rel == "lib/solver/reverse_schedule.c":
                called.add(m.group(1))
        for m in SCHEDULE_DEF.finditer(code):
            if not in_solver:
                hits.append(f"{rel}:{line_of(code, m.start())}: the schedule defined outside "
                            "lib/solver/")
    if not (root / "lib/solver/reverse_schedule.c").is_file():
        hits.append("lib/solver/reverse_schedule.c: no such file (the schedule)")
    for op in OPS:
        if op not in called:
            hits.append(f"lib/solver/reverse_schedule.c: never calls ops->{op}")


def check_backend_files(root, hits):
    for rel in BACKEND_FILES:
        path = root / rel
        if not path.is_file():
            hits.append(f"{rel}: no such file (the scan would be empty)")
            continue
        code = code_of(path)
        for what, pattern in STEP_LOOPS.items():
            for m in pattern.finditer(code):
                hits.append(f"{rel}:{line_of(code, m.start())}: {what}: "
                            f"{' '.join(m.group(0).split())}")


def check_no_step_loops(root, hits):
    for path in sorted((root / "lib").rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in (".c", ".h", ".inc") or rel.startswith("lib/solver/"):
            continue
        code = code_of(path)
        for what, pattern in ANYWHERE_LOOPS.items():
            for m in pattern.finditer(code):
                hits.append(f"{rel}:{line_of(code, m.start())}: {what} outside lib/solver/: "
                            f"{' '.join(m.group(0).split())}")


def check_ops_table(root, hits):
    path = root / "lib/backends/backend.h"
    if not path.is_file():
        hits.append("lib/backends/backend.h: no such file")
        return
    code = code_of(path)
    ops = struct_body(code, "cln_backend_ops")
    rev = struct_body(code, "cln_rev_ops")
    if ops is None:
        hits.append("lib/backends/backend.h: no struct cln_backend_ops")
        return
    for m in re.finditer(r"\(\s*\*\s*(\w+)\s*\)\s*\(([^;]*)\)\s*;", ops):
        if re.search(r"\btheta\b", m.group(2)) and "cln_rev_run_fn" not in m.group(2):
            hits.append(f"lib/backends/backend.h: cln_backend_ops.{m.group(1)} writes block sums "
                        "without the schedule (a whole-pass operation)")
    if rev is None:
        hits.append("lib/backends/backend.h: no per-step table cln_rev_ops")
        return
    for m in re.finditer(r"\(\s*\*\s*(\w*vjp\w*)\s*\)\s*\(", ops):
        hits.append(f"lib/backends/backend.h: cln_backend_ops.{m.group(1)}: a bare VJP loop of "
                    "a backend's own (the bare loop is the schedule's step, in lib/solver/)")
    members = set(re.findall(r"\(\s*\*\s*(\w+)\s*\)\s*\(", rev))
    for op in OPS:
        if op not in members:
            hits.append(f"lib/backends/backend.h: cln_rev_ops has no {op}")


TS_RULE_USERS = {"cl/cln_step.h", "lib/solver/tape.c", "lib/solver/solver_save.c"}
TS_RULE_HOME = "cl/cln_layout.h"


def check_ts_rule(root, hits):
    used = set()
    for path in sorted(list((root / "lib").rglob("*")) + list((root / "cl").rglob("*"))):
        if path.suffix not in (".c", ".h", ".inc", ".cl", ".cu"):
            continue
        rel = path.relative_to(root).as_posix()
        code = code_of(path)
        for m in re.finditer(r"\bCLN_TS_BY_END\b", code):
            hits.append(f"{rel}:{line_of(code, m.start())}: CLN_TS_BY_END: the rule's comparison "
                        "outside CLN_TS_STEP_LOOP")
        for m in re.finditer(r"#\s*define\s+CLN_TS_STEP_LOOP\b", code):
            if rel != TS_RULE_HOME:
                hits.append(f"{rel}:{line_of(code, m.start())}: CLN_TS_STEP_LOOP defined again")
        uses = [m for m in re.finditer(r"\bCLN_TS_STEP_LOOP\s*\(", code)
                if not code[:m.start()].rstrip().endswith("define")]
        if uses:
            used.add(rel)
            if rel not in TS_RULE_USERS:
                hits.append(f"{rel}:{line_of(code, uses[0].start())}: the step of a save time "
                            "found again (CLN_TS_STEP_LOOP outside the forward, the tape and the "
                            "count of a trajectory of no step)")
    home = root / TS_RULE_HOME
    if not home.is_file() or not re.search(r"#\s*define\s+CLN_TS_STEP_LOOP\b", code_of(home)):
        hits.append(f"{TS_RULE_HOME}: no CLN_TS_STEP_LOOP (the rule's one statement)")
    for rel in sorted(TS_RULE_USERS - used):
        hits.append(f"{rel}: does not run CLN_TS_STEP_LOOP")
    grad = root / "lib/solver/gradient.c"
    if grad.is_file() and "ts_step" not in code_of(grad):
        hits.append("lib/solver/gradient.c: does not read the tape's recorded steps (ts_step)")


def main():
    root = pathlib.Path(sys.argv[1])
    hits = []
    check_schedule_room(root, hits)
    check_backend_files(root, hits)
    check_no_step_loops(root, hits)
    check_ops_table(root, hits)
    check_ts_rule(root, hits)
    for h in hits:
        print(h)
    print(f"{len(hits)} finding(s)")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
