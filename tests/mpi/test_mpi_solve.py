#!/usr/bin/env python3
"""clnode-solve under mpirun --oversubscribe -np 1..4 (suite mpi): the output files are the same
bytes at every rank count and the same as one process without MPI (CSV, .npz and .npy written in
parallel, JSON but its wall_seconds, the summary but its time), on the seed problem and a
mixed-cost ensemble (per-trajectory t1 from a .npy file: some trajectories take several times the
steps of others), and the same with each trajectory its own save times (--ts-file); --grad-out G.npz
the same bytes at every rank count and chunk size (whole blocks) as one process; a rank
whose solves fail makes the run fail with a message naming it and leaves no output; a run killed
midway with --resume is finished by a rerun (at another rank count) with the same bytes.

    test_mpi_solve.py MPIEXEC CLNODE_SOLVE [--quick]

--quick (the sanitizer builds, where every start of a rank is slow): rank counts 1 and 3 only.
"""
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

MPIEXEC, SOLVE = sys.argv[1], sys.argv[2]
QUICK = "--quick" in sys.argv[3:]
NPS = (1, 3) if QUICK else (1, 2, 3, 4)
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", CLNODE_NUM_THREADS="1")
ENV.pop("CLNODE_MPI", None)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(np, args, env=None, **kw):
    cmd = ([MPIEXEC, "--oversubscribe", "-np", str(np)] if np else []) + [SOLVE] + args
    e = dict(ENV, **(env or {}))
    if not np:
        e["CLNODE_MPI"] = "0"
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=120, **kw)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def save_npy(path, rows, cols=None, shape=None):
    """A little-endian float64 .npy of `rows` (a list, or a list of lists of `cols`), of the
    shape `shape` (a tuple) when given."""
    if shape:
        shape = "(" + ", ".join(map(str, shape)) + ")"
    else:
        shape = f"({len(rows)},)" if cols is None else f"({len(rows)}, {cols})"
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    flat = rows if cols is None else [x for r in rows for x in r]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{len(flat)}d", *flat))


def untimed(text):
    text = re.sub(r'"wall_seconds": [^,]*', '"wall_seconds"', text)
    return re.sub(r"; [0-9.]+ s\n", "\n", text)


def same_everywhere(tmp, name, args, nps=NPS):
    """One process without MPI, then each rank count: identical files and documents."""
    ref = run(0, args + ["--out", f"{tmp}/{name}-ref.csv", "--json"])
    check(ref.returncode == 0, f"{name}: one process: exit {ref.returncode}: {ref.stderr}")
    summary = run(0, args)
    csv = read(f"{tmp}/{name}-ref.csv")
    lines = csv.count(b"\n")
    check(lines > 10, f"{name}: the reference CSV has {lines} lines")
    for np in nps:
        out = f"{tmp}/{name}-{np}.csv"
        r = run(np, args + ["--out", out, "--json", "--chunk-size", "3"])
        check(r.returncode == 0, f"{name}: -np {np}: exit {r.returncode}: {r.stderr}")
        check(os.path.exists(out) and read(out) == csv, f"{name}: -np {np}: CSV differs")
        check(untimed(r.stdout) == untimed(ref.stdout), f"{name}: -np {np}: JSON differs")
        if np == nps[-1]:  # the summary at one count (each run costs a start of MPI)
            s = run(np, args + ["--chunk-size", "2"])
            check(untimed(s.stdout) == untimed(summary.stdout),
                  f"{name}: -np {np}: summary differs:\n{s.stdout}\n{summary.stdout}")


