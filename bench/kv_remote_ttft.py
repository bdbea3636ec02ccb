#!/usr/bin/env python3
"""Time to first token of a long prompt on two replicas sharing a Redis (the remote KV tier): cold
(replica A computes it), from local RAM (A again: its prefix cache), and from Redis (replica B, which
never saw it). Starts redis-server and both replicas on free loopback ports; every round uses a new
prompt, so each round has a true cold run; reports medians, the per-round ratios cold / Redis hit,
the bytes per block on the wire and Redis's memory per token (MEMORY USAGE of the records).
Usage: bench/kv_remote_ttft.py [MODEL] [WORDS] [ROUNDS] [SERVE FLAGS...] (e.g. --kv-remote-codec zstd)
  (default shared/models/synth-tiny-f16.gguf, 1450 words ~ 4,000 tokens, 5 rounds; build/horizon)"""
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
HORIZON = os.path.join(HERE, "..", "build", "horizon")
SECRET = "bench-secret-0123456789abcdef"
WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "far", "away", "house", "tree", "big", "small", "red",
         "blue", "green", "quick", "lazy", "fox", "jumps", "over", "under", "river", "mountain", "sky", "bright"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, limit=60):
    end = time.time() + limit
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def ttft(url, prompt):
    """Seconds from sending the request to the first streamed token; and the usage."""
    body = {"prompt": prompt, "max_tokens": 2, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first, usage = None, None
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if first is None and chunk.get("choices") and chunk["choices"][0].get("text") is not None:
                first = time.perf_counter() - t0
            if chunk.get("usage"):
                usage = chunk["usage"]
    return first, usage


def metric(url, name):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    m = re.search(r"\n" + name + r"(?:\{[^}]*\})? ([0-9.e+-]+)", text)
    return float(m.group(1)) if m else -1.0


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "shared", "models", "synth-tiny-f16.gguf")
    words = int(sys.argv[2]) if len(sys.argv) > 2 else 1450
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    tmp = tempfile.mkdtemp(prefix="kv_remote_bench")
    rport = free_port()
    procs = [subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)]
    try:
        wait_port(rport)
        urls = []
        for name in ("a", "b"):
            port = free_port()
            log = open(os.path.join(tmp, name + ".log"), "w")
            procs.append(subprocess.Popen([HORIZON, "serve", "-m", model, "--port", str(port), "--threads", "2",
                                           "--max-model-len", "16384", "--kv-budget", "1GiB", "--kv-remote",
                                           f"redis://127.0.0.1:{rport}", "--kv-remote-secret", SECRET] + sys.argv[4:],
                                          stdout=log, stderr=log))
            wait_port(port, 300)
            urls.append(f"http://127.0.0.1:{port}")
        a, b = urls
        cold, ram, remote, ratios = [], [], [], []
        tokens = cached = 0
        for r in range(rounds):
            rng = random.Random(1000 + r)
            prompt = " ".join(rng.choice(WORDS) for _ in range(words))
            c, u = ttft(a, prompt)
            tokens = u["prompt_tokens"]
            writes = (tokens - 1) // 16
            end = time.time() + 60  # A writes its blocks behind
            while metric(a, "horizon_kv_remote_writes_total") < writes * (r + 1) and time.time() < end:
                time.sleep(0.05)
            h, _ = ttft(a, prompt)
            x, u2 = ttft(b, prompt)
            cached = u2["prompt_tokens_details"]["cached_tokens"]
            cold.append(c)
            ram.append(h)
            remote.append(x)
            ratios.append(c / x)
            print(f"round {r + 1}: {tokens} prompt tokens: cold {c * 1e3:.1f} ms, local RAM {h * 1e3:.1f} ms, "
                  f"Redis (other replica, {cached} cached) {x * 1e3:.1f} ms, cold/Redis {c / x:.1f}x", flush=True)
        # Redis frozen (SIGSTOP): new prompts on B wait out one call timeout at most, then skip Redis.
        procs[0].send_signal(19)
        frozen = []
        for r in range(3):
            rng = random.Random(5000 + r)
            f, _ = ttft(b, " ".join(rng.choice(WORDS) for _ in range(words)))
            frozen.append(f)
        procs[0].send_signal(18)
        print("Redis frozen: TTFT of 3 new prompts " + ", ".join(f"{f * 1e3:.1f} ms" for f in frozen) +
              f" (cold median {statistics.median(cold) * 1e3:.1f} ms; worst/cold {max(frozen) / statistics.median(cold):.2f}x)")
        time.sleep(2)
        hits = metric(b, "horizon_kv_remote_hits_total")
        rbytes = metric(b, "horizon_kv_remote_read_bytes_total")
        stats = subprocess.run([HORIZON, "kv", "stats", "--kv-remote", f"redis://127.0.0.1:{rport}"],
                               capture_output=True, text=True).stdout
        mem = re.search(r"(\d+) bytes each\), (\d+) bytes of Redis memory each", stats)
        print(f"median TTFT over {rounds} rounds ({tokens}-token prompt): cold {statistics.median(cold) * 1e3:.1f} ms, "
              f"local RAM {statistics.median(ram) * 1e3:.1f} ms, Redis {statistics.median(remote) * 1e3:.1f} ms; "
              f"cold/Redis median {statistics.median(ratios):.1f}x (min {min(ratios):.1f}, max {max(ratios):.1f})")
        print(f"wire: {rbytes / hits:.0f} bytes per 16-token block ({rbytes / hits / 16:.0f} per token)" if hits > 0 else "")
        if mem:
            print(f"Redis: {mem.group(1)} value bytes and {mem.group(2)} bytes of memory per record "
                  f"({int(mem.group(2)) / 16:.0f} bytes per token)")
        print(stats)
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
