#!/usr/bin/env python3
"""The longest functions under the given folders or files, counted from the first line of the
signature to the last line of the body:
- C, OpenCL C and CUDA (.c .h .cl .cu .inc): a function body opens and closes at column 0
  (clang-format's layout), and a macro runs from its #define to its last continued line;
- Python (.py): every def, at any depth, from its first decorator or `def` line to its last
  line (ast).

    python3 scripts/function_lengths.py lib cl              # TOP=20 for more rows
    python3 scripts/function_lengths.py --max 80 lib cl     # exit 1 when a function is longer
"""
import ast
import os
import pathlib
import re
import sys

C_SUFFIXES = ('.c', '.h', '.cl', '.cu', '.inc')


def c_functions(path, lines):
    """(length, 'path:line', name) of each function body and each macro of a C-like file."""
    rows, start = [], None
    for i, line in enumerate(lines):
        if line.startswith('{') and start is None:
            # the signature: walk back to the line that starts the declaration
            j = i - 1
            while (j > 0 and lines[j - 1].strip()
                   and not lines[j - 1].rstrip().endswith((';', '}', '*/'))
                   and not lines[j - 1].startswith(('#', '/*', ' *'))):
                j -= 1
            m = re.search(r'(\w+)\s*\(', ' '.join(lines[j:i]))
            start = (j, m.group(1) if m else '?')
        elif line.startswith('}') and start is not None:
            rows.append((i - start[0] + 1, f'{path}:{start[0] + 1}', start[1]))
            start = None
    i = 0
    while i < len(lines):
        m = re.match(r'\s*#\s*define\s+(\w+)', lines[i])
        if not m:
            i += 1
            continue
        j = i
        while lines[j].rstrip().endswith('\\') and j + 1 < len(lines):
            j += 1
        rows.append((j - i + 1, f'{path}:{i + 1}', m.group(1) + ' (macro)'))
        i = j + 1
    return rows


def py_functions(path, text):
    """(length, 'path:line', name) of each function and method of a Python file."""
    rows = []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            rows.append((node.end_lineno - first + 1, f'{path}:{first}', node.name))
    return rows


def functions(root):
    p = pathlib.Path(root)
    files = [p] if p.is_file() else sorted(
        f for f in p.rglob('*') if f.suffix in C_SUFFIXES + ('.py',) and f.is_file())
    rows = []
    for f in files:
        text = f.read_text(errors='replace')
        rows += py_functions(f, text) if f.suffix == '.py' else c_functions(f, text.split('\n'))
    return rows


def main(argv):
    limit = None
    if len(argv) > 1 and argv[0] == '--max':
        limit, argv = int(argv[1]), argv[2:]
    rows = sorted((r for root in argv for r in functions(root)), reverse=True)
    n = int(os.environ.get('TOP', '12'))
    for r in rows[:n]:
        print(f'{r[0]:5d}  {r[2]:40s} {r[1]}')
    over = [r for r in rows if limit is not None and r[0] > limit]
    print(f'functions: {len(rows)}, over {limit if limit is not None else 80} lines: '
          f'{len(over) if limit is not None else sum(1 for r in rows if r[0] > 80)}')
    for r in over[n:]:
        print(f'{r[0]:5d}  {r[2]:40s} {r[1]}')
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
