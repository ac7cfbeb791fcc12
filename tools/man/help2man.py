#!/usr/bin/env python3
"""Writes a tool's man page (roff, man(7) macros) from its --help text.

    help2man.py --tool clnode-solve --exe build/tools/clnode-solve --version 1.0.0 --out FILE

The help text of every clnode tool has one shape, and the page follows it:
  - "usage:" lines                        -> SYNOPSIS
  - the text before the first option      -> DESCRIPTION
  - lines "  --opt ..." or "  -h ..."     -> OPTIONS, one .TP item per option line; the more
                                             indented lines after it continue its description;
                                             other two-space lines are paragraphs of OPTIONS
  - a line at column 0 "Title (...): text" starts a section of its own, named by the words
                                             before its "(" or ":"; ("Exit status ...:" is
                                             EXIT STATUS, "Device strings ...:" DEVICES); the
                                             lines "  0  text" of EXIT STATUS are items
  - SEE ALSO names the other tools and the manual in doc/.
Nothing is invented: every word of the page is the help's, but NAME's summary and SEE ALSO.
"""
import argparse
import re
import subprocess
import sys

SUMMARIES = {
    "clnode-solve": "solve a batch of neural ODEs with adaptive Runge-Kutta methods",
    "clnode-compare": "compare one problem on every device with the host fp64 reference",
    "clnode-devices": "list the devices, their floating-point facts and GEMM probes",
    "clnode-bench": "time the seed problem against the bare GEMMs it contains",
}

OPTION_LINE = re.compile(r"^  (--?[A-Za-z0-9]|-h\b)")
SECTION_LINE = re.compile(r"^([A-Za-z0-9][^(:]*)")


def roff_text(s):
    """One line of text as roff: backslashes, hyphens and a leading '.' or '\'' escaped."""
    s = s.replace("\\", "\\e").replace("-", "\\-")
    if s.startswith((".", "'")):
        s = "\\&" + s
    return s


def section_name(title):
    t = title.strip()
    if t.lower().startswith("exit status"):
        return "EXIT STATUS"
    if t.lower().startswith("device strings"):
        return "DEVICES"
    return t.upper()


def split_help(text):
    """The help text as (synopsis lines, description lines, option lines, [(name, lines)])."""
    lines = text.rstrip("\n").split("\n")
    synopsis, description, options, sections = [], [], [], []
    i = 0
    while i < len(lines) and (lines[i].startswith("usage:") or
                              (synopsis and lines[i].startswith("       "))):
        synopsis.append(lines[i][len("usage:"):].strip() if lines[i].startswith("usage:")
                        else lines[i].strip())
        i += 1
    while i < len(lines) and not OPTION_LINE.match(lines[i]):
        description.append(lines[i])
        i += 1
    while i < len(lines) and not (lines[i] and not lines[i][0].isspace()):
        options.append(lines[i])
        i += 1
    while i < len(lines):
        m = SECTION_LINE.match(lines[i])
        if not m:
            raise SystemExit(f"help2man: line {i + 1} of the help text starts no section: "
                             f"{lines[i]!r}")
        rest = lines[i][m.end(1):].lstrip(":").strip()
        body = [rest] if rest else []
        i += 1
        while i < len(lines) and (not lines[i] or lines[i][0].isspace()):
            body.append(lines[i])
            i += 1
        sections.append((section_name(m.group(1)), body))
    return synopsis, description, options, sections


def paragraphs(lines):
    """Plain lines as roff paragraphs: blank lines separate them."""
    out = []
    for line in lines:
        if not line.strip():
            if out and out[-1] != ".PP":
                out.append(".PP")
        else:
            out.append(roff_text(line.strip()))
    while out and out[-1] == ".PP":
        out.pop()
    return out


def item(term, text):
    out = [".TP", "\\fB" + roff_text(term.strip()) + "\\fR"]
    return out + ([roff_text(text.strip())] if text.strip() else [])


