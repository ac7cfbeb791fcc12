#!/usr/bin/env python3
"""plot_compare.py - the picture of clnode-compare --plot.

    python3 plot_compare.py DATA.json OUT.png     (DATA.json: clnode-compare's plot data file,
                                                   described in clnode-compare-schema.md)
    python3 plot_compare.py --check               (exit 0 if matplotlib is importable, else 2)

Three panels, one colour per device row (device, precision, GEMM mode):

1. the precision picture: the relative deviation of trajectory 0 from the host float64 reference
   over time, on a log scale, with each precision's tolerance as a dashed line and the region
   above it shaded: a row whose curve stays below its line agrees; the legend gives each row's
   verdict. A deviation of exactly 0 (the reference itself, or a row bit-identical to it) is drawn
   on the panel's floor.
2. the accepted step sizes over time (log scale): a controller fighting rounding noise shows as a
   collapse of dt (the tf32 rows).
3. the step counts per batch size, as bars, with the reference's count as a line: the same problem
   must take the same steps at every batch size.

The PNG is written to a temporary file in OUT's directory and renamed, so a failed run leaves no
partial picture.
"""
import json
import math
import os
import sys
import tempfile

PIP = "python3 -m pip install matplotlib"


def need_matplotlib():
    try:
        import matplotlib
    except ImportError:
        sys.stderr.write("plot_compare.py: matplotlib is not installed; install it with:\n"
                         "    %s\n" % PIP)
        sys.exit(2)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def fnum(x):
    return float("nan") if x is None else float(x)


def row_styles(plt, rows):
    """One colour per row, and each row's line width: identical curves (bit-identical rows) lie
    on top of each other, so each row is drawn narrower and above the ones before it, so that
    they show as nested lines."""
    cmap = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")
    colours = [cmap(i % cmap.N) for i in range(len(rows))]
    widths = [max(1.0, 6.0 - 5.0 * i / max(len(rows) - 1, 1)) for i in range(len(rows))]
    return colours, widths


def deviation_floor(rows):
    """The deviation panel's floor: below the smallest positive deviation drawn."""
    positive = [d for r in rows for d in r.get("rel_dev", []) if d is not None and d > 0]
    return 10.0 ** math.floor(math.log10(min(positive))) / 10 if positive else 1e-17


def draw_tolerances(ax, data, rows, floor):
    """Each precision's tolerance as a dashed line, the floor as a dotted one, and the problem's
    own spread under rounding-size perturbations of y0 (clnode-compare --sensitivity), per
    precision, as a band: a row inside its band agrees with what rounding allows. Returns
    {tolerance: {precision}}."""
    tols = {}
    for r in rows:
        tols.setdefault(r["tolerance"], set()).add(r["precision"])
    for tol, precs in sorted(tols.items()):
        ax.axhline(tol, color="black", ls="--", lw=1.2, zorder=1)
        ax.text(data["t0"], tol, " tolerance (%s): %.3g; above it a strict row DISAGREES"
                % (", ".join(sorted(precs)), tol), va="bottom", ha="left", fontsize=8)
    ax.axhline(floor, color="black", ls=":", lw=0.8, zorder=1)
    ax.text(data["t0"], floor, " 0: bit-identical to the reference", va="bottom", ha="left",
            fontsize=8)
    spreads = {}
    for r in rows:
        if r.get("spread") is not None:
            spreads[r["precision"]] = fnum(r["spread"])
    for k, (prec, sp) in enumerate(sorted(spreads.items())):
        if sp > floor and math.isfinite(sp):
            ax.axhspan(floor, sp, color="tab:green", alpha=0.08 + 0.04 * k, zorder=0)
            ax.text(data["t1"], sp, "%s: the problem's own rounding spread %.2g " % (prec, sp),
                    va="bottom", ha="right", fontsize=8, color="darkgreen")
    return tols


def draw_deviation_curves(ax, plt, rows, colours, widths, floor, top):
    """Each row's deviation curve, styled by its verdict. Returns (handles, labels, top): the
    legend's entries and the largest value drawn (at least `top`)."""
    handles, labels = [], []
    for i, (r, c) in enumerate(zip(rows, colours)):
        ok = not r["fails"] and r["verdict"].startswith(("agrees", "reference", "differs within"))
        mark = "agrees" if ok else ("DISAGREES" if r["fails"] else "differs (tf32: expected)")
        dmax = fnum(r["max_rel_dev"])
        label = "%s: %s - %s" % (r["label"], "max %.2g" % dmax if math.isfinite(dmax)
                                 else "ended early", r["verdict"])
        if "rel_dev" not in r:
            labels.append(label + " (no curve: the solve failed)")
            handles.append(plt.Line2D([], [], color=c, lw=2))
            continue
        dev = [max(fnum(d), floor) if d is not None else float("nan") for d in r["rel_dev"]]
        top = max([top] + [d for d in dev if not math.isnan(d)])
        # agreeing rows solid, strict rows that disagree dashed, expected tf32 failures dotted
        h, = ax.plot(r["dev_t"], dev, color=c, lw=widths[i] if ok else 2.0 if r["fails"] else 1.2,
                     ls="-" if ok else (0, (5, 2)) if r["fails"] else (0, (1, 1.5)),
                     zorder=3 + i, label=mark)
        handles.append(h)
        labels.append(label)
    return handles, labels, top


