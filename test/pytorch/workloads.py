#!/usr/bin/env python3
"""W1-W3 of bench/README.md in PyTorch, on the same generated data.

Prints the checksum lines of workloads.md, for comparison with nimble's
examples (script/check-pytorch does that). Needs Debian's python3-torch
(run with /usr/bin/python3).

    workloads.py W1 1 8 37    workloads.py W2    workloads.py W3 16
"""
import math
import sys

import numpy as np
import torch

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniforms(self, count):
        # One double multiply per draw, then a round to float32.
        ks = np.array([(self.next() >> 40) - 8388608 for _ in range(count)], dtype=np.float64)
        return (ks * (0.1 / 8388608.0)).astype(np.float32)

    def tensor(self, *shape):
        return torch.from_numpy(self.uniforms(math.prod(shape)).reshape(shape))

    def gamma(self, *shape):
        return torch.from_numpy(np.float32(1.0) + self.uniforms(math.prod(shape)).reshape(shape))


def checksum(name, size, outputs):
    flat = np.concatenate([o.detach().numpy().astype(np.float64).ravel() for o in outputs])
    print(f"{name} {size} checksum={flat.sum():.10g} abssum={np.abs(flat).sum():.10g}", flush=True)


def w1(sizes):
    rng = SplitMix64(1)
    lstm = torch.nn.LSTM(300, 512, num_layers=2)
    with torch.no_grad():
        for layer, inp in enumerate((300, 512)):
            getattr(lstm, f"weight_ih_l{layer}").copy_(rng.tensor(2048, inp))
            getattr(lstm, f"weight_hh_l{layer}").copy_(rng.tensor(2048, 512))
            getattr(lstm, f"bias_ih_l{layer}").copy_(rng.tensor(2048))
            getattr(lstm, f"bias_hh_l{layer}").copy_(rng.tensor(2048))
        for L in sizes:
            x = SplitMix64(1000 + L).tensor(L, 1, 300)
            out, _ = lstm(x)
            checksum("W1", L, [out])


def w2(sizes):
    rng = SplitMix64(2)
    wx, bx, u, bu = rng.tensor(450, 300), rng.tensor(450), rng.tensor(750, 300), rng.tensor(750)

    def build(r, lo, hi):
        if hi - lo == 1:
            return lo
        k = lo + 1 + r.next() % (hi - lo - 1)
        left = build(r, lo, k)
        return (left, build(r, k, hi))

    def node(t, x):
        if isinstance(t, int):
            i, o, g = torch.split(x[t] @ wx.T + bx, 150)
            c = torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c
        (hl, cl), (hr, cr) = node(t[0], x), node(t[1], x)
        i, fl, fr, o, g = torch.split(torch.cat([hl, hr]) @ u.T + bu, 150)
        c = torch.sigmoid(i) * torch.tanh(g) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
        return torch.sigmoid(o) * torch.tanh(c), c

    with torch.no_grad():
        for n in sizes:
            tree = build(SplitMix64(2500 + n), 0, n)
            x = SplitMix64(2000 + n).tensor(n, 300)
            h, c = node(tree, x)
            checksum("W2", n, [h, c])


def w3(sizes):
    rng = SplitMix64(3)
    layers = []
    for _ in range(12):
        w = []
        for _ in range(4):
            w += [rng.tensor(768, 768), rng.tensor(768)]
        w += [rng.gamma(768), rng.tensor(768), rng.tensor(3072, 768), rng.tensor(3072),
              rng.tensor(768, 3072), rng.tensor(768), rng.gamma(768), rng.tensor(768)]
        layers.append(w)
    F = torch.nn.functional
    with torch.no_grad():
        for L in sizes:
            x = SplitMix64(3000 + L).tensor(L, 768)
            for (wq, bq, wk, bk, wv, bv, wo, bo, g1, b1n, w1, b1, w2, b2, g2, b2n) in layers:
                heads = lambda t: t.reshape(L, 12, 64).transpose(0, 1)
                q, k, v = heads(F.linear(x, wq, bq)), heads(F.linear(x, wk, bk)), heads(F.linear(x, wv, bv))
                p = torch.softmax(q @ k.transpose(1, 2) * 0.125, dim=-1)
                ctx = (p @ v).transpose(0, 1).reshape(L, 768)
                x = F.layer_norm(x + F.linear(ctx, wo, bo), (768,), g1, b1n, eps=1e-12)
                ffn = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
                x = F.layer_norm(x + ffn, (768,), g2, b2n, eps=1e-12)
            checksum("W3", L, [x])


SIZES = {"W1": [1, 8, 37, 64, 100, 128], "W2": [8, 19, 32, 50], "W3": [16, 37, 64, 128, 200]}

if __name__ == "__main__":
    torch.set_num_threads(1)
    name = sys.argv[1]
    sizes = [int(s) for s in sys.argv[2:]] or SIZES[name]
    {"W1": w1, "W2": w2, "W3": w3}[name](sizes)