def grad_cases(tmp):
    """--cotangents COT --grad-out G.npz: G the same bytes at every rank count, at chunks of 1
    and 2 blocks, with the ranks on opencl:pocl, and after a killed run is resumed, as one
    process; a chunk that is not whole blocks refused; a failing rank leaves no G."""
    rnd = random.Random(11)
    B = 219  # 7 blocks of 32, the last partial: the tree folds three runs
    y0, t1, cot = f"{tmp}/gy0.npy", f"{tmp}/gt1.npy", f"{tmp}/gcot.npy"
    save_npy(y0, [[rnd.uniform(-1, 1) for _ in range(10)] for _ in range(B)], 10)
    save_npy(t1, [200.0 if i % 9 == 0 else 30.0 for i in range(B)])
    save_npy(cot, [[rnd.gauss(0, 1) for _ in range(3 * 10)] for _ in range(B)], 30,
             shape=(B, 3, 10))
    args = ["--y0-file", y0, "--t1-file", t1, "--save", "t1", "--save", "ts:10,20",
            "--cotangents", cot, "--quiet"]
    r = run(0, args + ["--out", f"{tmp}/gys-ref.npz", "--grad-out", f"{tmp}/g-ref.npz"])
    check(r.returncode == 0, f"grad: one process: exit {r.returncode}: {r.stderr}")
    want, want_ys = read(f"{tmp}/g-ref.npz"), read(f"{tmp}/gys-ref.npz")
    check(b"layers.2.weight" in want, "grad: G has no layers.2.weight")
    for np in NPS:
        for cs in ("32", "64"):
            g, ys = f"{tmp}/g-{np}-{cs}.npz", f"{tmp}/gys-{np}-{cs}.npz"
            r = run(np, args + ["--chunk-size", cs, "--out", ys, "--grad-out", g])
            check(r.returncode == 0, f"grad -np {np} chunk {cs}: exit {r.returncode}: {r.stderr}")
            check(os.path.exists(g) and read(g) == want,
                  f"grad -np {np} chunk {cs}: G's bytes differ from one process")
            check(os.path.exists(ys) and read(ys) == want_ys,
                  f"grad -np {np} chunk {cs}: the saved values differ from one process")
    r = run(2, args + ["--grad-out", f"{tmp}/g-def.npz"])
    check(r.returncode == 0 and read(f"{tmp}/g-def.npz") == want,
          f"grad -np 2, the default chunk size: exit {r.returncode}: {r.stderr}")
    # the ranks solving and going back on PoCL: the host's bytes
    if run(0, ["--device", "opencl:pocl", "--t1", "0.1", "--quiet"]).returncode == 0:
        g = f"{tmp}/g-pocl.npz"
        r = run(2, args + ["--device", "opencl:pocl", "--chunk-size", "64", "--grad-out", g])
        check(r.returncode == 0 and os.path.exists(g) and read(g) == want,
              f"grad -np 2 on opencl:pocl: exit {r.returncode}, not the host's bytes: {r.stderr}")
    else:
        print("note: no opencl:pocl device; the ranks' gradient on it is not run")
    r = run(2, args + ["--chunk-size", "40", "--grad-out", f"{tmp}/g-bad.npz"])
    check(r.returncode == 2 and "--chunk-size 40: with --grad-out a chunk is whole blocks of 32 "
          "trajectories" in r.stderr, f"grad chunk 40: exit {r.returncode}: {r.stderr}")
    check(not os.path.exists(f"{tmp}/g-bad.npz"), "grad chunk 40: G was written")
    # killed midway with --resume (every rank exits after its first chunk's share is recorded),
    # resumed at another rank count: the same G; other cotangents are refused, naming them
    ys, g = f"{tmp}/gres.npz", f"{tmp}/gres-g.npz"
    res = args + ["--chunk-size", "32", "--out", ys, "--grad-out", g, "--resume"]
    r = run(3, res, env={"CLNODE_SOLVE_TEST_EXIT_AFTER": "1"})
    check(r.returncode != 0 and not os.path.exists(g) and os.path.isdir(ys + ".progress"),
          f"grad, killed run: exit {r.returncode}, G left {os.path.exists(g)}")
    cot2 = f"{tmp}/gcot2.npy"
    save_npy(cot2, [[0.5] * 30 for _ in range(B)], 30, shape=(B, 3, 10))
    r = run(2, [cot2 if x == cot else x for x in res])
    check(r.returncode == 2 and "the cotangents (--cotangents" in r.stderr and "changed" in r.stderr,
          f"grad, resume with other cotangents: exit {r.returncode}: {r.stderr}")
    r = run(2, res)
    m = re.search(r"(\d+) of (\d+) chunks already solved", r.stderr)
    check(r.returncode == 0 and m and 0 < int(m.group(1)) < int(m.group(2)),
          f"grad, resumed run: exit {r.returncode}: {r.stderr}")
    check(os.path.exists(g) and read(g) == want, "grad, resumed run: G differs from one process")
    check(os.path.exists(ys) and read(ys) == want_ys, "grad, resumed run: the values differ")
    check(not os.path.exists(ys + ".progress"), "grad, resumed run: the record was left")
    g = f"{tmp}/g-fail.npz"
    r = run(3, args + ["--chunk-size", "32", "--grad-out", g],
            env={"CLNODE_SOLVE_TEST_FAIL_RANK": "1"})
    check(r.returncode == 3 and re.search(r"rank 1 of 3 failed on trajectories", r.stderr),
          f"grad, failing rank: exit {r.returncode}: {r.stderr}")
    check(not os.path.exists(g), "grad, failing rank: G was left")
    check(not [n for n in os.listdir(tmp) if n.startswith(".g-fail")],
          f"grad, failing rank: temporary files left: {os.listdir(tmp)}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        # the seed problem, a batch of 12 from y0 = 0
        same_everywhere(tmp, "seed", ["--batch", "12", "--save", "t1", "--save", "ts:10,20"])

        # a mixed-cost ensemble: per-trajectory t1 (every fifth runs 8x longer) and y0 from .npy
        rnd = random.Random(7)
        y0, t1 = f"{tmp}/y0.npy", f"{tmp}/t1.npy"
        save_npy(y0, [[rnd.uniform(-1, 1) for _ in range(10)] for _ in range(23)], 10)
        save_npy(t1, [400.0 if i % 5 == 0 else 50.0 for i in range(23)])
        mixed = ["--y0-file", y0, "--t1-file", t1, "--save", "t1", "--save", "ts:20,40"]
        ref = run(0, mixed + ["--json"])
        steps = [int(s) for s in re.findall(r'"num_steps": (\d+)', ref.stdout)]
        check(len(steps) == 23 and max(steps) >= 3 * min(steps),
              f"mixed: step counts not mixed: {steps}")
        same_everywhere(tmp, "mixed", mixed)

        # each trajectory its own save times (--ts-file): every chunk its rows
        tsr = f"{tmp}/ts-rows.npy"
        t1v = [400.0 if i % 5 == 0 else 50.0 for i in range(23)]
        save_npy(tsr, [[t * f for f in (0.25 + 0.01 * (i % 3), 0.5, 0.9)]
                       for i, t in enumerate(t1v)], 3)
        rows = ["--y0-file", y0, "--t1-file", t1, "--save", "t1", "--ts-file", tsr]
        same_everywhere(tmp, "rows", rows, nps=(1, 3) if QUICK else (1, 2, 3))

        # .npz and .npy written in parallel at the chunks' offsets (MPI-IO); with --save steps
        # (padded to the most points: an all-reduce) and --ragged (offsets: prefix sums) the
        # layout is known after the solve
        steps = ["--y0-file", y0, "--t1-file", t1, "--save", "steps", "--save", "ts:20,40"]
        cases = [("npz", mixed, [], NPS), ("npy", mixed, [], (3,)),
                 ("npz", steps, [], (3,)), ("npz", steps, ["--ragged"], (2, 3)[QUICK:]),
                 ("npz", rows, [], (1, 3)), ("npz", rows, ["--ragged"], (2,))]
        for i, (ext, args, extra, nps) in enumerate(cases):
            r = run(0, args + extra + ["--out", f"{tmp}/ref{i}.{ext}", "--quiet"])
            check(r.returncode == 0, f"{ext} {extra}: one process: exit {r.returncode}: {r.stderr}")
            want = read(f"{tmp}/ref{i}.{ext}")
            for np in nps:
                out = f"{tmp}/ys{i}-{np}.{ext}"
                r = run(np, args + extra + ["--out", out, "--quiet", "--chunk-size", "3"])
                check(r.returncode == 0, f"{ext} {args[-3:]} {extra} -np {np}: exit "
                      f"{r.returncode}: {r.stderr}")
                check(os.path.exists(out) and read(out) == want,
                      f"{ext} {args[-3:]} {extra} -np {np}: bytes differ from one process")
                check(os.path.exists(out) and os.stat(out).st_mode == os.stat(
                    f"{tmp}/ref{i}.{ext}").st_mode, f"{ext} -np {np}: permissions differ")

        # a rank whose solves fail: the run fails, names it, and leaves no output file
        out = f"{tmp}/fail.npz"
        r = run(3, mixed + ["--out", out, "--chunk-size", "2"],
                env={"CLNODE_SOLVE_TEST_FAIL_RANK": "1"})
        check(r.returncode == 3, f"failing rank: exit {r.returncode}")
        check(re.search(r"rank 1 of 3 failed on trajectories \d+\.\.\d+ \(lost\)", r.stderr),
              f"failing rank: message: {r.stderr}")
        check(r.stderr.count("failed on trajectories") == 1,
              f"failing rank: the message is printed once: {r.stderr}")
        check(not os.path.exists(out), "failing rank: an output file was left")
        check(not [n for n in os.listdir(tmp) if n.startswith(".fail")],
              f"failing rank: temporary files left: {os.listdir(tmp)}")

        # killed midway (every rank exits after its first chunk), then resumed at another count
        for ext in ("csv", "npz"):
            out = f"{tmp}/resume.{ext}"
            args = mixed + ["--out", out, "--chunk-size", "2", "--resume", "--json"]
            r = run(3, args, env={"CLNODE_SOLVE_TEST_EXIT_AFTER": "1"})
            check(r.returncode != 0, f"killed run ({ext}): exit 0")
            check(not os.path.exists(out), f"killed run ({ext}): an output file was left")
            check(os.path.isdir(out + ".progress"), f"killed run ({ext}): no progress record")
            if ext == "csv":
                r = run(2, args + ["--rtol", "1e-5"])
                check(r.returncode == 2 and "--rtol (was 0.0001, now 1e-05) changed" in r.stderr,
                      f"resume with other options: exit {r.returncode}: {r.stderr}")
            r = run(2, args)
            check(r.returncode == 0, f"resumed run ({ext}): exit {r.returncode}: {r.stderr}")
            m = re.search(r"(\d+) of (\d+) chunks already solved", r.stderr)
            check(m and 0 < int(m.group(1)) < int(m.group(2)),
                  f"resumed run ({ext}): not a partial record: {r.stderr}")
            check(os.path.exists(out) and read(out) == read(
                f"{tmp}/mixed-ref.csv" if ext == "csv" else f"{tmp}/ref0.npz"),
                f"resumed run ({ext}): the output differs from an uninterrupted run")
            check(untimed(r.stdout) == untimed(ref.stdout),
                  f"resumed run ({ext}): the JSON differs from an uninterrupted run")
            check(not os.path.exists(out + ".progress"),
                  f"resumed run ({ext}): the progress record was left")

        # the machine stopped after a chunk's record reached the disk but before its rows did
        # (they went to the page cache through MPI-IO): the rows are checked against the
        # record's CRCs, and the chunks whose rows are gone are solved again
        out = f"{tmp}/crash.npz"
        args = mixed + ["--out", out, "--chunk-size", "2", "--resume", "--quiet"]
        r = run(3, args, env={"CLNODE_SOLVE_TEST_EXIT_AFTER": "1"})
        check(r.returncode != 0 and os.path.isdir(out + ".progress"), "crash run: no record")
        data = out + ".progress/data"
        size = os.path.getsize(data)
        with open(data, "r+b") as f:  # every row written so far is lost
            f.write(bytes(size))
        r = run(2, args)
        check(r.returncode == 0, f"crash resume: exit {r.returncode}: {r.stderr}")
        m = re.search(r"the rows of (\d+) recorded chunk\(s\) are not in its data file", r.stderr)
        check(m and int(m.group(1)) > 0, f"crash resume: lost rows not found: {r.stderr}")
        check(os.path.exists(out) and read(out) == read(f"{tmp}/ref0.npz"),
              "crash resume: the output differs from an uninterrupted run")

        grad_cases(tmp)

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"test_mpi_solve: identical bytes at {NPS} ranks and without MPI; failures and resume")
    return 0


if __name__ == "__main__":
    sys.exit(main())
