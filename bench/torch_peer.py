#!/usr/bin/env python3
"""The PyTorch peer of `horizon bench engine --device cuda`: a plain Llama forward in bf16 with
random weights, on the same shapes (the `horizon synth` presets), batch-1 decode captured in a CUDA
graph, measured at the same depths and prompt lengths. A benchmark peer only: nothing links it,
and PyTorch exists only on the device machine (scripts/device-check runs it when `import torch`
works).

    python3 bench/torch_peer.py --preset llama-8b --depths 0,4096 --prefill 512,4096 --decode 64

One line per measurement, then a table:
    PEER <preset> <test> <depth> <tok/s> <GB/s>
where GB/s counts the bytes a decode step reads (every weight, the output head, the norms, one
embedding row, and the KV cache up to the depth) divided by the step's time.
"""
import argparse
import math
import sys
import time

PRESETS = {
    # layers, hidden, heads, kv heads, ffn, vocab, rope base (tools/synth.cc)
    "llama-1b": (16, 2048, 32, 8, 8192, 32000, 500000.0),
    "llama-8b": (32, 4096, 32, 8, 14336, 128256, 500000.0),
    "tiny": (2, 256, 8, 2, 512, 1000, 10000.0),  # a smoke test of this script (--device cpu)
}


def parse_ints(s):
    return [int(x) for x in s.split(",") if x.strip() != ""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="llama-8b", choices=sorted(PRESETS))
    ap.add_argument("--depths", default="0,4096", help="decode depths, comma-separated")
    ap.add_argument("--prefill", default="512", help="prompt lengths to time, comma-separated (empty: none)")
    ap.add_argument("--decode", type=int, default=64, help="decode steps timed per depth")
    ap.add_argument("--reps", type=int, default=3, help="repetitions; the median is reported")
    ap.add_argument("--no-graph", action="store_true", help="decode without a CUDA graph")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a smoke test of this script")
    a = ap.parse_args()

    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("torch_peer: PyTorch is not installed here", file=sys.stderr)
        return 2
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("torch_peer: no CUDA device", file=sys.stderr)
        return 2

    layers, hidden, heads, kv_heads, ffn, vocab, rope_base = PRESETS[a.preset]
    hd = hidden // heads
    group = heads // kv_heads
    depths = parse_ints(a.depths)
    prompts = parse_ints(a.prefill)
    max_len = max(depths + prompts + [0]) + a.decode + 8
    dev = torch.device(a.device)
    dt = torch.bfloat16 if cuda else torch.float32

    def sync():
        if cuda:
            torch.cuda.synchronize()
    torch.manual_seed(42)
    torch.backends.cuda.matmul.allow_tf32 = True

    def rnd(*shape, scale=0.02):
        return (torch.randn(*shape, device=dev, dtype=torch.float32) * scale).to(dt)

    W = []
    for _ in range(layers):
        W.append({
            "an": torch.ones(hidden, device=dev, dtype=dt),
            "fn": torch.ones(hidden, device=dev, dtype=dt),
            "wqkv": rnd((heads + 2 * kv_heads) * hd, hidden),
            "wo": rnd(hidden, heads * hd),
            "wgu": rnd(2 * ffn, hidden),
            "wd": rnd(hidden, ffn),
        })
    embd = rnd(vocab, hidden, scale=1.0)
    out_norm = torch.ones(hidden, device=dev, dtype=dt)
    out_w = rnd(vocab, hidden)
    # Bytes a decode step reads besides the KV cache.
    weight_bytes = (2 if cuda else 4) * (layers * ((heads + 2 * kv_heads) * hd * hidden + hidden * heads * hd + 3 * ffn * hidden + 2 * hidden)
                        + vocab * hidden + hidden + hidden)
    kv_bytes_per_pos = (2 if cuda else 4) * layers * 2 * kv_heads * hd  # K and V

    # The KV cache: [layers][2][1, kv_heads, max_len, hd], filled with random values (synthetic depth).
    cache = torch.randn(layers, 2, 1, kv_heads, max_len, hd, device=dev, dtype=dt)

    inv_freq = 1.0 / (rope_base ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))

    def rope(x, pos):  # x [1, h, t, hd], pos [t] (NeoX halves, as Llama in PyTorch)
        ang = pos.to(torch.float32)[:, None] * inv_freq[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], dim=-1).to(x.dtype)
        sin = torch.cat([ang.sin(), ang.sin()], dim=-1).to(x.dtype)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def rms(x, w):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (hidden,), w, 1e-5)
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w

    def attend(q, K, V, causal):
        if not hasattr(F, "scaled_dot_product_attention"):  # PyTorch 1.x (a smoke test's): by hand
            K = K.repeat_interleave(group, dim=1)
            V = V.repeat_interleave(group, dim=1)
            s = (q @ K.transpose(-1, -2)) / math.sqrt(hd)
            if causal:
                t, n = s.shape[-2], s.shape[-1]
                s = s.masked_fill(torch.ones(t, n, dtype=torch.bool, device=s.device).triu(n - t + 1), float("-inf"))
            return torch.softmax(s.float(), dim=-1).to(q.dtype) @ V
        try:
            return F.scaled_dot_product_attention(q, K, V, is_causal=causal, enable_gqa=True)
        except TypeError:  # PyTorch before 2.5: no enable_gqa
            K = K.repeat_interleave(group, dim=1)
            V = V.repeat_interleave(group, dim=1)
            return F.scaled_dot_product_attention(q, K, V, is_causal=causal)

    def forward(tokens, pos, length):
        """tokens [t] at positions pos [t]; the cache holds positions [0, length) after the write."""
        t = tokens.shape[0]
        x = embd[tokens][None]  # [1, t, hidden]
        for l, w in enumerate(W):
            h = rms(x, w["an"])
            qkv = h @ w["wqkv"].t()
            q, k, v = qkv.split([heads * hd, kv_heads * hd, kv_heads * hd], dim=-1)
            q = rope(q.view(1, t, heads, hd).transpose(1, 2), pos)
            k = rope(k.view(1, t, kv_heads, hd).transpose(1, 2), pos)
            v = v.view(1, t, kv_heads, hd).transpose(1, 2)
            cache[l, 0, :, :, pos] = k
            cache[l, 1, :, :, pos] = v
            K = cache[l, 0, :, :, :length]
            V = cache[l, 1, :, :, :length]
            o = attend(q, K, V, t > 1)
            x = x + o.transpose(1, 2).reshape(1, t, heads * hd) @ w["wo"].t()
            h = rms(x, w["fn"])
            g, u = (h @ w["wgu"].t()).split([ffn, ffn], dim=-1)
            x = x + (F.silu(g) * u) @ w["wd"].t()
        return rms(x[:, -1], out_norm) @ out_w.t()

    rows = []

    def report(test, depth, tps, gbs):
        print(f"PEER {a.preset} {test} {depth} {tps:.1f} {gbs:.1f}", flush=True)
        rows.append((test, depth, tps, gbs))

    with torch.inference_mode():
        for p in prompts:
            if p + 1 > max_len:
                continue
            tokens = torch.randint(0, vocab, (p,), device=dev)
            pos = torch.arange(p, device=dev)
            forward(tokens, pos, p)  # warm-up
            times = []
            for _ in range(a.reps):
                sync()
                t0 = time.perf_counter()
                forward(tokens, pos, p)
                sync()
                times.append(time.perf_counter() - t0)
            times.sort()
            report(f"pp{p}", 0, p / times[len(times) // 2], 0.0)

        for d in depths:
            # A decode step at depth d reads keys [0, d]: static tensors so a CUDA graph can replay it.
            tok = torch.zeros(1, dtype=torch.long, device=dev)
            pos = torch.full((1,), d, dtype=torch.long, device=dev)

            def step():
                return forward(tok, pos, d + 1)

            if a.no_graph or not cuda:
                run = step
            else:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        step()
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    step()
                run = g.replay
            for _ in range(3):
                run()
            times = []
            for _ in range(a.reps):
                sync()
                t0 = time.perf_counter()
                for _ in range(a.decode):
                    run()
                sync()
                times.append((time.perf_counter() - t0) / a.decode)
            times.sort()
            dt_step = times[len(times) // 2]
            report(f"tg{a.decode}", d, 1.0 / dt_step, (weight_bytes + kv_bytes_per_pos * (d + 1)) / dt_step / 1e9)

    print()
    print(f"{'peer (PyTorch ' + torch.__version__ + ', ' + str(dt).replace('torch.', '') + ')':<34} {'depth':>7} {'tok/s':>10} {'GB/s':>8}")
    for test, depth, tps, gbs in rows:
        print(f"{a.preset + ' ' + test:<34} {depth:>7} {tps:>10.1f} {gbs if gbs > 0 else float('nan'):>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
