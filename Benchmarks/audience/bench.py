#!/usr/bin/env python3
"""Audience resolution on a generated registry, served by `fcm-registry serve`, next to the
same set algebra done by redis-server on the same data, in the same run.

    fcm-registry generate --db bench.sqlite --tokens 1000000 --topics 10000 --subscriptions 5000000
    fcm-registry serve --db bench.sqlite --port 8095 &
    python3 bench.py --url http://127.0.0.1:8095 --key <server key> --db bench.sqlite --pid <server pid>

Needs redis-server and the `redis` Python package. Prints medians in milliseconds.
"""

import argparse
import http.client
import json
import sqlite3
import statistics
import subprocess
import tempfile
import time
import urllib.parse

import redis

# Five most popular topics of the generated registry, with &&, || and !.
CONDITION = ("('topic-1' in topics && ('topic-2' in topics || 'topic-3' in topics))"
             " || (!('topic-4' in topics) && 'topic-5' in topics)")


CONNECTIONS = {}


def post(url, key, body):
    """POST on one kept-alive connection, as a client library would."""
    if url not in CONNECTIONS:
        host = urllib.parse.urlparse(url)
        CONNECTIONS[url] = http.client.HTTPConnection(host.hostname, host.port)
    connection = CONNECTIONS[url]
    connection.request("POST", "/api/audiences:resolve", body=json.dumps(body),
                       headers={"Authorization": "key=" + key, "Content-Type": "application/json"})
    response = connection.getresponse()
    return json.loads(response.read())


def timed(function, runs):
    times = []
    result = None
    for _ in range(runs):
        started = time.perf_counter()
        result = function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), result


def load_redis(db_path, port):
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.1)
    client.flushall()
    database = sqlite3.connect(db_path)
    pipe = client.pipeline(transaction=False)
    current, members = None, []
    for topic, token in database.execute(
            "SELECT topic.name, subscription.tokenId FROM subscription JOIN topic ON topic.id = subscription.topicId "
            "ORDER BY subscription.topicId"):
        if topic != current and members:
            pipe.sadd(current, *members)
            members = []
        current = topic
        members.append(token)
        if len(members) >= 10000:
            pipe.sadd(current, *members)
            members = []
            pipe.execute()
    if members:
        pipe.sadd(current, *members)
    batch = []
    for (token,) in database.execute("SELECT id FROM token WHERE state = 'registered'"):
        batch.append(token)
        if len(batch) >= 10000:
            pipe.sadd("all-registered", *batch)
            batch = []
    if batch:
        pipe.sadd("all-registered", *batch)
    pipe.execute()
    return server, client


REDIS_SCRIPT = """
redis.call('SUNIONSTORE', 'q:bc', 'topic-2', 'topic-3')
redis.call('SINTERSTORE', 'q:left', 'topic-1', 'q:bc')
redis.call('SDIFFSTORE', 'q:not4', 'all-registered', 'topic-4')
redis.call('SINTERSTORE', 'q:right', 'q:not4', 'topic-5')
local count = redis.call('SUNIONSTORE', 'q:result', 'q:left', 'q:right')
redis.call('DEL', 'q:bc', 'q:left', 'q:not4', 'q:right', 'q:result')
return count
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--pid", type=int)
    parser.add_argument("--redis-port", type=int, default=6390)
    args = parser.parse_args()

    count_ms, counted = timed(lambda: post(args.url, args.key, {"condition": CONDITION, "countOnly": True}), 31)
    page_ms, page = timed(lambda: post(args.url, args.key, {"condition": CONDITION, "pageSize": 1000}), 21)

    def page_through():
        token, total = None, 0
        while True:
            body = {"topic": "topic-1", "pageSize": 1000}
            if token:
                body["pageToken"] = token
            reply = post(args.url, args.key, body)
            total += len(reply["tokens"])
            token = reply.get("nextPageToken")
            if not token:
                return total

    paging_ms, paged = timed(page_through, 3)

    server, client = load_redis(args.db, args.redis_port)
    try:
        script = client.register_script(REDIS_SCRIPT)
        redis_ms, redis_count = timed(lambda: script(), 11)
        redis_memory = client.info("memory")["used_memory"] / 2**20
    finally:
        server.terminate()

    rss = None
    if args.pid:
        with open(f"/proc/{args.pid}/status") as status:
            rss = next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))

    print(f"condition: {CONDITION}")
    print(f"count over HTTP:            median {count_ms:8.2f} ms   count {counted['count']}")
    print(f"same algebra in redis:      median {redis_ms:8.2f} ms   count {redis_count}   ({redis_ms / count_ms:.0f}x slower)")
    print(f"first page of 1000 tokens:  median {page_ms:8.2f} ms   ({len(page['tokens'])} tokens)")
    print(f"paging through topic-1:     median {paging_ms:8.0f} ms for {paged} tokens")
    if rss:
        print(f"server memory (VmRSS):      {rss:.0f} MiB   (redis used_memory {redis_memory:.0f} MiB)")
    assert counted["count"] == redis_count, "fcm-registry and redis disagree"


if __name__ == "__main__":
    main()
