#!/usr/bin/env python3
"""The layering check (scripts/check_layering.py) holds each rule of the map (doc/layering.md).

Copies the map and the C sources of include/, cl/, lib/ and tools/ into a temporary tree, checks
that the copy passes (sources only: the symbol graph needs the build's objects and is the
`layering` test's), then plants one violation of each rule in a fresh copy and checks that the
check fails with a message naming it:
  - an #include upwards (core includes a solver header), and a circle of #includes in a room;
  - a function declared in a backends header and defined in solver; a public type laid out in
    a room below its header's;
  - the tools: arrays includes common's header, one tool includes another tool's header;
  - a C source in a folder that no room covers, a public header missing from the map, and one
    missing from the build's list (include/meson.build);
  - a callback over a backend outside the ops table.

usage: test_layering_rules.py SOURCE_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

FOLDERS = ('include', 'cl', 'lib', 'tools')


def copy_tree(src, dst):
    os.makedirs(os.path.join(dst, 'doc'))
    shutil.copy(os.path.join(src, 'doc', 'layering.md'), os.path.join(dst, 'doc'))
    for d in FOLDERS:
        shutil.copytree(os.path.join(src, d), os.path.join(dst, d),
                        ignore=shutil.ignore_patterns('*.safetensors', '*.py', '*.md'))
    shutil.copy(os.path.join(src, 'include', 'meson.build'), os.path.join(dst, 'include'))


def append(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, 'a', encoding='utf-8') as f:
        f.write('\n' + text + '\n')


def run_check(script, root):
    res = subprocess.run([sys.executable, script, root], capture_output=True, text=True)
    return res.returncode, res.stdout + res.stderr


# (what, the files to add to (path, text), the text the failure must hold)
PLANTS = [
    ('an #include upwards', [('lib/core/context.c', '#include "solver/tape.h"')],
     'FAIL: forbidden arrow core -> solver in the include graph: lib/core/context.c -> '
     'lib/solver/tape.h (#include "solver/tape.h")'),
    ('a circle of #includes', [('lib/model/planted_a.h', '#include "planted_b.h"'),
                               ('lib/model/planted_b.h', '#include "planted_a.h"')],
     'FAIL: circle in the include graph: lib/model/planted_a.h -> lib/model/planted_b.h -> '
     'lib/model/planted_a.h'),
    ('a declaration defined above its room',
     [('lib/backends/backend.h', 'int cln_planted(void);'),
      ('lib/solver/method.c', 'int cln_planted(void)\n{\n    return 0;\n}')],
     'cln_planted is declared in room backends and defined in lib/solver/method.c (room solver, '
     'not backends or below)'),
    ('a public type laid out below its room',
     [('lib/backends/planted.h', 'struct clnode_gradient {\n    int x;\n};')],
     'FAIL: struct clnode_gradient (declared in include/clnode/gradient.h, room solver) is laid '
     'out in lib/backends/planted.h, room backends'),
    ('arrays using common', [('tools/arrays/npz.c', '#include "tool_common.h"')],
     'FAIL: forbidden arrow arrays -> common in the include graph: tools/arrays/npz.c -> '
     'tools/common/tool_common.h'),
    ('a tool using another tool', [('tools/clnode-devices/main.c', '#include "../clnode-solve/args.h"')],
     'FAIL: forbidden arrow clnode-devices -> clnode-solve in the include graph: '
     'tools/clnode-devices/main.c -> tools/clnode-solve/args.h'),
    ('a folder of no room', [('lib/planted/planted.c', 'int cln_planted_x;')],
     'FAIL: lib/planted/planted.c: in no room of doc/layering.md'),
    ('a public header not in the map', [('include/clnode/planted.h', '/* planted */')],
     "FAIL: include/clnode/planted.h: a public header not in doc/layering.md's public block"),
    ('a public header not in the build\'s list',
     [('include/clnode/planted.h', '/* planted */'),
      ('doc/layering.md', '```public\nclnode/planted.h  core\n```')],
     "FAIL: include/clnode/planted.h: not in include/meson.build's public_headers"),
    ('a callback over a backend', [('lib/solver/method.c', 'typedef int (*cln_planted_fn)(cln_backend *be);')],
     'callback cln_planted_fn over a backend outside the ops table'),
]


def main():
    if len(sys.argv) != 2:
        print(__doc__.split('\n\n')[-1], file=sys.stderr)
        return 2
    src = os.path.abspath(sys.argv[1])
    script = os.path.join(src, 'scripts', 'check_layering.py')
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, 'clean')
        copy_tree(src, clean)
        rc, out = run_check(script, clean)
        if rc != 0 or 'the layering holds' not in out:
            print(f'FAIL: the tree itself does not pass (exit {rc}):\n{out}')
            failures += 1
        else:
            print('ok: the tree passes')
        for k, (what, plants, want) in enumerate(PLANTS):
            root = os.path.join(tmp, f'plant{k}')
            shutil.copytree(clean, root)
            for path, text in plants:
                append(root, path, text)
            rc, out = run_check(script, root)
            if rc == 1 and want in out:
                print(f'ok: {what} fails the check')
            else:
                print(f'FAIL: {what}: exit {rc}, expected 1 and "{want}" in:\n{out}')
                failures += 1
            shutil.rmtree(root)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
