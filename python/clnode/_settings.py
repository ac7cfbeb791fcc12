"""The solve settings a model file carries: clnode.solve's keywords as string metadata of the
safetensors header, "clnode.<option>" for an option of the library's table and "clnode.save_ts"
for SaveAt(ts=...), which `clnode-solve --model FILE` takes as its defaults (doc/deploy.md)."""
from typing import Any, Dict, Mapping

import numpy as np

from . import _args, _clnode, _solve

PREFIX = "clnode."


def _text(info: Dict[str, Any], value: Any) -> str:
    """The metadata text of a checked option value (as _solve._option_value returns it): the
    shortest repr of a real (which strtod reads back to the same double), a decimal integer,
    "true"/"false", or the name of a choice."""
    kind = info["type"]
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "real":
        return repr(float(value))
    if kind == "integer":
        return str(int(value))
    return str(value)


def _check_range(info: Dict[str, Any], value: float) -> None:
    """A real or integer option inside its range of the library's table (its flags say which
    ends are open), refused by name as the library would refuse it at the solve."""
    lo, hi, flags = info["min"], info["max"], info["flags"]
    min_open, max_open = flags & _clnode.OPTION_MIN_OPEN, flags & _clnode.OPTION_MAX_OPEN
    low_ok = value > lo if min_open else value >= lo
    high_ok = value < hi if max_open else value <= hi
    if not (low_ok and high_ok):
        raise ValueError(f"settings: {info['name']} must lie in {'(' if min_open else '['}"
                         f"{lo:g}, {hi:g}{')' if max_open else ']'}, not {value!r}")


def metadata(settings: Mapping[str, Any]) -> Dict[str, str]:
    """The metadata entries ({"clnode.rtol": "0.0001", ...}) of `settings`, a mapping of
    clnode.solve's keywords: t0, t1, dt0 (scalars; dt0=None: none written, the default 0.01;
    dt0="auto": written as its option, "clnode.dt0_auto": "true"),
    saveat (a clnode.SaveAt with ts of shape (T,) or none), and the options of the library's
    table (clnode.OPTIONS) but those that change no result (compact, keep_tape,
    checkpoint_every). Each value is checked as clnode.solve checks it, and for its range;
    anything else is refused, naming it."""
    if not isinstance(settings, Mapping):
        raise TypeError(f"settings must be a dict of clnode.solve's keywords, not "
                        f"{type(settings).__name__}")
    out: Dict[str, str] = {}
    opts = dict(settings)
    auto = False
    for name in ("t0", "t1", "dt0"):
        if name in opts:
            value = opts.pop(name)
            if value is None and name == "dt0":
                continue
            if name == "dt0" and isinstance(value, str):  # as clnode.solve: dt0_auto
                if value != "auto":
                    raise ValueError(f'settings: dt0 must be a number, None or "auto", not '
                                     f'{value!r}')
                auto = True
                continue
            out[PREFIX + name] = repr(_args.real(value, f"settings: {name}", finite=True))
    saveat = opts.pop("saveat", None)
    for name in opts:
        info = _solve.OPTIONS.get(name) if isinstance(name, str) else None
        if info is None or info["flags"] & (_solve._PROBLEM | _solve._SAVE):
            raise TypeError(f"settings: {name!r} is no keyword of clnode.solve that a model file "
                            "carries (t0, t1, dt0, saveat and the options of clnode.OPTIONS)")
        # the options that change no result (how the work is done) are not settings
        if info["flags"] & _clnode.OPTION_SAME_BITS:
            raise ValueError(f"settings: {name} says how the work is done and changes no "
                             "result: it is not a setting of the solve")
    for name, value in _solve._table_options(dict(opts, dt0_auto=True) if auto else opts).items():
        info = _solve.OPTIONS[name]
        if info["type"] in ("real", "integer"):
            _check_range(info, value)
        out[PREFIX + name] = _text(info, value)
    if saveat is not None:
        out.update(_save_entries(saveat))
    t0, t1, dt0 = (float(out.get(PREFIX + k, _solve.OPTIONS[k]["default"]))
                   for k in ("t0", "t1", "dt0"))
    if dt0 != 0.0 and (t1 - t0) * dt0 < 0:
        raise ValueError(f"settings: dt0 = {dt0!r} has not the sign of t1 - t0 (t0 {t0!r}, "
                         f"t1 {t1!r})")
    if out.get(PREFIX + "dt0_auto") == "true":  # as the library refuses them at the solve
        if out.get(PREFIX + "constant_step") == "true":
            raise ValueError("settings: dt0_auto (dt0=\"auto\") chooses the first step of the "
                             "PID controller: constant steps need dt0")
        if dt0 != 0.0:
            raise ValueError(f"settings: dt0 = {dt0!r} with dt0_auto: the first step is chosen, "
                             "give none")
    return out


def _save_entries(saveat: Any) -> Dict[str, str]:
    """What a clnode.SaveAt saves, as metadata: the three booleans, and the save times."""
    if not isinstance(saveat, _solve.SaveAt):
        raise TypeError(f"settings: saveat must be a clnode.SaveAt, not {type(saveat).__name__}")
    flags = (("save_t0", saveat.t0), ("save_t1", saveat.t1), ("save_steps", saveat.steps))
    out = {PREFIX + name: "true" if on else "false" for name, on in flags}
    if saveat.ts is not None:
        if saveat.ts.ndim != 1 or saveat.ts.size == 0:
            raise ValueError(f"settings: a model file carries one list of save times, shared by "
                             f"the batch: SaveAt(ts=...) of shape (T,), T >= 1, not "
                             f"{saveat.ts.shape}")
        out[PREFIX + "save_ts"] = ",".join(repr(float(t)) for t in np.asarray(saveat.ts))
    return out
