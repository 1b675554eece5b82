#!/usr/bin/env python3
"""A check of a running spark-serve with Python's standard library only, for machines without an
OpenAI client (the H200 machine has neither node nor the openai package): the greedy chat answer,
streamed and not, and the completion of the chat prompt's ids must be the transformers golden's
text; the usage must count the golden's ids; a stream abandoned mid-way must not disturb the next
request. Prints "http-check: N checks passed" or exits 1.

usage: http_check.py URL GOLDEN_CHAT.json
"""
import http.client
import json
import sys
import urllib.parse


def post(url, path, body, stream=False):
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=300)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    return conn, response


def events(response):
    buffer = b""
    while True:
        chunk = response.read1(65536)
        if not chunk:
            return
        buffer += chunk
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            if event.startswith(b"data: "):
                yield event[6:]


def main():
    url, golden = sys.argv[1], json.load(open(sys.argv[2], encoding="utf-8"))
    body = {"messages": golden["messages"], "max_tokens": len(golden["ids"]), "temperature": 0}
    passed = 0

    conn, r = post(url, "/v1/chat/completions", body)
    answer = json.loads(r.read())
    conn.close()
    assert r.status == 200, answer
    assert answer["choices"][0]["message"]["content"] == golden["text"], answer
    assert answer["usage"]["completion_tokens"] == len(golden["ids"]), answer["usage"]
    assert answer["usage"]["prompt_tokens"] == len(golden["prompt_ids"]), answer["usage"]
    passed += 1

    conn, r = post(url, "/v1/chat/completions", dict(body, stream=True))
    text = ""
    done = False
    for event in events(r):
        if event == b"[DONE]":
            done = True
            continue
        for choice in json.loads(event)["choices"]:
            text += choice["delta"].get("content") or ""
    conn.close()
    assert done and text == golden["text"], (done, text)
    passed += 1

    conn, r = post(url, "/v1/completions", {"prompt": golden["prompt_ids"],
                                            "max_tokens": len(golden["ids"]), "temperature": 0})
    completion = json.loads(r.read())
    conn.close()
    assert completion["choices"][0]["text"] == golden["text"], completion
    passed += 1

    conn, r = post(url, "/v1/chat/completions", dict(body, stream=True, max_tokens=400))
    for i, _ in enumerate(events(r)):
        if i == 2:
            break
    conn.close()  # abandoned mid-stream
    conn, r = post(url, "/v1/chat/completions", body)
    again = json.loads(r.read())
    conn.close()
    assert again["choices"][0]["message"]["content"] == golden["text"], again
    passed += 1
    print(f"http-check: {passed} checks passed")


if __name__ == "__main__":
    main()
