#!/usr/bin/env python3
"""Send what an app database knows of each token to fcm-registry: `POST /api/tokens:batchUpdate`,
1000 tokens a request, a few requests at a time.

The input is CSV with a header row naming any of: token (required), platform, locale, timeZone,
appVersion, lastSeenAt (RFC 3339, or a Unix time in seconds). An empty cell leaves that field as it
is; the literal `null` clears it. Export it from the app's own database, for example:

    sqlite3 -header -csv app.db \\
      "SELECT token, platform, locale, time_zone AS timeZone, app_version AS appVersion,
              strftime('%Y-%m-%dT%H:%M:%SZ', last_seen, 'unixepoch') AS lastSeenAt FROM devices" > tokens.csv
    token-attributes.py --url http://127.0.0.1:8080 --key "$KEY" tokens.csv

Every token named is registered (as `PUT /api/tokens/{token}` registers it). stderr says how many
were updated and refused, with the first refusals and their reasons, and the rate; the exit status
is 0 when every token was taken, 1 when some were refused, 2 when a request failed as a whole.
"""

import argparse
import concurrent.futures
import csv
import datetime
import http.client
import json
import sys
import threading
import time
import urllib.parse

FIELDS = ["platform", "locale", "timeZone", "appVersion", "lastSeenAt"]
BATCH = 1000


def entry(row, line):
    token = (row.get("token") or "").strip()
    if not token:
        raise SystemExit(f"line {line}: no token")
    out = {"token": token}
    for field in FIELDS:
        value = (row.get(field) or "").strip()
        if not value:
            continue
        if value == "null":
            out[field] = None
        elif field == "lastSeenAt" and value.isdigit():
            out[field] = datetime.datetime.fromtimestamp(int(value), datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        else:
            out[field] = value
    return out


def batches(reader):
    batch = []
    for line, row in enumerate(reader, start=2):
        batch.append(entry(row, line))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


class Client:
    """One keep-alive connection per worker thread."""

    def __init__(self, url, key):
        self.parts = urllib.parse.urlsplit(url)
        self.headers = {"Authorization": f"key={key}", "Content-Type": "application/json"}
        self.connection = None

    def post(self, batch):
        body = json.dumps({"tokens": batch})
        for attempt in range(3):
            try:
                if self.connection is None:
                    kind = http.client.HTTPSConnection if self.parts.scheme == "https" else http.client.HTTPConnection
                    self.connection = kind(self.parts.hostname, self.parts.port, timeout=60)
                self.connection.request("POST", "/api/tokens:batchUpdate", body, self.headers)
                response = self.connection.getresponse()
                reply = response.read()
                if response.status == 503 and attempt < 2:
                    time.sleep(1 + attempt)
                    continue
                if response.status != 200:
                    raise SystemExit(f"tokens:batchUpdate answered {response.status}: {reply[:300].decode(errors='replace')}")
                return json.loads(reply)["results"]
            except (OSError, http.client.HTTPException):
                self.connection = None
                if attempt == 2:
                    raise
                time.sleep(1 + attempt)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="the CSV file, or - for standard input")
    parser.add_argument("--url", required=True, help="fcm-registry's base URL, such as http://127.0.0.1:8080")
    parser.add_argument("--key", required=True, help="a server key with the subscribe scope")
    parser.add_argument("--workers", type=int, default=4, help="requests in flight at once (default 4)")
    args = parser.parse_args()

    source = sys.stdin if args.csv == "-" else open(args.csv, newline="", encoding="utf-8")
    reader = csv.DictReader(source)
    if "token" not in (reader.fieldnames or []):
        print("token-attributes: the header row has no token column", file=sys.stderr)
        return 2
    clients = {}

    def send(batch):
        client = clients.setdefault(threading.get_ident(), Client(args.url, args.key))
        return client.post(batch)

    started = time.perf_counter()
    counts = {"updated": 0, "refused": 0}
    examples = []

    def tally(results):
        for result in results:
            if "error" in result:
                counts["refused"] += 1
                if len(examples) < 5:
                    examples.append(f"{result['token'][:40]}: {result['error'].get('message')}")
            else:
                counts["updated"] += 1

    try:
        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
            pending = set()
            for batch in batches(reader):
                pending.add(pool.submit(send, batch))
                if len(pending) >= args.workers * 2:
                    done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                    for future in done:
                        tally(future.result())
            for future in concurrent.futures.as_completed(pending):
                tally(future.result())
    except SystemExit as failure:
        print(f"token-attributes: {failure}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    total = counts["updated"] + counts["refused"]
    rate = total / seconds if seconds > 0 else 0
    print(f"token-attributes: {counts['updated']} updated, {counts['refused']} refused in {seconds:.1f} s "
          f"({rate:,.0f} tokens/s)", file=sys.stderr)
    for example in examples:
        print(f"  refused {example}", file=sys.stderr)
    return 1 if counts["refused"] else 0


if __name__ == "__main__":
    sys.exit(main())
