#!/usr/bin/env python3
"""Writes doc/benchmarks.md: runs the benchmarks, each replacing its own section of the file.

    python3 bench/write_benchmarks.py [--build build] [--devices host,opencl]
                                      [--peers-python /tmp/venv-peers/bin/python] [--quick]

Runs, in this order, each with --markdown doc/benchmarks.md:
  - clnode-bench (fp32, then --precision fp64, then --compaction, then --grad in fp32 and fp64)
    on --devices;
  - bench_peers.py with --peers-python (an interpreter with jax, equinox, diffrax 0.7.2 and this
    tree's clnode package: see doc/benchmarks.md), then bench_peers.py --grad (the gradient:
    jax.grad of diffrax against clnode's reverse pass, through build/bench/bench_grad_worker);
    without --peers-python both are skipped and their sections are left as they are.
The file's text outside the sections (the explanations) is kept; a section not rerun keeps its
figures and its stamp. --quick runs small sizes and few repeats, to try the pipeline (its
figures are not for committing). Run it on a quiet machine: every figure is a timing.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOC = os.path.join(ROOT, "doc", "benchmarks.md")


def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, check=False)
    if r.returncode != 0:
        raise SystemExit(f"write_benchmarks: {cmd[0]} exited {r.returncode}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--devices", default="host")
    ap.add_argument("--peers-python", help="the interpreter bench_peers.py runs with")
    ap.add_argument("--out", default=DOC, help="the file written (default doc/benchmarks.md)")
    ap.add_argument("--quick", action="store_true", help="small sizes, to try it")
    a = ap.parse_args()
    bench = os.path.join(a.build, "tools", "clnode-bench")
    if not os.access(bench, os.X_OK):
        raise SystemExit(f"write_benchmarks: {bench} not found (build first, or --build DIR)")
    sizes = ["--batches", "1,64", "--repeat", "1"] if a.quick else []
    base = [bench, "--devices", a.devices, "--markdown", a.out] + sizes
    run(base)
    run(base + ["--precision", "fp64"])
    run(base + ["--compaction"] + ([] if a.quick else ["--batches", "4096"]))
    grad_sizes = [] if a.quick else ["--batches", "1,64,1024,4096"]
    run(base + ["--grad"] + grad_sizes)
    run(base + ["--grad", "--precision", "fp64"] + grad_sizes)
    if a.peers_python:
        peers = ["--batches", "1,64", "--repeat", "2", "--rounds", "1"] if a.quick else \
            ["--batches", "1,64,1024,4096", "--precisions", "fp32,fp64", "--repeat", "21",
             "--rounds", "7"]
        run([a.peers_python, os.path.join(HERE, "bench_peers.py"),
             "--clnode-solve", os.path.join(a.build, "tools", "clnode-solve"),
             "--markdown", a.out] + peers)
        grad = ["--batches", "1,64", "--repeat", "2", "--rounds", "1"] if a.quick else \
            ["--batches", "1,64,1024,4096", "--precisions", "fp32,fp64", "--repeat", "7",
             "--rounds", "7"]
        run([a.peers_python, os.path.join(HERE, "bench_peers.py"), "--grad",
             "--clnode-grad-worker", os.path.join(a.build, "bench", "bench_grad_worker"),
             "--markdown", a.out] + grad)
    else:
        print("write_benchmarks: no --peers-python: the bench_peers sections are left as they are")
    return 0


if __name__ == "__main__":
    sys.exit(main())