def option_item(body):
    """One option line without its indentation: "TERM  text", where the text may hold a
    second "--opt  text" pair after three or more blanks (--help, -h  this text  --version)."""
    m = re.search(r"\s{2,}", body)
    term, rest = (body[:m.start()], body[m.end():]) if m else (body, "")
    second = re.search(r"\s{3,}(--[A-Za-z].*)$", rest)
    if second:
        return item(term, rest[:second.start()]) + option_item(second.group(1))
    return item(term, rest)


def block_items(lines, is_item, make_item):
    """A block of items and paragraphs: a line for which is_item holds is an item; lines
    indented four or more after an item continue it; any other run of lines is a paragraph."""
    out, state = [], None  # state: "item", "para" or None (after a blank line)
    for line in lines:
        if not line.strip():
            state = None
            continue
        if is_item(line):
            out += make_item(line)
            state = "item"
        elif state == "para" or (state == "item" and line.startswith("    ")):
            out.append(roff_text(line.strip()))
        else:
            out += [".PP", roff_text(line.strip())]
            state = "para"
    return out


def option_items(lines):
    """The option block: "  --opt ARG  text" lines are items."""
    return block_items(lines, lambda l: bool(OPTION_LINE.match(l)),
                       lambda l: option_item(l[2:]))


DEVICE_LINE = re.compile(r"^  ([a-z][a-zA-Z:]*)\s{2,}(.*)$")
STATUS_LINE = re.compile(r"^  (\d+)\s+(.*)$")


def device_items(body):
    """DEVICES: "  spec   text" lines are items."""
    return block_items(body, lambda l: bool(DEVICE_LINE.match(l)),
                       lambda l: item(*DEVICE_LINE.match(l).groups()))


def status_items(body):
    """EXIT STATUS: "  N  text" lines are items."""
    return block_items(body, lambda l: bool(STATUS_LINE.match(l)),
                       lambda l: item(*STATUS_LINE.match(l).groups()))


def man_page(tool, version, help_text):
    synopsis, description, options, sections = split_help(help_text)
    if not synopsis or not options:
        raise SystemExit(f"help2man: {tool} --help has no usage line or no options")
    out = [f'.TH {tool.upper()} 1 "" "clnode {version}" "clnode manual"', ".nh",
           ".SH NAME", roff_text(f"{tool} - {SUMMARIES[tool]}"), ".SH SYNOPSIS"]
    for s in synopsis:
        words = s.split(None, 1)
        out += [".PP" if out[-1] != ".SH SYNOPSIS" else ".br",
                "\\fB" + roff_text(words[0]) + "\\fR" +
                (" " + roff_text(words[1]) if len(words) > 1 else "")]
    out += [".SH DESCRIPTION"] + paragraphs(description)
    out += [".SH OPTIONS"] + option_items(options)
    ordered = [s for s in sections if s[0] not in ("EXIT STATUS",)]
    ordered += [s for s in sections if s[0] == "EXIT STATUS"]
    for name, body in ordered:
        out.append(".SH " + roff_text(name))
        if name == "EXIT STATUS":
            out += status_items(body)
        elif name == "DEVICES":
            out += device_items(body)
        else:
            out += paragraphs(body)
    others = [t for t in SUMMARIES if t != tool]
    out += [".SH SEE ALSO",
            ", ".join(f"\\fB{roff_text(t)}\\fR(1)" for t in others) + ".",
            roff_text("The manual: doc/cli.md in the clnode sources (doc/README.md lists the "
                      "others).")]
    cleaned = []
    for line in out:  # no empty paragraphs: .PP directly before a .SH/.TP/.PP is dropped
        if cleaned and cleaned[-1] == ".PP" and line.startswith((".SH", ".TP", ".PP")):
            cleaned.pop()
        cleaned.append(line)
    return "\n".join(cleaned) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", required=True, choices=sorted(SUMMARIES))
    ap.add_argument("--exe", required=True, help="the built tool, run with --help")
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    r = subprocess.run([a.exe, "--help"], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"help2man: {a.exe} --help exited {r.returncode}: {r.stderr.strip()}")
    page = man_page(a.tool, a.version, r.stdout)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(page)


if __name__ == "__main__":
    main()
