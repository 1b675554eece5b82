#!/usr/bin/env python3
"""Time to first token and tokens/s per stream of a running spark-serve, with Python's standard
library only (so it runs where no OpenAI client is installed). Sends REQUESTS streamed chat
requests one after another (greedy, max_tokens TOKENS, ignore EOS is not possible: the figures
count the tokens each request generated, from its usage chunk), each with a different user message
so that the prefix cache serves only the shared system prompt, and prints one line per request and
a summary:
  ttft_ms   from sending the request to the first content chunk
  tok/s     (completion_tokens - 1) / (time of the last chunk - time of the first)

usage: serve_bench.py URL [--requests 5] [--tokens 128]
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import time
import urllib.parse

# The server-sent-event reader of the standard-library check (test/serve/http_check.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "serve"))
from http_check import events  # noqa: E402


def stream(url, body):
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise SystemExit(f"HTTP {response.status}: {response.read()[:300]!r}")
    first = last = None
    usage = None
    for event in events(response):
        if event == b"[DONE]":
            continue
        data = json.loads(event)
        if data.get("usage"):
            usage = data["usage"]
        for choice in data.get("choices", []):
            if choice["delta"].get("content"):
                now = time.perf_counter()
                first = first or now
                last = now
    conn.close()
    return start, first, last, usage


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    ttfts, rates = [], []
    for i in range(args.requests):
        body = {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                             {"role": "user", "content": f"Request {i}: tell me a long story."}],
                "max_tokens": args.tokens, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}}
        start, first, last, usage = stream(args.url, body)
        n = usage["completion_tokens"]
        ttft = (first - start) * 1e3
        rate = (n - 1) / (last - first) if last > first else float("nan")
        ttfts.append(ttft)
        rates.append(rate)
        print(f"request {i}: prompt {usage['prompt_tokens']} tokens, {n} generated, "
              f"ttft_ms {ttft:.1f}, tok/s {rate:.1f}")
    print(f"summary: {args.requests} requests, median ttft_ms {statistics.median(ttfts):.1f}, "
          f"median tok/s {statistics.median(rates):.1f}")


if __name__ == "__main__":
    main()
