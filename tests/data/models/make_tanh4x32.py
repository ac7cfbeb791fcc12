#!/usr/bin/env python3
"""Writes tanh4x32.safetensors: an MLP vector field 4 -> 32 -> 4 (tanh) with large weights
(layer 0 of standard deviation 3, layer 1 of 6, biases 1), the kind of problem whose step sequence
is intrinsically sensitive to rounding: at rtol 1e-3 over t in [0, 50] from y0 = (0.5, -0.3, 0.2,
0.1), perturbations of a few float32 ulps move its step count over 109-220 and its state by O(1),
a few float64 ulps by 103-124 steps and 4e-2 (clnode/precision.h). The weights come from splitmix64
and Box-Muller with seed 8, so this script (standard library only) rewrites the same bytes."""
import json
import math
import struct
import sys

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def gauss(self):
        u1 = ((self.next() >> 11) + 0.5) * 2.0**-53
        u2 = (self.next() >> 11) * 2.0**-53
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def main(path):
    rng = SplitMix64(8)
    n, h = 4, 32
    w0 = [3.0 * rng.gauss() for _ in range(h * n)]
    b0 = [rng.gauss() for _ in range(h)]
    w1 = [6.0 * rng.gauss() for _ in range(n * h)]
    b1 = [rng.gauss() for _ in range(n)]
    tensors = [("layers.0.weight", [h, n], w0), ("layers.0.bias", [h], b0),
               ("layers.1.weight", [n, h], w1), ("layers.1.bias", [n], b1)]
    header = {"__metadata__": {"activation": "tanh", "final_activation": "identity"}}
    data = b""
    for name, shape, values in tensors:
        raw = struct.pack("<%dd" % len(values), *values)
        header[name] = {"dtype": "F64", "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tanh4x32.safetensors")
