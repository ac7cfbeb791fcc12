#!/usr/bin/env python3
"""The longest C functions under the given folders or files (lines from the signature to the closing
brace; clang-format's layout: a body opens and closes at column 0).

    python3 tools/function_lengths.py lib cl        # TOP=20 for more rows
"""
import re, sys, pathlib
rows = []
for root in sys.argv[1:]:
    p = pathlib.Path(root)
    files = [p] if p.is_file() else sorted(f for f in p.rglob('*') if f.suffix in ('.c', '.h', '.cl', '.cu', '.inc'))
    for f in files:
        lines = f.read_text(errors='replace').split('\n')
        start = None
        for i, l in enumerate(lines):
            if l.startswith('{') and start is None:
                # the signature: walk back to the line that starts the declaration
                j = i - 1
                while j > 0 and lines[j - 1].strip() and not lines[j - 1].rstrip().endswith((';', '}', '*/')) and not lines[j-1].startswith(('#', '/*', ' *')):
                    j -= 1
                m = re.search(r'(\w+)\s*\(', ' '.join(lines[j:i]))
                start = (i, m.group(1) if m else '?', j)
            elif l.startswith('}') and start is not None:
                rows.append((i - start[2] + 1, f'{f}:{start[2]+1}', start[1]))
                start = None
rows.sort(reverse=True)
n = int(__import__('os').environ.get('TOP', '12'))
for r in rows[:n]:
    print(f'{r[0]:5d}  {r[2]:32s} {r[1]}')
print(f'functions: {len(rows)}, over 80 lines: {sum(1 for r in rows if r[0] > 80)}')
