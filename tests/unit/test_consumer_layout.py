#!/usr/bin/env python3
"""No consumer of the library lays out saved points itself: the layout (the slots T, the order,
the padding with infinities) is the library's (lib/solver/layout.c, clnode/solver.h).

Scans the consumers' code (python/clnode/*.py, python/clnode/jax/*.py and *.c,
tools/clnode-solve/*.c, tools/common/*.c; comments and docstrings left out, string literals
kept) for
  - any spelling of infinity: INFINITY, HUGE_VAL*, __builtin_inf*, inf/infinity/Inf as a word
    (np.inf, math.inf, jnp.inf, float("inf"), a bare `inf`), numpy's PINF/NINF/infty, and
    decimal literals that overflow to infinity (1e999);
  - slot counting: a save flag (save_t0, save_t1, save_steps) or the number of save times
    (n_save_ts, n_ts) in a sum;
and fails on any hit that is not in ALLOWED below, each entry with its reason. An entry that no
longer matches anything fails too, so that the list stays exact.

usage: test_consumer_layout.py SOURCE_ROOT
"""
import io
import pathlib
import re
import sys
import tokenize

GLOBS = ["python/clnode/*.py", "python/clnode/jax/*.py", "python/clnode/*.c",
         "tools/clnode-solve/*.c", "tools/common/*.c"]

INFINITY = re.compile(r"\binf(inity)?\b|HUGE_VAL[FL]?\b|__builtin_inf|\b(PINF|NINF|infty)\b"
                      r"|\b\d+(\.\d*)?[eE]\+?[3-9]\d\d\b", re.IGNORECASE)
SAVE = r"(\bsave_(t0|t1|steps)\b|\bn_save_ts\b|\bn_ts\b)"
SLOTS = re.compile(SAVE + r"[^;=\n]*\+(?!=)|\+(?!\+)[^;=\n]*" + SAVE)

# (file, text of the code line, stripped) -> why it is not a layout
ALLOWED = {
    ("tools/common/tool_common.c", 'return strcpy(buf, x > 0 ? "inf" : "-inf");'):
        "how the text outputs print an infinite value",
    ("tools/common/tool_problem.c",
     '"  none of its tokens is a number - nan and inf are numbers - or when it is exactly\\n"'):
        "--help text of the CSV reader: inf is a number it reads",
    ("tools/common/tool_problem.c",
     "double *all = tool_mul_size(pb->n_ts + n, sizeof(double), &bytes) && pb->n_ts + n >= n"):
        "--save ts:... parsing: a repeated option appends its times to the list",
    ("tools/common/tool_problem.c", "memcpy(all + pb->n_ts, more, n * sizeof(double));"):
        "--save ts:... parsing: the appended times after the earlier ones",
    ("tools/common/tool_problem.c", 'char lo[40] = "-inf", hi[40] = "inf";'):
        "--help text of an option's range: an unbounded end of the option table's range",
    ("tools/clnode-solve/main.c",
     '"  in time order, where the trajectory stopped (t1, not with steps), then +inf (a\\n"'):
        "--help text describing the library's padding",
}


def strip_c(text):
    """C code with its comments blanked (newlines kept), string and char literals kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_py(text):
    """Python code with its comments and docstrings (string statements) blanked."""
    lines = text.splitlines(keepends=True)
    blank = []  # ((row, col), (row, col)) ranges to blank
    prev = tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            blank.append((tok.start, tok.end))
        elif tok.type == tokenize.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT,
                                                       tokenize.DEDENT, tokenize.NL):
            blank.append((tok.start, tok.end))
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            prev = tok.type
    for (r0, c0), (r1, c1) in blank:
        for r in range(r0, r1 + 1):
            s = lines[r - 1]
            a = c0 if r == r0 else 0
            b = c1 if r == r1 else len(s.rstrip("\n"))
            lines[r - 1] = s[:a] + " " * (b - a) + s[b:]
    return "".join(lines)


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = pathlib.Path(argv[0])
    hits, used = [], set()
    for g in GLOBS:
        for path in sorted(root.glob(g)):
            rel = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8")
            code = strip_py(text) if path.suffix == ".py" else strip_c(text)
            for no, line in enumerate(code.splitlines(), 1):
                kinds = [k for k, rx in (("infinity", INFINITY), ("slot counting", SLOTS))
                         if rx.search(line)]
                if not kinds:
                    continue
                key = (rel, line.strip())
                if key in ALLOWED:
                    used.add(key)
                else:
                    hits.append("%s:%d: %s: %s" % (rel, no, " and ".join(kinds), line.strip()))
    stale = [k for k in ALLOWED if k not in used]
    for h in hits:
        print("the layout of saved points is the library's (clnode_solution_rows, "
              "clnode_save_slots); not here: " + h)
    for k in stale:
        print("allowlist entry that matches nothing (remove it): %s: %s" % k)
    if not hits and not stale:
        print("ok: %d consumer files, %d allowed lines" % (
            sum(len(list(root.glob(g))) for g in GLOBS), len(ALLOWED)))
    return 1 if hits or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
