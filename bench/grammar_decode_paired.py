#!/usr/bin/env python3
"""Decode speed with and without a grammar, paired: against a running `horizon serve`, alternates a
plain completion and the same completion under response_format json_object (the grammar keeps the
model inside a JSON string, the common case), greedy, ignore_eos, and reports decode tok/s of each
(time from the first to the last streamed token) and the median of the per-round ratios.
Usage: bench/grammar_decode_paired.py URL [ROUNDS] [TOKENS]"""
import json
import statistics
import sys
import time
import urllib.request


def decode_rate(url, tokens, grammar):
    body = {"prompt": "Once upon a time", "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    if grammar:
        # A JSON object whose string never closes within max_tokens: every token is masked.
        body["grammar"] = 'root ::= "{\\"story\\": \\"" [a-zA-Z ,.]*'
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    first = last = None
    n = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                now = time.perf_counter()
                first = first or now
                last = now
            if chunk.get("usage"):
                n = chunk["usage"]["completion_tokens"]
    return (n - 1) / (last - first)


def main():
    url = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    decode_rate(url, 8, True)  # warm-up: compiles and caches the grammar's tables
    plain, constrained, ratios = [], [], []
    for i in range(rounds):
        order = [False, True] if i % 2 == 0 else [True, False]
        rates = {}
        for g in order:
            rates[g] = decode_rate(url, tokens, g)
        plain.append(rates[False])
        constrained.append(rates[True])
        ratios.append(rates[True] / rates[False])
        print(f"round {i}: plain {rates[False]:.2f} tok/s, grammar {rates[True]:.2f} tok/s, ratio {ratios[-1]:.3f}")
    print(f"median plain {statistics.median(plain):.2f} tok/s, grammar {statistics.median(constrained):.2f} tok/s, "
          f"median ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
