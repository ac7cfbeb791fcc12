#!/usr/bin/env python3
"""The layering of lib/: no file-level circle, and every arrow downwards (doc/layering.md).

    python3 scripts/check_layering.py SOURCE_ROOT BUILD_DIR [-v]

Two graphs over the files of lib/, both checked the same way:

- the symbol graph: file A -> file B when an object compiled from A uses (nm: U) a symbol that
  the object compiled from B defines. Every object of every static library built from lib/
  (BUILD_DIR/compile_commands.json: each entry whose object lies in a lib/*.a.p folder) is read,
  so host_math and host_act are covered as well as libclnode_internal. A lib/ source file
  without an object fails the check, unless the backend or part it belongs to is not in this
  build (its CLNODE_HAVE_* define is absent from every lib/ compile command): then only its
  includes are checked.
- the include graph: file A -> file B when A (any .c, .h or .inc under lib/) has a quoted
  #include that resolves to B under lib/ (beside A first, then from lib/, as the compiler's -I
  does). Headers of include/ and cl/ are below every room and are not followed.

The check fails, naming the files, on any circle (strongly connected component of more than one
file) in either graph, and on any arrow that goes upwards: from a room to a room above it, naming
the arrow and the symbols or the #include behind it. Arrows inside a room are allowed (a room's
files may use each other, without circles).

The rooms, bottom to top (a room may use the rooms below it, never those above):

    room       folders            what it holds
    core       lib/core/          status codes, names, version, logging, errors, struct sizes
    backends   lib/backends/      the ops table, registry, devices, contexts (a context is an
                                  opened backend), bench, host, OpenCL, CUDA, the layer loop
    precision  lib/precision/     the GEMM probes and the probe cache across processes
    model      lib/model/         MLPs and safetensors (evaluated on the host through host_math)
    solver     lib/solver/        methods, options, the driver, the public context constructors
                                  (open a backend, then read its stored probe results)
    analysis   lib/analysis/      the sensitivity baseline and the certificate (run the driver)
    mpi        lib/mpi/           one batch across MPI ranks (runs the driver per rank)

Two placements that the folder names alone do not say:
- contexts live in backends, not core: creating and destroying one opens and closes a backend
  through its ops table, and core knows nothing of backends.
- the public context constructors (clnode_context_create, clnode_context_create_opencl) live in
  solver/ (lib/solver/context.c): a context reads its device's stored probe results when it is
  created, so that a solve's first probe lookup reads no file, and that is a precision call,
  which only a room above precision may make.

Generated sources (built from lib/meson.build's custom targets) take the room of what they hold:
GENERATED below.

A third check: no callback over a backend besides the tables. A function pointer whose first
parameter is a backend (cln_backend *) may stand only in the ops table (cln_backend_ops,
backend.h) and the device backends' launch table (cln_dev_launch, device/device_proto.h); one
anywhere else (a parameter, a typedef, a struct field) is how a backend would call back into a
loop that lives outside it, so the check fails naming the file and the line.

Exit status: 0 when the layering holds, 1 when it does not, 2 on a usage or
build error (no compile_commands.json, nm missing).
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys

ROOMS = ['core', 'backends', 'precision', 'model', 'solver', 'analysis', 'mpi']
RANK = {r: i for i, r in enumerate(ROOMS)}

# The generated sources of lib/meson.build and their rooms: the seed model's bytes belong to the
# model, the embedded kernel sources to the OpenCL and CUDA backends.
GENERATED = {
    'seed_model.c': 'model',
    'clnode_kernels.c': 'backends',
    'clnode_cuda_kernels.c': 'backends',
}

# Parts of lib/ that a build may leave out, and the define their objects are compiled with.
OPTIONAL = {
    'lib/backends/opencl/': 'CLNODE_HAVE_OPENCL',
    'lib/backends/cuda/': 'CLNODE_HAVE_CUDA',
    'lib/mpi/': 'CLNODE_HAVE_MPI',
}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def die(msg):
    """A usage or build error: exit status 2."""
    print('check_layering: ' + msg, file=sys.stderr)
    sys.exit(2)


def room_of(path):
    """The room of a file named relative to the source root (lib/ROOM/...)."""
    parts = path.split('/')
    if len(parts) >= 3 and parts[0] == 'lib' and parts[1] in RANK:
        return parts[1]
    if len(parts) == 2 and parts[0] == '@generated' and parts[1] in GENERATED:
        return GENERATED[parts[1]]
    return None


def lib_files(src, exts):
    out = []
    for dirpath, _, names in os.walk(os.path.join(src, 'lib')):
        for n in names:
            if n.endswith(exts):
                out.append(os.path.relpath(os.path.join(dirpath, n), src))
    return sorted(out)


def objects(src, build):
    """{source file: [object paths]} for every lib/ object of a static library, and the set of
    defines seen on lib/ compile commands."""
    db_path = os.path.join(build, 'compile_commands.json')
    try:
        with open(db_path) as f:
            db = json.load(f)
    except OSError as e:
        die(f'cannot read {db_path}: {e.strerror} (run meson setup first)')
    objs, defines = collections.defaultdict(list), set()
    for e in db:
        out = e['output']
        folder = out.split('/')[1] if out.count('/') >= 2 else ''
        if not (out.startswith('lib/') and folder.endswith('.a.p')):
            continue
        cmd = e.get('command') or ' '.join(e.get('arguments', []))
        defines.update(re.findall(r'-D(CLNODE_HAVE_\w+)', cmd))
        path = os.path.normpath(os.path.join(e['directory'], e['file']))
        if path.startswith(build + os.sep) or not path.startswith(src + os.sep):
            rel = '@generated/' + os.path.basename(path)  # a custom target's output
        else:
            rel = os.path.relpath(path, src)
        objs[rel].append(os.path.join(build, out))
    return objs, defines


def symbol_graph(objs):
    """{file: {file: set(symbols)}} from the objects' symbol tables."""
    nm = os.environ.get('NM') or shutil.which('nm')
    if not nm:
        die('nm not found (set NM)')
    defs, uses = {}, collections.defaultdict(set)
    for src_file, paths in objs.items():
        for o in paths:
            if not os.path.exists(o):
                die(f'{o} (of {src_file}) is not built: run ninja first')
            res = subprocess.run([nm, o], capture_output=True, text=True)
            if res.returncode != 0:
                die(f'nm {o} failed: {res.stderr.strip()}')
            for line in res.stdout.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in 'TDRBCGSVW':
                    defs[parts[2]] = src_file
                elif len(parts) == 2 and parts[0] == 'U':
                    uses[src_file].add(parts[1])
    graph = {f: collections.defaultdict(set) for f in objs}
    for f, syms in uses.items():
        for s in syms:
            d = defs.get(s)
            if d and d != f:
                graph[f][d].add(s)
    return graph


