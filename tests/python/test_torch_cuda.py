"""clnode.torch's CUDA tensors, without a GPU: which solves run on the tensors' device (the
library's clnode_solve_device on a context adopting torch's current stream) and which go through
the host; the extension's CUDA solve refusing clearly where no CUDA device (or no CUDA backend)
exists; tensors of other devices still refused by name. The solve on a GPU itself runs in
scripts/gpu-check.sh."""
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import clnode  # noqa: E402
import clnode.torch as ct  # noqa: E402
from clnode import _clnode  # noqa: E402
from clnode.torch import _cuda  # noqa: E402

F64 = torch.float64


def cuda_like(B=3, N=2):
    """What _cuda.on_device reads of a CUDA y0: its device's type and its shape."""
    return SimpleNamespace(device=torch.device("cuda", 0), shape=(B, N))


def times(t0, t1, B=3):
    return torch.stack([torch.as_tensor(t0, dtype=F64).expand(B),
                        torch.as_tensor(t1, dtype=F64).expand(B),
                        torch.full((B,), float("nan"), dtype=F64)])


def test_which_solves_run_on_the_device():
    ts = torch.linspace(0.0, 1.0, 5, dtype=F64)
    y = cuda_like()
    assert _cuda.on_device(y, times(0.0, 1.0), ts)
    assert _cuda.on_device(y, times(0.0, 1.0), ts.expand(3, -1))
    # the device's save times go forwards only
    assert not _cuda.on_device(y, times(1.0, 0.0), ts.flip(0))
    # one shared list with a start time per trajectory: its runs start at different slots
    assert not _cuda.on_device(y, times([0.0, 0.1, 0.2], 1.0), ts)
    assert _cuda.on_device(y, times([0.0, 0.1, 0.2], 1.0), ts.expand(3, -1))
    # CPU tensors: the host path
    assert not _cuda.on_device(torch.zeros(3, 2), times(0.0, 1.0), ts)


def test_the_cuda_solve_without_a_gpu_says_why():
    m = clnode.seed_model()
    for keep in (False, True):  # without a tape, and with one (a gradient's solve)
        opts = dict(method="tsit5", precision="fp32", save_t0=False, save_t1=False,
                    save_steps=False, keep_tape=keep)
        with pytest.raises(clnode.Error) as e:
            # the pointers are never read: the adoption of the stream fails first
            _clnode.solve_cuda(m._m, opts, device=0, stream=0, batch=2, y0=0x1000, ys=0x2000,
                               save_ts=0x3000, n_ts=3, ts_rows=False, inputs=0,
                               t0s=np.zeros(2), t1s=np.ones(2))
        text = str(e.value)
        assert isinstance(e.value, clnode.DeviceError), type(e.value)
        if "no CUDA backend" in text:  # a build without the CUDA backend
            continue
        assert ("clnode.torch: clnode_context_create_cuda(device 0, the caller's stream): "
                in text), text
        assert "cuda not available: " in text or "no CUDA device" in text, text


class Field(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, t, y):
        return self.net(y)


def test_other_devices_are_refused_by_name():
    f = Field().to("meta")
    with pytest.raises(ct.Refusal, match="y0 is on meta: clnode.torch takes CPU and CUDA"):
        ct.odeint(f, torch.zeros(2, device="meta"), torch.linspace(0, 1, 3))
