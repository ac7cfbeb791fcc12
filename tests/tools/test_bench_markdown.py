#!/usr/bin/env python3
"""clnode-bench --markdown FILE replaces its own section of FILE and keeps every other byte.

    test_bench_markdown.py CLNODE_BENCH
"""
import os
import re
import subprocess
import sys
import tempfile

BENCH = sys.argv[1]
HEAD = "# Benchmarks\n\nIntro text, kept.\n\n<!-- begin other -->\nanother tool's figures\n" \
       "<!-- end other -->\n\n## clnode-bench\n\n"
TAIL = "\n## After\n\nkept too, with no newline at the end"


def bench(path, *extra):
    return subprocess.run([BENCH, "--markdown", path, "--batches", "1,3", "--repeat", "1",
                           *extra], capture_output=True, text=True, check=False)


def section(text, name):
    m = re.search(rf"<!-- begin {name} -->\n(.*?)<!-- end {name} -->\n", text, re.S)
    assert m, f"no section {name} in:\n{text}"
    return m.group(1)


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "benchmarks.md")
        placeholder = "<!-- begin clnode-bench -->\nrun bench/write_benchmarks.py to fill\n" \
                      "<!-- end clnode-bench -->\n"
        with open(path, "w") as f:
            f.write(HEAD + placeholder + TAIL)
        r = bench(path)
        assert r.returncode == 0, r.stderr
        with open(path) as f:
            text = f.read()
        assert text.startswith(HEAD), "the text before the section changed"
        assert text.endswith(TAIL), "the text after the section changed"
        body = section(text, "clnode-bench")
        assert "run bench/write_benchmarks.py" not in body, "the placeholder was not replaced"
        assert re.search(r"^Machine: .+, \d+ CPUs online\. Host backend \(its ISA\): host CPU "
                         r"\(.+\)\. Commit \S+ \(clnode [\d.]+\)\. Date: \d{4}-\d\d-\d\d ", body,
                         re.M), f"no stamp in:\n{body}"
        assert "| batch | steps |" in body and re.search(r"^\| 1 \| \d+ \|", body, re.M) and \
            re.search(r"^\| 3 \| \d+ \|", body, re.M), f"no table rows in:\n{body}"
        assert text.count("<!-- begin clnode-bench -->") == 1
        # another run's section is appended, and the first stays byte for byte
        r = bench(path, "--compaction")
        assert r.returncode == 0, r.stderr
        with open(path) as f:
            text2 = f.read()
        assert section(text2, "clnode-bench") == body, "the fp32 section changed"
        assert text2.startswith(text), "the file was not kept up to the appended section"
        assert "| batch | on ms |" in section(text2, "clnode-bench-compaction")
        # --grad: its own section, the ratios per batch size (first column) positive numbers
        r = bench(path, "--grad")
        assert r.returncode == 0, r.stderr
        with open(path) as f:
            grad = section(f.read(), "clnode-bench-grad")
        assert "| batch | steps | fwd ms | rev ms | rev/fwd | bare ms | rev/bare |" in grad, grad
        for b in (1, 3):
            m = re.search(rf"^\| {b} \| \d+ \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| "
                          rf"([\d.]+) \|", grad, re.M)
            assert m, f"no row for batch {b} in:\n{grad}"
            fwd, rev, ratio, bare, rb = map(float, m.groups())
            assert fwd > 0 and rev > 0 and bare > 0, grad
            h = 0.0005  # the times are printed to 3 decimals, the ratios to 2

            def within(q, a, b):
                return (a - h) / (b + h) - 0.005 <= q <= (a + h) / max(b - h, 1e-9) + 0.005

            assert within(ratio, rev, fwd) and within(rb, rev, bare), grad
        r = bench(path, "--grad", "--compaction")
        assert r.returncode == 2 and "--grad or --compaction" in r.stderr, r
        # a begin marker without its end: refused (status 2), the file untouched
        bad = os.path.join(d, "bad.md")
        with open(bad, "w") as f:
            f.write("x\n<!-- begin clnode-bench -->\nno end\n")
        r = bench(bad)
        assert r.returncode == 2 and "no \"<!-- end clnode-bench -->\"" in r.stderr, r
        with open(bad) as f:
            assert f.read() == "x\n<!-- begin clnode-bench -->\nno end\n"
        # a directory that does not exist: status 3, no file
        r = bench(os.path.join(d, "missing", "b.md"))
        assert r.returncode == 3, r
    print("clnode-bench --markdown: section replaced, stamp and rows present, rest kept")


if __name__ == "__main__":
    main()
