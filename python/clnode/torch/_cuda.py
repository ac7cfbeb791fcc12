"""CUDA tensors solved on their own device: y0, args and the save times are read, and the values
at the save times written, by the library's CUDA backend on the tensors' memory and on torch's
current stream (a context adopting that stream, clnode_context_create_cuda, and
clnode_solve_device), with no copy through the host.

Taken for a solve integrating forwards whose save times are one list with one start time or a
list per trajectory (others go through the host: a copy each way). A solve whose gradient is
wanted keeps its tape, which the library's reverse pass reads in host memory: the solve's kept
states, y0, args and the save times are read back for it (clnode_solve_device's kept solution),
and its bytes are the op's tape output, as on the CPU."""
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from .. import _clnode, _model, _solve


def on_device(y0: Tensor, times: Tensor, save_ts: Tensor) -> bool:
    """Whether the solve of y0 runs on its CUDA device itself."""
    if y0.device.type != "cuda":
        return False
    t0, t1 = times[0], times[1]
    return bool((t1 > t0).all()) and (save_ts.dim() == 2 or bool((t0 == t0[0]).all()))


def solve(y0: Tensor, args: Optional[Tensor], model: _model.MLP, times: Tensor, save_ts: Tensor,
          cfg: Dict[str, Any], keep: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The op's (ys, stats, tinfo, tape) of a solve on y0's CUDA device (keep: with the tape's
    bytes, else an empty tape)."""
    B, N = y0.shape
    dev = y0.device
    # the save times in the solve's precision on the device: what the host path rounds them to
    ts = save_ts.to(device=dev, dtype=y0.dtype).contiguous()
    T = int(ts.shape[-1])
    ys = torch.empty((B, T, N), dtype=y0.dtype, device=dev)
    tm = times.detach().to("cpu", torch.float64).numpy()
    auto = bool(np.isnan(tm[2]).any())
    opts = _solve._table_options(dict(cfg["options"], method=cfg["method"], precision=(
        "fp64" if y0.dtype == torch.float64 else "fp32")))
    if auto:
        opts.update(_solve._table_options({"dt0_auto": True}))
    if keep:
        opts.update(_solve._table_options({"keep_tape": True}))
    opts.update(save_t0=False, save_t1=False, save_steps=False)
    y = y0.detach().contiguous()
    a = None if args is None else args.detach().to(dev).contiguous()
    # the slots after the last save time a trajectory reached are +inf in ys: the library's
    # layout (clnode_solve_device), as the host path's
    stats, tinfo, _saved, tape = _clnode.solve_cuda(
        model._m, opts, device=dev.index if dev.index is not None else torch.cuda.current_device(),
        stream=torch.cuda.current_stream(dev).cuda_stream, batch=B, y0=y.data_ptr(),
        ys=ys.data_ptr(), save_ts=ts.data_ptr(), n_ts=T, ts_rows=ts.dim() == 2,
        inputs=0 if a is None else a.data_ptr(), t0s=np.ascontiguousarray(tm[0]),
        t1s=np.ascontiguousarray(tm[1]), dt0s=None if auto else np.ascontiguousarray(tm[2]))
    return (ys, torch.from_numpy(stats).to(dev), torch.from_numpy(tinfo).to(dev),
            torch.empty((0,), dtype=torch.uint8, device=dev) if tape is None
            else torch.from_numpy(tape).to(dev))
