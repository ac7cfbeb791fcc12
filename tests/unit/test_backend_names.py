#!/usr/bin/env python3
"""The driver and the benchmarks never ask which backend they run on: what differs between
backends (the tf32 kind of the GEMM, the bare VJP loop and its ordered GEMM) comes from the ops
table (lib/backends/backend.h), not from a backend's name.

Scans the driver (lib/solver/*.c, *.h) and the benchmarks' library code (lib/backends/bench.c,
lib/solver/bench.c), comments left out, for a string comparison (strcmp, strncmp,
strcasecmp, strncasecmp, memcmp) whose arguments name a backend: a literal "host", "opencl",
"cuda", "openblas" or "ordered" (alone or as the start of a device string), or the fields that
carry a backend's identity (ops->name, the tape's backend, cache_id, device_name). Fails on any
hit, printing it; also fails when a scanned file is missing (so that the scan cannot go empty).

usage: test_backend_names.py SOURCE_ROOT
"""
import pathlib
import re
import sys

GLOBS = ["lib/solver/*.c", "lib/solver/*.h", "lib/backends/bench.c"]
COMPARE = re.compile(r"\b(strn?cmp|strn?casecmp|memcmp)\s*\(")
NAME = re.compile(r'"(host|opencl|cuda|openblas|ordered)\b|ops\s*->\s*name\b|->\s*backend\b'
                  r"|\bcache_id\b|\bdevice_name\b")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def call_text(code, start):
    """The text of the call whose opening parenthesis is at `start`, up to its closing one."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] == "(":
            depth += 1
        elif code[i] == ")":
            depth -= 1
            if depth == 0:
                return code[start:i + 1]
    return code[start:]


def blank_comments(text):
    """Comments replaced by as many newlines as they held (line numbers kept)."""
    return COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def scan(root):
    hits, files = [], []
    for g in GLOBS:
        found = sorted(root.glob(g))
        if not found:
            hits.append(f"{g}: no such file (the scan would be empty)")
        files += found
    for path in files:
        code = blank_comments(path.read_text())
        for m in COMPARE.finditer(code):
            call = call_text(code, m.end() - 1)
            if NAME.search(call):
                line = code.count("\n", 0, m.start()) + 1
                hits.append(f"{path.relative_to(root)}:{line}: {m.group(1)}{' '.join(call.split())}")
    return hits


def main():
    root = pathlib.Path(sys.argv[1])
    hits = scan(root)
    for h in hits:
        print("a backend asked for by name:", h)
    if hits:
        print("ask the ops table (lib/backends/backend.h) for the capability instead")
        return 1
    print(f"no backend name compared in {', '.join(GLOBS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
