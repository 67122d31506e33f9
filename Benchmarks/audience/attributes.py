#!/usr/bin/env python3
"""What the token attributes cost the audience index at 10M tokens: start-up, memory, and a narrowed count.

Two builds on two copies of one registry in which every token has platform, locale, time zone,
app version and a last-seen time (`--db`; see `Benchmarks/README.md` for how it is made): the
build before the attribute index (`--old`) and this one (`--new`). For each, on a release build:

- start-up until `GET /health` from the tables (no checkpoint) and from the checkpoint the first
  run saved at shutdown;
- the server's resident memory after start-up from the checkpoint;
- on the new build, the 5-topic condition counted without a `where` and with three-key `where`s,
  alternating request by request, so that both see the same machine.

    python3 Benchmarks/audience/attributes.py --old /path/to/old/fcm-registry \\
        --new .build/release/fcm-registry --db /var/tmp/fcm-bench-attr/big-attr.sqlite

The copies are made once in `--folder` (6 GB each) and kept for the next run.
"""
import argparse
import json
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import CONDITION, Server, percentile, timed  # noqa: E402

WHERES = {
    "platform + locale + seenWithin 30 d": {"platform": ["ios"], "locale": ["fr"], "seenWithin": "2592000s"},
    "platform + locale + timeZone": {"platform": ["ios"], "locale": ["fr"], "timeZone": ["Europe/Paris"]},
    "platform + appVersion + seenWithin 90 d": {
        "platform": ["android", "web"], "appVersion": {"min": "5.10", "max": "5.29.9"}, "seenWithin": "7776000s"},
}


def copy(source, folder, name):
    target = os.path.join(folder, name)
    if not os.path.exists(target):
        shutil.copyfile(source, target)
    for suffix in ["-wal", "-shm", ".audience"]:
        if os.path.exists(target + suffix):
            os.remove(target + suffix)
    return target


def starts(binary, database):
    """Start-up from the tables, then from the checkpoint; the second server is returned running.
    A first start, not measured, migrates the copy and warms the page cache for both builds alike."""
    Server(binary, database).stop()
    if os.path.exists(database + ".audience"):
        os.remove(database + ".audience")
    server = Server(binary, database)
    from_tables = server.startup
    server.stop()
    server = Server(binary, database)
    return from_tables, server


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--folder", default="/var/tmp/fcm-bench-attr")
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    key = json.load(open(args.db + ".key.json"))["server_key"]
    rows = {}
    for label, binary in [("old", args.old), ("new", args.new)]:
        database = copy(args.db, args.folder, f"bench-{label}.sqlite")
        from_tables, server = starts(os.path.abspath(binary), database)
        try:
            rss, _ = server.memory()
            rows.setdefault("start-up from the tables", {})[label] = from_tables
            rows.setdefault("start-up from the checkpoint", {})[label] = server.startup
            rows.setdefault("RSS after start-up from the checkpoint (MiB)", {})[label] = rss
            rows.setdefault("index bytes (MiB)", {})[label] = server.metric("fcm_registry_audience_bytes") / 2**20
            if label == "new":
                plain, narrowed = [], {name: [] for name in WHERES}
                counts = {}
                for _ in range(args.trials):
                    times, reply = timed(server, key, {"condition": CONDITION, "countOnly": True}, 1)
                    plain += times
                    counts["(none)"] = reply["count"]
                    for name, where in WHERES.items():
                        times, reply = timed(server, key, {"condition": CONDITION, "countOnly": True, "where": where}, 1)
                        narrowed[name] += times
                        counts[name] = reply["count"]
        finally:
            server.stop()
    print()
    print("| | old | new | new / old |")
    print("|---|---|---|---|")
    for row, values in rows.items():
        print(f"| {row} | {values['old']:.2f} | {values['new']:.2f} | {values['new'] / values['old']:.2f} |")
    print()
    print(f"The 5-topic condition counted on the new build, {args.trials} rounds alternating:")
    print()
    print("| where | count | median ms | p99 ms | median / without |")
    print("|---|---|---|---|---|")
    base = statistics.median(plain)
    print(f"| (none) | {counts['(none)']} | {base:.2f} | {percentile(plain, 99):.2f} | 1.00 |")
    for name, times in narrowed.items():
        print(f"| {name} | {counts[name]} | {statistics.median(times):.2f} | {percentile(times, 99):.2f} | "
              f"{statistics.median(times) / base:.2f} |")


if __name__ == "__main__":
    main()
