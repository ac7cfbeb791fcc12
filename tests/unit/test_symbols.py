#!/usr/bin/env python3
"""test_symbols.py - the symbols libclnode.so exports are the public API and nothing else: every
defined dynamic symbol is named clnode_*, and the list (name and kind, function or data) equals
the committed tests/data/exported-symbols.txt, so that a change of the ABI shows in review.

    test_symbols.py LIBCLNODE.so LIST [--write]

--write: writes the library's list to LIST (after a deliberate change of the API). Exit status 0
when both checks pass, 1 otherwise.
"""
import subprocess
import sys

KINDS = {"T": "function", "i": "function", "D": "data", "B": "data", "R": "data", "V": "data"}


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    rows = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] in ("A",):  # absolute symbols: version nodes
            continue
        rows.add("%s %s" % (parts[2], KINDS.get(parts[1], "other:" + parts[1])))
    return sorted(rows)


def main(argv):
    lib, path = argv[0], argv[1]
    rows = exported(lib)
    if "--write" in argv:
        with open(path, "w") as f:
            f.write("".join(r + "\n" for r in rows))
        print("wrote %d symbols to %s" % (len(rows), path))
        return 0
    ok = True
    foreign = [r for r in rows if not r.startswith("clnode_")]
    if foreign:
        ok = False
        print("FAIL: exported symbols outside the API (not clnode_*):\n  " + "\n  ".join(foreign))
    with open(path) as f:
        want = [l.strip() for l in f if l.strip()]
    added = sorted(set(rows) - set(want))
    removed = sorted(set(want) - set(rows))
    if added or removed:
        ok = False
        print("FAIL: the exported symbols differ from %s" % path)
        for r in added:
            print("  + " + r)
        for r in removed:
            print("  - " + r)
        print("after a deliberate change of the API: tests/unit/test_symbols.py %s %s --write"
              % (lib, path))
    if ok:
        print("ok: %d exported symbols, all clnode_*, as listed in %s" % (len(rows), path))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
