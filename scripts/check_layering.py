#!/usr/bin/env python3
"""The layering of the C sources: the rooms of doc/layering.md, every arrow downwards.

    python3 scripts/check_layering.py SOURCE_ROOT [BUILD_DIR] [-v]

The rooms, their files and what each may use are read from the map, doc/layering.md (its
`rooms`, `public` and `exempt` blocks); the rules are the map's ("The rules the check holds").
Without BUILD_DIR only the sources are read: the symbol graph and the objects' definitions are
left out (the declarations are then matched with the bodies found in the sources).

Exit status: 0 when the layering holds, 1 when it does not, 2 on a usage or build error (a map
without its blocks, no compile_commands.json, nm missing).
"""
import collections
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys

MAP = 'doc/layering.md'
# The C sources of the map's folders: every one lies in a room.
C_SUFFIXES = ('.c', '.h', '.inc', '.cl', '.cu', '.h.in')
COVERED = ('include/', 'cl/', 'lib/', 'tools/')
# Parts of lib/ that a build may leave out, and the define their objects are compiled with.
OPTIONAL = {
    'lib/backends/opencl/': 'CLNODE_HAVE_OPENCL',
    'lib/backends/cuda/': 'CLNODE_HAVE_CUDA',
    'lib/mpi/': 'CLNODE_HAVE_MPI',
}
# Where a quoted #include is looked for after the including file's folder (the build's -I).
SEARCH = {
    'lib': ['lib', 'include', 'cl'],
    'cl': ['include'],
    'include': ['include'],
    'tools': ['tools/common', 'tools/arrays', 'include'],
}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def die(msg):
    """A usage or build error: exit status 2."""
    print('check_layering: ' + msg, file=sys.stderr)
    sys.exit(2)


def fenced(text, name):
    """The lines of the map's fenced blocks ```name, comments and blank lines dropped."""
    blocks = re.findall(r'^```%s\s*\n(.*?)^```' % re.escape(name), text, re.M | re.S)
    if not blocks:
        die(f'{MAP} has no ```{name} block')
    rows = []
    for line in '\n'.join(blocks).splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            rows.append(line.split())
    return rows


def glob_re(pattern):
    """A file pattern as a regular expression: ** any path, * any name part; the text of the
    first * is group 1."""
    out, i = '', 0
    while i < len(pattern):
        if pattern.startswith('**', i):
            out += '.*'
            i += 2
        elif pattern[i] == '*':
            out += '([^/]*)'
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + '$')


class Map:
    """The rooms of doc/layering.md: rows (name, uses, patterns), bottom to top. A room name with
    a * is one room per folder its first pattern's * matches (the tools), peers of each other."""

    def __init__(self, src):
        path = os.path.join(src, MAP)
        try:
            with open(path, encoding='utf-8') as f:
                text = f.read()
        except OSError as e:
            die(f'cannot read {path}: {e.strerror}')
        self.rows = []
        for r in fenced(text, 'rooms'):
            if len(r) < 3:
                die(f'{MAP}: a room needs a name, what it may use and its files: {" ".join(r)}')
            uses = [] if r[1] == '-' else r[1].split(',')
            self.rows.append((r[0], uses, [glob_re(p) for p in r[2:]], r[2:]))
        names = [r[0] for r in self.rows]
        for name, uses, _, _ in self.rows:
            for u in uses:
                if u not in names[:names.index(name)]:
                    die(f'{MAP}: room {name} may use {u}, which is not a room below it')
        self.public = {}
        self.type_room = {}
        for r in fenced(text, 'public'):
            self.public['include/' + r[0]] = r[1]
            for t in r[2:]:
                typ, _, room = t.partition(':')
                self.type_room[typ] = room
        self.exempt = {(r[0], r[1]): ' '.join(r[2:]) for r in fenced(text, 'exempt')}
        self._below = {}

    def room_of(self, path):
        """The room of a file named from the source root (a generated source as generated:NAME),
        or None."""
        for name, _, regs, _ in self.rows:
            for rx in regs:
                m = rx.match(path)
                if m:
                    return name.replace('*', m.group(1)) if '*' in name else name
        return None

    def row(self, room):
        for r in self.rows:
            if r[0] == room or ('*' in r[0] and fnmatch.fnmatchcase(room, r[0])):
                return r
        return None

    def below(self, room):
        """The rooms `room` may use, directly or through the rooms it uses."""
        if room not in self._below:
            out, todo = set(), list(self.row(room)[1])
            while todo:
                u = todo.pop()
                if u not in out:
                    out.add(u)
                    todo += self.row(u)[1]
            self._below[room] = out
        return self._below[room]

    def may_use(self, a, b):
        return a == b or b in self.below(a)

    def order(self):
        return ' < '.join(r[0] for r in self.rows)