def include_graph(src):
    """{file: {file: set(["#include ..."])}} over lib/'s .c, .h and .inc files."""
    files = lib_files(src, ('.c', '.h', '.inc'))
    graph = {f: collections.defaultdict(set) for f in files}
    for f in files:
        with open(os.path.join(src, f), encoding='utf-8') as fh:
            text = fh.read()
        for name in INCLUDE_RE.findall(text):
            for base in (os.path.dirname(f), 'lib'):
                target = os.path.normpath(os.path.join(base, name))
                if target in graph:
                    if target != f:
                        graph[f][target].add(f'#include "{name}"')
                    break
    return graph


def sccs(graph):
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def one_circle(graph, comp):
    """A shortest circle through the component's first file, as a list of files."""
    start, members = comp[0], set(comp)
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def check(name, graph, verbose):
    errors = []
    for comp in sccs(graph):
        circle = one_circle(graph, comp)
        steps = []
        for a, b in zip(circle, circle[1:]):
            steps.append(f'  {a} -> {b} ({", ".join(sorted(graph[a][b]))})')
        errors.append(f'circle in the {name} graph: {" -> ".join(circle)}\n' + '\n'.join(steps) +
                      f'\n  (the circle\'s files: {", ".join(comp)})')
    for a in sorted(graph):
        for b in sorted(graph[a]):
            ra, rb = room_of(a), room_of(b)
            if ra is None or rb is None:
                errors.append(f'{name} graph: {a} -> {b}: a file in no room ({ROOMS})')
            elif RANK[rb] > RANK[ra]:
                errors.append(f'forbidden arrow {ra} -> {rb} in the {name} graph: {a} -> {b} '
                              f'({", ".join(sorted(graph[a][b]))})')
            if verbose:
                print(f'{name}: {a} -> {b}: {", ".join(sorted(graph[a][b]))}')
    return errors


# The structs whose fields may be callbacks over a backend (the tables themselves).
TABLES = ('cln_backend_ops', 'cln_dev_launch')
BACKEND_CALLBACK_RE = re.compile(r'\(\s*\*\s*(\w+)\s*\)\s*\(\s*(?:const\s+)?cln_backend\s*\*')


def backend_callbacks(src):
    """Callbacks over a backend outside the tables: 'file:line: name' each."""
    out = []
    for f in lib_files(src, ('.c', '.h', '.inc')):
        with open(os.path.join(src, f), encoding='utf-8') as fh:
            text = fh.read()
        # blank out comments and the tables' bodies, keeping the line numbers
        text = re.sub(r'/\*.*?\*/|//[^\n]*', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text,
                      flags=re.S)
        for t in TABLES:
            text = re.sub(r'struct\s+%s\s*\{.*?\}' % t,
                          lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)
        for m in BACKEND_CALLBACK_RE.finditer(text):
            line = text.count('\n', 0, m.start()) + 1
            out.append(f'{f}:{line}: callback {m.group(1)} over a backend outside the ops table')
    return out


def main(argv):
    verbose = '-v' in argv
    args = [a for a in argv[1:] if a != '-v']
    if len(args) != 2:
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    src, build = (os.path.abspath(a) for a in args)
    objs, defines = objects(src, build)
    errors = []
    for f in lib_files(src, ('.c',)):
        if f in objs:
            continue
        optional = [d for p, d in OPTIONAL.items() if f.startswith(p)]
        if optional and optional[0] not in defines:
            print(f'check_layering: {f} not in this build ({optional[0]} off): includes only')
            continue
        errors.append(f'{f} has no object in any static library of {build}/lib')
    for f in objs:
        if room_of(f) is None:
            errors.append(f'{f}: an object in no room (add it to GENERATED or a lib/ROOM folder)')
    sym = symbol_graph(objs)
    inc = include_graph(src)
    errors += check('symbol', sym, verbose)
    errors += check('include', inc, verbose)
    errors += backend_callbacks(src)
    libs = sorted({o.split('/lib/')[-1].split('/')[0] for ps in objs.values() for o in ps})
    print(f'check_layering: {sum(len(p) for p in objs.values())} objects of {len(objs)} files in '
          f'{", ".join(libs)}; {len(inc)} files in the include graph; rooms '
          f'{" < ".join(ROOMS)}')
    for e in errors:
        print('FAIL: ' + e)
    print('check_layering: ' + (f'{len(errors)} errors' if errors else 'the layering holds'))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
