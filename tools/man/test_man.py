#!/usr/bin/env python3
"""The man pages render cleanly and say everything --help says about the options.

    test_man.py GROFF TOOL PAGE [TOOL PAGE ...]

For each built tool and its generated page:
  - `groff -man -Tutf8 -ww -z PAGE` exits 0 and warns about nothing;
  - the sections NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXIT STATUS and SEE ALSO are present,
    and no section is empty (each holds text, not only macros);
  - every option the tool's --help names (--word, -h) appears in the rendered page.
"""
import re
import shutil
import subprocess
import sys

REQUIRED = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "SEE ALSO"]
OPTION = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9-]*|-h)(?![\w-])")


def sections(roff):
    """{section name: its non-macro lines}, in order, from the .SH lines."""
    out, name = {}, None
    for line in roff.split("\n"):
        if line.startswith(".SH "):
            name = line[4:].strip().strip('"').replace("\\-", "-")
            if name in out:
                raise AssertionError(f"section {name} appears twice")
            out[name] = []
        elif name is not None and line.strip() and not re.match(r"^\.[A-Za-z]+\s*$", line):
            out[name].append(line)
    return out


def check(groff, tool, page):
    problems = []
    r = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", page],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0 or r.stderr.strip():
        problems.append(f"groff -ww exited {r.returncode} with: {r.stderr.strip()}")
    with open(page, encoding="utf-8") as f:
        secs = sections(f.read())
    for name in REQUIRED:
        if name not in secs:
            problems.append(f"no {name} section")
    for name, lines in secs.items():
        if not lines:
            problems.append(f"section {name} is empty")
    text = subprocess.run([groff, "-man", "-Tutf8", "-P-cbou", page], capture_output=True,
                          text=True, check=True).stdout
    text = text.replace("\u2010", "-").replace("\u2212", "-")
    in_page = set(OPTION.findall(text))
    help_text = subprocess.run([tool, "--help"], capture_output=True, text=True,
                               check=True).stdout
    for opt in sorted(set(OPTION.findall(help_text))):
        if opt not in in_page:
            problems.append(f"option {opt} of --help is not in the page")
    return problems


def main():
    if len(sys.argv) < 4 or len(sys.argv) % 2:
        sys.exit("usage: test_man.py GROFF TOOL PAGE [TOOL PAGE ...]")
    groff = shutil.which(sys.argv[1])
    if groff is None:
        sys.exit(f"test_man.py: {sys.argv[1]} not found: install groff-base (Debian)")
    failed = False
    for tool, page in zip(sys.argv[2::2], sys.argv[3::2]):
        problems = check(groff, tool, page)
        for p in problems:
            print(f"{page}: {p}")
        failed |= bool(problems)
        if not problems:
            print(f"{page}: renders without warnings, every section filled, every option")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
