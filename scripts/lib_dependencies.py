#!/usr/bin/env python3
"""Which source file of lib/ uses which (from the built objects' symbol tables), and any circle.

    python3 scripts/lib_dependencies.py build/lib/libclnode_internal.a.p
"""
import subprocess, sys, glob, os, collections
objs = [o for o in glob.glob(sys.argv[1] + '/*.o')]
defs, uses = {}, collections.defaultdict(set)
for o in objs:
    name = os.path.basename(o).replace('.c.o', '').replace('_', '/', 1)
    for line in subprocess.run(['nm', o], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDRB':
            defs[parts[2]] = name
        elif len(parts) == 2 and parts[0] == 'U':
            uses[name].add(parts[1])
graph = {n: {defs[s] for s in us if s in defs and defs[s] != n} for n, us in uses.items()}
for n in sorted(graph):
    print(f'{n:28s} -> {", ".join(sorted(graph[n]))}')
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in graph.get(v, ()):
        if w not in index: visit(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: sccs.append(c)
for v in list(graph): 
    if v not in index: visit(v)
print('cycles:', sccs if sccs else 'none')