def source_files(src):
    """Every C source of the map's folders, named from the source root."""
    out = []
    for top in COVERED:
        for dirpath, dirs, names in os.walk(os.path.join(src, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
            for n in names:
                if n.endswith(C_SUFFIXES):
                    out.append(os.path.relpath(os.path.join(dirpath, n), src))
    return sorted(out)


def read(src, f):
    with open(os.path.join(src, f), encoding='utf-8', errors='replace') as fh:
        return fh.read()


def compile_db(build):
    db_path = os.path.join(build, 'compile_commands.json')
    try:
        with open(db_path) as f:
            return json.load(f)
    except OSError as e:
        die(f'cannot read {db_path}: {e.strerror} (run meson setup first)')


def objects(src, build):
    """({source file: [object paths]} of lib/'s static libraries, the same of tools/' objects, the
    set of defines seen on lib/ compile commands)."""
    lib, tools, defines = (collections.defaultdict(list), collections.defaultdict(list), set())
    for e in compile_db(build):
        out = e['output']
        folder = out.split('/')[1] if out.count('/') >= 2 else ''
        if out.startswith('lib/') and folder.endswith('.a.p'):
            into = lib
            cmd = e.get('command') or ' '.join(e.get('arguments', []))
            defines.update(re.findall(r'-D(CLNODE_HAVE_\w+)', cmd))
        elif out.startswith('tools/') and folder.endswith('.p'):
            into = tools
        else:
            continue
        path = os.path.normpath(os.path.join(e['directory'], e['file']))
        if path.startswith(build + os.sep) or not path.startswith(src + os.sep):
            rel = 'generated:' + os.path.basename(path)  # a custom target's output
        else:
            rel = os.path.relpath(path, src)
        if os.path.join(build, out) not in into[rel]:
            into[rel].append(os.path.join(build, out))
    return lib, tools, defines


def symbol_graph(objs, defs):
    """{file: {file: set(symbols)}} from the objects' symbol tables; `defs` gets symbol -> file."""
    nm = os.environ.get('NM') or shutil.which('nm')
    if not nm:
        die('nm not found (set NM)')
    own, uses = {}, collections.defaultdict(set)
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
                    own[parts[2]] = src_file
                elif len(parts) == 2 and parts[0] == 'U':
                    uses[src_file].add(parts[1])
    defs.update(own)
    graph = {f: collections.defaultdict(set) for f in objs}
    for f, syms in uses.items():
        for s in syms:
            d = own.get(s)
            if d and d != f:
                graph[f][d].add(s)
    return graph


def include_graph(src, files):
    """{file: {file: set(["#include ..."])}} over the C sources: a quoted #include resolves
    beside the file first, then along its top folder's SEARCH path."""
    known = set(files)
    graph = {f: collections.defaultdict(set) for f in files}
    for f in files:
        search = [os.path.dirname(f)] + SEARCH.get(f.split('/')[0], [])
        for name in INCLUDE_RE.findall(read(src, f)):
            for base in search:
                target = os.path.normpath(os.path.join(base, name))
                if target in known:
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


def check_graph(rooms, name, graph, verbose):
    """[(rule, key, message)] of the graph's circles and forbidden arrows."""
    errors = []
    for comp in sccs(graph):
        circle = one_circle(graph, comp)
        steps = [f'  {a} -> {b} ({", ".join(sorted(graph[a][b]))})'
                 for a, b in zip(circle, circle[1:])]
        errors.append(('circle', ','.join(comp),
                       f'circle in the {name} graph: {" -> ".join(circle)}\n' + '\n'.join(steps) +
                       f'\n  (the circle\'s files: {", ".join(comp)})'))
    for a in sorted(graph):
        for b in sorted(graph[a]):
            ra, rb = rooms.room_of(a), rooms.room_of(b)
            why = ', '.join(sorted(graph[a][b]))
            if ra is None or rb is None:
                errors.append(('room', a if ra is None else b,
                               f'{name} graph: {a} -> {b}: a file in no room of {MAP}'))
            elif not rooms.may_use(ra, rb):
                errors.append(('arrow', f'{a}->{b}',
                               f'forbidden arrow {ra} -> {rb} in the {name} graph: {a} -> {b} '
                               f'({why}): {ra} may use {", ".join(sorted(rooms.below(ra))) or "no room"}'))
            if verbose:
                print(f'{name}: {a} -> {b}: {why}')
    return errors


# ---- declarations and definitions ----

BLANK_RE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
CPLUSPLUS_RE = re.compile(r'#\s*ifdef\s+__cplusplus.*?#\s*endif', re.S)
PREPROC_RE = re.compile(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', re.M)
ATTR_RE = re.compile(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)')
NAME_PAREN_RE = re.compile(r'(\w+)\s*\(')
OBJECT_RE = re.compile(r'[^{}()]*?(\w+)\s*(?:\[[^\]]*\]\s*)*$', re.S)


def blank(text):
    """The text with its comments, literals and preprocessor lines blanked (lines kept)."""
    def keep_lines(m):
        return re.sub(r'[^\n]', ' ', m.group(0))
    text = BLANK_RE.sub(lambda m: keep_lines(m) if m.group(0)[0] == '/' else '""', text)
    text = CPLUSPLUS_RE.sub(keep_lines, text)
    return PREPROC_RE.sub(keep_lines, text)


def first_line(text, start):
    """The line of the first character at or after `start` that is not white space."""
    m = re.compile(r'\S').search(text, start)
    return text.count('\n', 0, m.start() if m else start) + 1


def top_level(text):
    """(head, has_body, line) of each top-level declaration or definition: the text before its
    body, or the whole declaration without its ';'."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == '{':
            if depth == 0:
                head = text[start:i]
            depth += 1
        elif c == '}':
            depth -= 1
            if depth == 0:
                if '(' in head and '=' not in head and not head.strip().startswith('typedef'):
                    out.append((head, True, first_line(text, start)))
                    start = i + 1
        elif c == ';' and depth == 0:
            out.append((text[start:i], False, first_line(text, start)))
            start = i + 1
    return out


def function_name(head):
    """The name a declaration head declares as a function, or None."""
    head = ATTR_RE.sub(' ', head).strip()
    if not head or head.startswith('typedef') or '=' in head or '{' in head:
        return None
    m = NAME_PAREN_RE.search(head)
    if not m or head[:m.start()].strip() == '' or '(' in head[:m.start()]:
        return None
    return m.group(1)


def parse(src, files):
    """({name: [(file, line)]} declared as functions or extern objects in headers, {name: file}
    of bodies (non-static, or static inline in a header), {struct tag: [file]} laid out,
    {public type: header} declared in include/)."""
    decls, bodies, layouts, opaque = collections.defaultdict(list), {}, {}, {}
    for f in files:
        raw = read(src, f)
        text = blank(raw)
        header = f.endswith(('.h', '.h.in'))
        for m in re.finditer(r'\bstruct\s+(\w+)\s*\{', text):
            layouts.setdefault(m.group(1), []).append(f)
        if f.startswith('include/'):
            for m in re.finditer(r'typedef\s+struct\s+(\w+)\s+\w+\s*;', text):
                opaque[m.group(1)] = f
        for head, body, line in top_level(text):
            name = function_name(head)
            words = head.split()
            if body:
                if name and (header or 'static' not in words):
                    bodies.setdefault(name, f)
            elif header and name:
                decls[name].append((f, line))
            elif header and 'extern' in words and '(' not in head:
                m = re.search(r'(\w+)\s*(?:\[[^\]]*\]\s*)*$', head)
                if m:
                    decls[m.group(1)].append((f, line))
            elif not header and not {'extern', 'static', 'typedef'} & set(words):
                m = OBJECT_RE.match(head.split('=')[0])  # an object this file defines
                if m:
                    bodies.setdefault(m.group(1), f)
    return decls, bodies, layouts, opaque


def check_declarations(rooms, decls, defs, layouts, opaque):
    """Each function or object declared in a room's header is defined in that room or below (a
    public header counts as the room the map's `public` block gives it); each public type is laid
    out in its room."""
    errors = []
    for name in sorted(decls):
        where = defs.get(name)
        if where is None:
            continue  # a macro, or a part this build leaves out
        rd = rooms.room_of(where)
        for f, line in decls[name]:
            r = rooms.public.get(f, rooms.room_of(f))
            if r is None or rd is None or rooms.may_use(r, rd):
                continue
            errors.append(('declaration', name,
                           f'{f}:{line}: {name} is declared in room {r} and defined in {where} '
                           f'(room {rd}, not {r} or below)'))
    for tag in sorted(opaque):
        want = rooms.type_room.get(tag, rooms.public.get(opaque[tag]))
        for f in layouts.get(tag, []):
            got = rooms.room_of(f)
            if want and got != want:
                errors.append(('type', tag,
                               f'struct {tag} (declared in {opaque[tag]}, room {want}) is laid '
                               f'out in {f}, room {got}: the rooms below {want} see its fields'))
    return errors


# The structs whose fields may be callbacks over a backend (the tables themselves).
TABLES = ('cln_backend_ops', 'cln_dev_launch')
BACKEND_CALLBACK_RE = re.compile(r'\(\s*\*\s*(\w+)\s*\)\s*\(\s*(?:const\s+)?cln_backend\s*\*')


def backend_callbacks(src, files):
    """Callbacks over a backend outside the tables: (rule, key, 'file:line: name') each."""
    out = []
    for f in files:
        if not f.startswith('lib/'):
            continue
        text = read(src, f)
        # blank out comments and the tables' bodies, keeping the line numbers
        text = re.sub(r'/\*.*?\*/|//[^\n]*', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text,
                      flags=re.S)
        for t in TABLES:
            text = re.sub(r'struct\s+%s\s*\{.*?\}' % t,
                          lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)
        for m in BACKEND_CALLBACK_RE.finditer(text):
            line = text.count('\n', 0, m.start()) + 1
            out.append(('callback', f'{f}:{m.group(1)}',
                        f'{f}:{line}: callback {m.group(1)} over a backend outside the ops table'))
    return out


def check_objects(rooms, lib_objs, tools_objs, defines, src):
    """Every lib/ source has an object (unless its part is off), every object lies in a room."""
    errors = []
    for f in source_files(src):
        if not (f.startswith('lib/') and f.endswith('.c')) or f in lib_objs:
            continue
        optional = [d for p, d in OPTIONAL.items() if f.startswith(p)]
        if optional and optional[0] not in defines:
            print(f'check_layering: {f} not in this build ({optional[0]} off): sources only')
            continue
        errors.append(('object', f, f'{f} has no object in any static library of lib/'))
    for f in list(lib_objs) + list(tools_objs):
        if rooms.room_of(f) is None:
            errors.append(('room', f, f'{f}: an object in no room of {MAP} (add it to a room)'))
    return errors


def run_checks(src, build, verbose):
    """[(rule, key, message)] of every rule, and a summary line."""
    rooms = Map(src)
    files = source_files(src)
    errors = [('room', f, f'{f}: in no room of {MAP} (add a pattern that covers it)')
              for f in files if rooms.room_of(f) is None]
    errors += [('room', h, f'{h}: a public header not in {MAP}\'s public block')
               for h in files if h.startswith('include/') and h.endswith(('.h', '.h.in'))
               and h not in rooms.public]
    listed = read(src, 'include/meson.build')
    errors += [('room', h, f'{h}: not in include/meson.build\'s public_headers (installed and '
                f'compiled alone from that list)')
               for h in sorted(rooms.public) if h.endswith('.h') and
               os.path.exists(os.path.join(src, h)) and f"'{h[len('include/'):]}'" not in listed]
    decls, bodies, layouts, opaque = parse(src, files)
    defs, summary = dict(bodies), f'{len(files)} sources'
    if build:
        lib_objs, tools_objs, defines = objects(src, build)
        errors += check_objects(rooms, lib_objs, tools_objs, defines, src)
        errors += check_graph(rooms, 'symbol', symbol_graph(lib_objs, defs), verbose)
        errors += check_graph(rooms, 'tools symbol', symbol_graph(tools_objs, defs), verbose)
        summary += (f', {sum(len(p) for p in lib_objs.values())} objects of lib/ and '
                    f'{sum(len(p) for p in tools_objs.values())} of tools/')
    errors += check_graph(rooms, 'include', include_graph(src, files), verbose)
    errors += check_declarations(rooms, decls, defs, layouts, opaque)
    errors += backend_callbacks(src, files)
    return rooms, errors, summary + f'; rooms {rooms.order()}'


def main(argv):
    verbose = '-v' in argv
    args = [a for a in argv[1:] if a != '-v']
    if len(args) not in (1, 2):
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    src = os.path.abspath(args[0])
    build = os.path.abspath(args[1]) if len(args) == 2 else None
    rooms, errors, summary = run_checks(src, build, verbose)
    print('check_layering: ' + summary)
    failed, used = [], set()
    for rule, key, msg in errors:
        if (rule, key) in rooms.exempt:
            used.add((rule, key))
            print(f'exempt ({rooms.exempt[(rule, key)]}): {msg}')
        else:
            failed.append(msg)
    for rule, key in sorted(set(rooms.exempt) - used):
        print(f'check_layering: note: the exemption {rule} {key} matches nothing here (once its '
              f'fix is in, remove it from {MAP})')
    for msg in failed:
        print('FAIL: ' + msg)
    print('check_layering: ' + (f'{len(failed)} errors' if failed else 'the layering holds'))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
