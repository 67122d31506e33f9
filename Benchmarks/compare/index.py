#!/usr/bin/env python3
"""The audience index of two builds side by side, in one run: start-up, the 5-topic count and the
first page at the size of a generated registry (issue 46's bar: 10M tokens, 100k topics, 50M
subscriptions).

The registry is generated once by the old binary (or given with --db and --key) and copied for the
new one, which migrates its copy when it first opens it. Then, for --rounds rounds, each binary in
turn: start `serve` until `GET /health` answers (warm page cache, the checkpoint of the previous
stop), after --warmup unmeasured resolves, the median of --counts `countOnly` resolves of the condition over the five most popular
topics, the median of --pages first pages of 1000 tokens, and the resident memory; then SIGTERM.

    python3 Benchmarks/compare/index.py --old /path/to/old/fcm-registry --new .build/release/fcm-registry \
        --folder /var/tmp/fcm-bench

The first round of each binary also builds its checkpoint and is reported apart. Loopback only;
every server is stopped at the end. The two copies take about 12 GB at 10M.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

# The server, the timed resolves and the condition are the scale benchmark's (audience/scale.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "audience"))
from scale import CONDITION, Server, timed  # noqa: E402


def median_of(server, key, body, trials):
    """The median time of `trials` resolves of `body`, in ms, and the last answer."""
    times, reply = timed(server, key, body, trials)
    return statistics.median(times), reply


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--folder", required=True, help="where the two registries live (kept between runs)")
    parser.add_argument("--tokens", type=int, default=10_000_000)
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--subscriptions", type=int, default=50_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--counts", type=int, default=31)
    parser.add_argument("--pages", type=int, default=11)
    parser.add_argument("--warmup", type=int, default=300,
                        help="resolves made before timing: a server just started answers slower at first")
    args = parser.parse_args()

    os.makedirs(args.folder, exist_ok=True)
    old_db = os.path.join(args.folder, "big-old.sqlite")
    new_db = os.path.join(args.folder, "big-new.sqlite")
    key_file = old_db + ".key.json"
    if not os.path.exists(key_file):
        started = time.time()
        output = subprocess.run(
            [args.old, "generate", "--db", old_db, "--tokens", str(args.tokens), "--topics", str(args.topics),
             "--subscriptions", str(args.subscriptions), "--seed", "1"],
            check=True, capture_output=True, text=True).stdout
        with open(key_file, "w") as f:
            f.write(output[output.index("{"):])
        print(f"generated in {time.time() - started:.0f} s", flush=True)
    key = json.load(open(key_file))["server_key"]
    if not os.path.exists(new_db):
        shutil.copy(old_db, new_db)

    builds = [("old", args.old, old_db), ("new", args.new, new_db)]
    results = {name: [] for name, _, _ in builds}
    for round_ in range(args.rounds + 1):
        for name, binary, database in builds:
            server = Server(binary, database)
            try:
                timed(server, key, {"condition": CONDITION, "countOnly": True}, args.warmup)
                count, reply = median_of(server, key, {"condition": CONDITION, "countOnly": True}, args.counts)
                page, _ = median_of(server, key, {"condition": CONDITION, "pageSize": 1000}, args.pages)
                rss, _ = server.memory()
            finally:
                server.stop()
            row = (server.startup, count, page, rss, reply["count"])
            label = "first start (builds the checkpoint)" if round_ == 0 else f"round {round_}"
            print(f"{name} {label}: start {row[0]:.2f} s, count {row[1]:.3f} ms, first page {row[2]:.3f} ms, "
                  f"RSS {row[3]:.0f} MiB, count {row[4]}", flush=True)
            if round_ > 0:
                results[name].append(row)

    print()
    print("| figure | old | new | new / old |")
    print("|---|---|---|---|")
    for index, (figure, unit) in enumerate([("start-up (warm)", "s"), ("5-topic count, median", "ms"),
                                            ("first page of 1000, median", "ms"), ("RSS after", "MiB")]):
        old = statistics.median(row[index] for row in results["old"])
        new = statistics.median(row[index] for row in results["new"])
        print(f"| {figure} | {old:.3f} {unit} | {new:.3f} {unit} | {new / old:.3f} |")


if __name__ == "__main__":
    main()