def plot_deviation(ax, plt, data, rows, colours, widths):
    """Panel 1: the relative deviation of trajectory 0 from the reference, over time."""
    floor = deviation_floor(rows)
    tols = draw_tolerances(ax, data, rows, floor)
    top = max(list(tols) + [floor * 10])
    handles, labels, top = draw_deviation_curves(ax, plt, rows, colours, widths, floor, top)
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, top * 5)
    if tols:
        ax.axhspan(min(tols), top * 5, color="red", alpha=0.06, zorder=0)
    ax.set_xlim(min(data["t0"], data["t1"]), max(data["t0"], data["t1"]))
    ax.set_xlabel("t")
    ax.set_ylabel("max_j |y_j - ref_j| / (max_j |ref_j| + atol/rtol)")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title("Relative deviation from the host fp64 reference (trajectory 0)\nsolid: agrees; "
                 "dashed: DISAGREES; dotted: tf32, expected to differ", fontsize=10)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
              frameon=False)


def plot_step_sizes(ax, data, rows, colours, widths):
    """Panel 2: the accepted step sizes over time."""
    for i, (r, c) in enumerate(zip(rows, colours)):
        if r.get("step_t"):
            ax.step(r["step_t"], r["step_dt"], where="pre", color=c, lw=widths[i] * 0.6,
                    marker="o", ms=widths[i] * 0.9, zorder=3 + i,
                    label="%s: %d accepted steps" % (r["label"], len(r["step_t"])))
    ax.set_yscale("log")
    ax.set_xlim(min(data["t0"], data["t1"]), max(data["t0"], data["t1"]))
    ax.set_xlabel("t (end of each accepted step)")
    ax.set_ylabel("accepted step size dt")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Step sizes over time (log scale)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def plot_batch_steps(ax, data, rows, batches, colours):
    """Panel 3: the step counts per batch size, as bars, with the reference's as a line."""
    nb = max(len(batches), 1)
    width = 0.8 / nb
    for b, B in enumerate(batches):
        xs = [i + (b - (nb - 1) / 2) * width for i in range(len(rows))]
        ys = [fnum(r["steps_per_batch"][b]) for r in rows]
        ax.bar(xs, [0 if math.isnan(y) else y for y in ys], width * 0.95,
               color=colours, alpha=1.0 - 0.5 * b / nb, edgecolor="black", lw=0.5)
        for x, y in zip(xs, ys):
            ax.text(x, 0 if math.isnan(y) else y, "B=%d\n%s" % (B, "error" if math.isnan(y)
                                                                 else "%d" % y),
                    ha="center", va="bottom", fontsize=7)
    ax.axhline(data["reference"]["num_steps"], color="black", ls="--", lw=1.0)
    tallest = [fnum(v) for r in rows for v in r["steps_per_batch"]]
    tallest = max([v for v in tallest if not math.isnan(v)] + [data["reference"]["num_steps"]])
    ax.set_ylim(0, tallest * 1.2)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["label"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("steps (largest over the batch)")
    ax.set_title("Steps (attempts) per batch size: the same problem takes the same steps at every "
                 "batch size; dashed: the reference's %d" % data["reference"]["num_steps"],
                 fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)


def save_png(fig, out):
    """The figure as a PNG at `out`, through a temporary file in its directory renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".",
                               dir=os.path.dirname(os.path.abspath(out)))
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=100, format="png")
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


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
    if data.get("format_version") != 1:
        sys.stderr.write("plot_compare.py: %s: format_version %r, expected 1\n"
                         % (argv[1], data.get("format_version")))
        return 2
    rows = data["rows"]
    batches = data["batches"]
    colours, widths = row_styles(plt, rows)
    fig = plt.figure(figsize=(13, 13), constrained_layout=True)
    gs = fig.add_gridspec(3, 1, height_ratios=[1.5, 1.0, 0.9])
    plot_deviation(fig.add_subplot(gs[0]), plt, data, rows, colours, widths)
    plot_step_sizes(fig.add_subplot(gs[1]), data, rows, colours, widths)
    plot_batch_steps(fig.add_subplot(gs[2]), data, rows, batches, colours)
    fig.suptitle("clnode-compare: %s" % data["title"], fontsize=11)
    save_png(fig, argv[2])
    return 0


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


if __name__ == "__main__":
    sys.exit(main(sys.argv))
