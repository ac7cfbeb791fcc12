#!/usr/bin/env python3
"""test_meson_subtrees.py - no meson.build names a file outside its own subtree: every relative
path in a meson.build (a quoted string or a files()/include_directories() argument) that climbs out
of the folder holding that meson.build with '..' must land in one of the shared rooms: include/
(the public headers), cl/ (the device arithmetic and its embed step) or scripts/ (not compiled).
So lib/, tools/, bench/ and tests/ do not compile each other's sources: a folder that needs
another's code links the library that folder builds (tests link tools/arrays' clnode_arrays).

usage: test_meson_subtrees.py SOURCE_ROOT
Prints each offending path as FILE:LINE: 'PATH' -> WHERE, and exits 1 if there is one."""
import os
import re
import sys

SHARED = ("include", "cl", "scripts")
# a quoted string holding a path segment '..' (meson strings are '...' only)
QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


def meson_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("subprojects",)
                   and not os.path.exists(os.path.join(d, x, "meson-private"))]
        if "meson.build" in files:
            yield os.path.join(d, "meson.build")


def strip_comment(line):
    """The line without its '#' comment (a '#' inside a quoted string is kept)."""
    out, quoted = [], False
    for ch in line:
        if ch == "'":
            quoted = not quoted
        elif ch == "#" and not quoted:
            break
        out.append(ch)
    return "".join(out)


def offences(root):
    root = os.path.realpath(root)
    found = []
    for path in sorted(meson_files(root)):
        here = os.path.dirname(os.path.realpath(path))
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                for m in QUOTED.finditer(strip_comment(line)):
                    s = m.group(1)
                    if ".." not in s.split("/"):
                        continue
                    target = os.path.normpath(os.path.join(here, s))
                    if target == here or target.startswith(here + os.sep):
                        continue
                    rel = os.path.relpath(target, root)
                    top = rel.split(os.sep)[0]
                    if top in SHARED and not rel.startswith(".."):
                        continue
                    found.append("%s:%d: '%s' -> %s" % (os.path.relpath(path, root), lineno, s,
                                                        rel))
    return found


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__.split("\n\n")[-1] + "\n")
        return 2
    bad = offences(sys.argv[1])
    for b in bad:
        print(b)
    if bad:
        print("meson subtrees: FAIL: %d path(s) outside their meson.build's subtree (allowed: %s)"
              % (len(bad), ", ".join(s + "/" for s in SHARED)))
        return 1
    print("meson subtrees: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
