#!/usr/bin/env python3
"""`messages:send` per second as a share of `GET /health` on the same listener: HTTP/2 with TLS
(h2load) and HTTP/1.1 without (wrk), one server, one run.

    python3 Benchmarks/http/send_ratio.py --binary .build/release/fcm-registry

Needs wrk and h2load (Debian: apt-get install wrk nghttp2-client). Loopback only.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def h2load(url, seconds, headers=(), data=None):
    command = ["h2load", "-D", str(seconds), "-c", "16", "-m", "8", "-t", "1"]
    for header in headers:
        command += ["-H", header]
    if data:
        command += ["-d", data]
    output = subprocess.run(command + [url], capture_output=True, text=True).stdout
    match = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", output)
    failed = re.search(r"(\d+) failed", output)
    return float(match.group(1)) if match else 0.0, int(failed.group(1)) if failed else -1


def wrk(url, seconds, script=None, environment=None):
    command = ["wrk", "-t2", "-c32", f"-d{seconds}s"] + (["-s", os.path.join(HERE, script)] if script else [])
    output = subprocess.run(command + [url], capture_output=True, text=True,
                            env={**os.environ, **(environment or {})}).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    return float(match.group(1)) if match else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=".build/release/fcm-registry")
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="send-ratio-")
    binary = os.path.abspath(args.binary)
    subprocess.run([binary, "tls", "init", "--dir", f"{folder}/certs"], check=True, stdout=subprocess.DEVNULL)
    plain, tls = free_port(), free_port()
    server = subprocess.Popen(
        [binary, "serve", "--db", f"{folder}/r.sqlite", "--port", str(plain), "--tls-port", str(tls), "--tls-cert",
         f"{folder}/certs/server.pem", "--tls-key", f"{folder}/certs/server-key.pem", "--key-file",
         f"{folder}/key.json", "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{plain}/health")
                break
            except OSError:
                time.sleep(0.1)
        created = json.load(open(f"{folder}/key.json"))
        key, project = created["server_key"], created["project_id"]
        body = f"{folder}/send.json"
        with open(body, "w") as f:
            f.write('{"message":{"topic":"bench","data":{"score":"5x1"}}}')
        headers = [f"authorization: Bearer {key}", "content-type: application/json"]
        send_path = f"/v1/projects/{project}/messages:send"
        rows = []
        health, _ = h2load(f"https://127.0.0.1:{tls}/health", args.seconds)
        sends, failed = h2load(f"https://127.0.0.1:{tls}{send_path}", args.seconds, headers, body)
        rows.append(("HTTP/2 + TLS (h2load, 16 connections × 8 streams)", sends, health, failed))
        health = wrk(f"http://127.0.0.1:{plain}/health", args.seconds)
        sends = wrk(f"http://127.0.0.1:{plain}", args.seconds, "v1-send.lua", {"KEY": key, "PROJECT": project})
        rows.append(("HTTP/1.1 plain (wrk, 32 connections)", sends, health, 0))
        print("| listener | messages:send/s | GET /health/s | ratio | failed sends |")
        print("|---|---|---|---|---|")
        for name, sends, health, failed in rows:
            print(f"| {name} | {sends:.0f} | {health:.0f} | {sends / health:.1%} | {failed} |")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
