#!/usr/bin/env python3
"""plot_compare.py - the pictures of clnode-compare --plot.

    python3 plot_compare.py DATA.json OUT.png     (DATA.json written by clnode-compare)
    python3 plot_compare.py --check               (exit 0 if matplotlib is importable, else 2)

One panel per state component: the host float64 reference as a dense curve, and for every
device / precision / GEMM mode its accepted steps as markers (one colour each). Below, the step
sizes dt over time on a log scale: the solver API does not return per-step error norms, so the
accepted step sizes stand in for them (a controller fighting rounding noise shows as a collapse of
dt, as the tf32 rows do).
"""
import json
import math
import sys

PIP = "python3 -m pip install matplotlib"


def need_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.stderr.write("plot_compare.py: matplotlib is not installed; install it with:\n"
                         "    %s\n" % PIP)
        sys.exit(2)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def main(argv):
    if len(argv) == 2 and argv[1] == "--check":
        need_matplotlib()
        return 0
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    plt = need_matplotlib()
    with open(argv[1]) as f:
        data = json.load(f)
    dim = data["dim"]
    rows = data["rows"]
    ref = data["reference"]

    ncols = min(dim, 5)
    nrows_comp = math.ceil(dim / ncols)
    fig = plt.figure(figsize=(3.6 * ncols, 2.6 * nrows_comp + 4.2), constrained_layout=True)
    gs = fig.add_gridspec(nrows_comp + 2, ncols, height_ratios=[1] * nrows_comp + [0.25, 1.6])
    cmap = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")
    markers = "os^vDP*Xhd<>p"
    # rows that share steps and values draw on top of each other: later rows get smaller markers
    # rows with many steps (tf32) get small markers and go underneath; rows with few steps keep
    # large ones on top, so that identical step sequences stay visible as nested markers
    styles = []
    for i, r in enumerate(rows):
        many = len(r["t"]) > 40
        styles.append(dict(color=cmap(i % cmap.N), marker=markers[i % len(markers)],
                           ms=2.5 if many else max(8.0 - 0.6 * i, 3.5),
                           mfc="none" if (i % 2 and not many) else None,
                           z=2 if many else 3))

    for j in range(dim):
        ax = fig.add_subplot(gs[j // ncols, j % ncols])
        ax.plot(ref["t"], [y[j] for y in ref["y"]], color="black", lw=1.0, zorder=1)
        for r, st in zip(rows, styles):
            ax.plot(r["t"], [y[j] for y in r["y"]], ls="-", lw=0.6, alpha=0.8, zorder=st["z"],
                    color=st["color"], marker=st["marker"], ms=st["ms"],
                    mfc=st["mfc"] if st["mfc"] is not None else st["color"])
        ax.set_title("y[%d]" % j, fontsize=10)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
        if j // ncols == nrows_comp - 1:
            ax.set_xlabel("t", fontsize=9)

    # legend row
    lax = fig.add_subplot(gs[nrows_comp, :])
    lax.axis("off")
    handles = [plt.Line2D([], [], color="black", lw=1.0)]
    labels = [ref["label"]]
    for r, st in zip(rows, styles):
        handles.append(plt.Line2D([], [], color=st["color"], marker=st["marker"], ms=6, lw=0.6,
                                  mfc=st["mfc"] if st["mfc"] is not None else st["color"]))
        labels.append("%s: %d steps (%d accepted) - %s" % (r["label"], r["num_steps"],
                                                           r["num_accepted"], r["verdict"]))
    lax.legend(handles, labels, loc="center", ncol=2 if len(labels) > 4 else 1, fontsize=8,
               frameon=False)

    ax = fig.add_subplot(gs[nrows_comp + 1, :])
    for r, st in zip(rows, styles):
        t = r["t"]
        dts = [abs(b - a) for a, b in zip(t[:-1], t[1:])]
        if not dts:
            continue
        ax.step(t[1:], dts, where="pre", color=st["color"], lw=1.0, alpha=0.85, zorder=st["z"],
                marker=st["marker"], ms=st["ms"] * 0.7,
                mfc=st["mfc"] if st["mfc"] is not None else st["color"],
                label=r["label"])
    ax.set_yscale("log")
    ax.set_xlim(min(data["t0"], data["t1"]), max(data["t0"], data["t1"]))
    ax.set_xlabel("t (end of each accepted step)")
    ax.set_ylabel("accepted step size dt")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Step sizes over time, log scale (stand-in for the error estimates: per-step "
                 "error norms are not available from the clnode API)", fontsize=10)

    fig.suptitle("clnode-compare: %s\ncomponents with accepted steps marked; black: host fp64 "
                 "reference" % data["title"], fontsize=11)
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
