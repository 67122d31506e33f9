#!/usr/bin/env python3
"""What the token attributes cost the audience index at 10M tokens: start-up, memory, and a narrowed count.

Two builds on two copies of one registry in which every token has platform, locale, time zone,
app version and a last-seen time (`--db`; see `Benchmarks/README.md` for how it is made): the
build before the attribute index (`--old`) and this one (`--new`). For each, on a release build:

- start-up until `GET /health` from the tables (no checkpoint) and from the checkpoint the first
  run saved at shutdown, the median of `--startups` rounds that alternate the builds;
- the server's resident memory after start-up from the checkpoint;
- on the new build, the 5-topic condition counted without a `where` and with three-key `where`s,
  alternating request by request, so that both see the same machine; the first request of each
  is shown apart, as it makes the unions of several values a key accepts.

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


def count_narrowed(server, key, trials):
    """The condition without and with each `where`, alternating request by request."""
    plain, narrowed, counts = [], {name: [] for name in WHERES}, {}
    for _ in range(trials):
        times, reply = timed(server, key, {"condition": CONDITION, "countOnly": True}, 1)
        plain += times
        counts["(none)"] = reply["count"]
        for name, where in WHERES.items():
            times, reply = timed(server, key, {"condition": CONDITION, "countOnly": True, "where": where}, 1)
            narrowed[name] += times
            counts[name] = reply["count"]
    return plain, narrowed, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--folder", default="/var/tmp/fcm-bench-attr")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--startups", type=int, default=3)
    args = parser.parse_args()
    key = json.load(open(args.db + ".key.json"))["server_key"]
    binaries = {"old": os.path.abspath(args.old), "new": os.path.abspath(args.new)}
    databases = {label: copy(args.db, args.folder, f"bench-{label}.sqlite") for label in binaries}
    # A first start, not measured, migrates each copy and warms the page cache for both builds alike.
    for label in binaries:
        Server(binaries[label], databases[label]).stop()
    tables, checkpoints, rows = {label: [] for label in binaries}, {label: [] for label in binaries}, {}
    for round in range(args.startups):
        for label in binaries:
            if os.path.exists(databases[label] + ".audience"):
                os.remove(databases[label] + ".audience")
            server = Server(binaries[label], databases[label])
            tables[label].append(server.startup)
            server.stop()
            server = Server(binaries[label], databases[label])
            checkpoints[label].append(server.startup)
            try:
                if round == args.startups - 1:
                    rows.setdefault("RSS after start-up from the checkpoint (MiB)", {})[label] = server.memory()[0]
                    rows.setdefault("index bytes (MiB)", {})[label] = (
                        server.metric("fcm_registry_audience_bytes") / 2**20)
                    if label == "new":
                        plain, narrowed, counts = count_narrowed(server, key, args.trials)
            finally:
                server.stop()
    rows[f"start-up from the tables, median of {args.startups} (s)"] = {
        label: statistics.median(times) for label, times in tables.items()}
    rows[f"start-up from the checkpoint, median of {args.startups} (s)"] = {
        label: statistics.median(times) for label, times in checkpoints.items()}
    print()
    print("| | old | new | new / old |")
    print("|---|---|---|---|")
    for row, values in rows.items():
        print(f"| {row} | {values['old']:.2f} | {values['new']:.2f} | {values['new'] / values['old']:.2f} |")
    print()
    print(f"The 5-topic condition counted on the new build, {args.trials} rounds alternating:")
    print()
    print("| where | count | first ms | median ms | p99 ms | median / without |")
    print("|---|---|---|---|---|---|")
    base = statistics.median(plain)
    print(f"| (none) | {counts['(none)']} | {plain[0]:.2f} | {base:.2f} | {percentile(plain, 99):.2f} | 1.00 |")
    for name, times in narrowed.items():
        print(f"| {name} | {counts[name]} | {times[0]:.2f} | {statistics.median(times):.2f} | "
              f"{percentile(times, 99):.2f} | {statistics.median(times) / base:.2f} |")


if __name__ == "__main__":
    main()
