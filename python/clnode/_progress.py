"""Progress of a solve or a reverse pass as it runs: the progress= argument of clnode.solve and
Solution.vjp (a callable, or True for a line on stderr) and diffrax's progress meters in
clnode.jax.diffeqsolve. The library calls back between groups of steps, at most once a second and
only once the work has run for about a second; without a callback (progress=None, or
diffrax.NoProgressMeter) it is given none and no Python runs for progress."""
import sys
import time
from typing import Any, Callable, Optional, Tuple

# the extension's progress callable: fn(fraction, active, batch, steps)
ProgressFn = Callable[[float, int, int, int], object]


class TextLine:
    """progress=True: one line on stderr, rewritten in place, as clnode-solve shows it on a
    terminal; close() ends it (when it was shown)."""

    def __init__(self, what: str) -> None:
        self.what, self.start, self.shown = what, time.monotonic(), False

    def __call__(self, fraction: float, active: int, batch: int, steps: int) -> None:
        self.shown = True
        sys.stderr.write(f"\r  {self.what}: {100.0 * fraction:5.1f}%  {active}/{batch} "
                         f"trajectories active  {steps} steps  "
                         f"{time.monotonic() - self.start:.1f} s ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _nothing() -> None:
    pass


def callback(progress: Any, what: str) -> Tuple[Optional[ProgressFn], Callable[[], None]]:
    """The extension's callable of a progress= argument (None for none: no Python runs for
    progress) and what ends it. what: the work's name on the line of progress=True ("of
    [t0, t1]" for a solve, "of the batch" for a reverse pass)."""
    if progress is None or progress is False:
        return None, _nothing
    if progress is True:
        line = TextLine(what)
        return line, line.close
    if callable(progress):
        return progress, _nothing
    raise TypeError("progress must be None, a bool or a callable fn(fraction, active, batch, "
                    f"steps), not {type(progress).__name__}")


class TextMeter:
    """diffrax.TextProgressMeter: "0.00%" on stdout at the start, the fraction of [t0, t1] done
    whenever it grew by more than minimum_increase since the last line, "100.00%" at the end, as
    diffrax prints them."""

    def __init__(self, minimum_increase: float) -> None:
        self.minimum_increase, self.last = float(minimum_increase), 0.0
        print("0.00%")

    def __call__(self, fraction: float, active: int, batch: int, steps: int) -> None:
        if fraction - self.last > self.minimum_increase:
            self.last = fraction
            print(f"{100 * fraction:.2f}%")

    def close(self) -> None:
        if self.last != 1:
            print("100.00%")


class TqdmMeter:
    """diffrax.TqdmProgressMeter: diffrax's tqdm bar (total 100, unit "%"), moved to the fraction
    of [t0, t1] done at each report, closed at 100%."""

    def __init__(self) -> None:
        import tqdm  # type: ignore[import-untyped]  # diffrax.TqdmProgressMeter needs it too
        self.bar = tqdm.tqdm(total=100, unit="%", bar_format="{percentage:.2f}%|{bar}| "
                             "[{elapsed}<{remaining}, {rate_fmt}{postfix}]")

    def __call__(self, fraction: float, active: int, batch: int, steps: int) -> None:
        self.bar.n = round(100 * float(fraction), 2)
        self.bar.update(n=0)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.n = 100.0
        self.bar.update(n=0)
        self.bar.close()
