"""Two servers on one PostgreSQL that is restarted and stopped under writes: neither goes stale.

A private cluster (cluster.sh) holds the registry; server A and server B serve it, and writers
subscribe new tokens to eight topics through B without pause. Each cycle:

1. `pg_ctl restart` (fast: every session ended, as a failover does). Afterwards both servers'
   indexes count each topic as the tables do, within 30 s of the database's return.
2. The cluster stopped for --stop-seconds (15). Meanwhile a write through A is answered 503 with
   Retry-After within 5 s, and A's /readyz answers 503. After the start, /readyz answers 200 again,
   writes succeed again, and both indexes again count what the tables hold.

After the last cycle the cluster is stopped once more: A gets SIGTERM during the outage, B after
the database's return; each must exit 0 within the shutdown deadline, and no log may hold a crash.
Every event prints each server's lag, so repeating the cycles shows whether any server ever stays
behind. Exits 1 at the first failed expectation.

    python3 Tests/postgres/outage.py .build/debug/fcm-registry [--cycles N] [--stop-seconds S]
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import requests

parser = argparse.ArgumentParser()
parser.add_argument("binary")
parser.add_argument("--cycles", type=int, default=1)
parser.add_argument("--stop-seconds", type=float, default=15)
arguments = parser.parse_args()

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "cluster.sh")
TOPICS = [f"outage{n}" for n in range(8)]
SHUTDOWN_DEADLINE = 10
work = tempfile.mkdtemp()
os.chmod(work, 0o755)  # the cluster runs as postgres when this runs as root
cluster = os.path.join(work, "cluster")
failures = []


def cluster_command(command):
    return subprocess.run(["bash", CLUSTER, command, cluster], check=True, capture_output=True, text=True).stdout.strip()


def fail(text):
    print(f"FAIL: {text}", flush=True)
    failures.append(text)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


url = cluster_command("start")
servers = {}


def start(name):
    port = free_port()
    log = open(f"{work}/{name}.log", "w")
    out = open(f"{work}/{name}.json", "w")
    process = subprocess.Popen(
        [arguments.binary, "serve", "--db", url, "--port", str(port), "--xmpp-port", "off",
         "--shutdown-deadline", f"{SHUTDOWN_DEADLINE}s"],
        stdout=out, stderr=log)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if requests.get(f"{base}/health", timeout=1).ok:
                servers[name] = (process, base)
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{name} did not start: " + open(f"{work}/{name}.log").read())


def stop_all():
    for process, _ in servers.values():
        if process.poll() is None:
            process.kill()
    subprocess.run(["bash", CLUSTER, "stop", cluster], capture_output=True)


start("A")
project = json.load(open(f"{work}/A.json"))
headers = {"Authorization": f"key={project['server_key']}", "Content-Type": "application/json"}
start("B")

written = {"ok": 0, "refused": 0}
writing = threading.Event()
writing.set()
done = threading.Event()


def writer(worker):
    n = 0
    while not done.is_set():
        writing.wait()
        n += 1
        topic = TOPICS[(worker + n) % len(TOPICS)]
        tokens = [f"outage{worker}x{n}x{k}:APA91b" + "o" * 40 for k in range(5)]
        try:
            reply = requests.post(f"{servers['B'][1]}/iid/v1:batchAdd", headers=headers, timeout=15,
                                  json={"to": f"/topics/{topic}", "registration_tokens": tokens})
            written["ok" if reply.status_code == 200 else "refused"] += 1
        except requests.RequestException:
            written["refused"] += 1
            time.sleep(0.2)


threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(3)]
for thread in threads:
    thread.start()


def table_counts():
    rows = subprocess.run(
        ["psql", url.split("?")[0], "-Atc",
         'SELECT t.name, COUNT(s."tokenId") FROM topic t LEFT JOIN subscription s ON s."topicId" = t.id GROUP BY t.name'],
        check=True, capture_output=True, text=True).stdout.split()
    return {name: int(count) for name, count in (row.split("|") for row in rows)}


def index_counts(base):
    counts = {}
    for topic in TOPICS:
        reply = requests.post(f"{base}/api/audiences:resolve", headers=headers, timeout=5,
                              json={"topic": topic, "countOnly": True})
        counts[topic] = reply.json().get("count", 0) if reply.status_code == 200 else None
    return counts


def readiness(base):
    try:
        reply = requests.get(f"{base}/readyz", timeout=5)
        return reply.status_code, reply.json()
    except (requests.RequestException, ValueError) as error:
        return None, {"error": str(error)}


def converge(event, since):
    """With the writers paused, waits until both indexes count what the tables hold."""
    writing.clear()
    time.sleep(1)  # writes in flight land
    truth = table_counts()
    truth = {topic: truth.get(topic, 0) for topic in TOPICS}
    for name, (_, base) in servers.items():
        deadline = time.monotonic() + 30
        while True:
            try:
                counts = index_counts(base)
            except requests.RequestException:
                counts = None
            if counts == truth:
                status, body = readiness(base)
                print(f"  {event}: {name} counts what the tables hold {time.monotonic() - since:.1f} s after the "
                      f"database's return (/readyz {status}, feed lag {body.get('feedLagSeconds')} s)", flush=True)
                break
            if time.monotonic() > deadline:
                behind = {t: (counts or {}).get(t) for t in TOPICS if (counts or {}).get(t) != truth[t]}
                fail(f"{event}: {name} stayed behind the tables for 30 s: index {behind}, tables "
                     f"{ {t: truth[t] for t in behind} }")
                break
            time.sleep(0.2)
    writing.set()


def wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def outage_checks(event):
    """During a stop: a write through A is refused fast, with Retry-After; /readyz says 503."""
    time.sleep(1)
    started = time.monotonic()
    try:
        reply = requests.post(f"{servers['A'][1]}/iid/v1:batchAdd", headers=headers, timeout=30,
                              json={"to": "/topics/outage0", "registration_tokens": ["during:APA91b" + "d" * 40]})
        took = time.monotonic() - started
        if reply.status_code != 503 or "Retry-After" not in reply.headers or took > 5:
            fail(f"{event}: a write through A during the outage got {reply.status_code} "
                 f"(Retry-After {reply.headers.get('Retry-After')}) after {took:.1f} s")
        else:
            print(f"  {event}: a write through A answered 503 with Retry-After {reply.headers['Retry-After']} "
                  f"in {took:.1f} s", flush=True)
    except requests.RequestException as error:
        fail(f"{event}: a write through A during the outage: {error}")
    if wait_for(lambda: readiness(servers["A"][1])[0] == 503, 5):
        status, body = readiness(servers["A"][1])
        print(f"  {event}: A's /readyz answers 503: {body.get('reasons')}", flush=True)
    else:
        fail(f"{event}: A's /readyz did not answer 503 during the outage: {readiness(servers['A'][1])}")


def recovery_checks(event, since):
    for name, (_, base) in servers.items():
        if wait_for(lambda: readiness(base)[0] == 200, 15):
            print(f"  {event}: {name}'s /readyz answers 200 {time.monotonic() - since:.1f} s after the database's "
                  f"return", flush=True)
        else:
            fail(f"{event}: {name}'s /readyz did not answer 200 within 15 s of the return: {readiness(base)}")


try:
    for cycle in range(1, arguments.cycles + 1):
        print(f"cycle {cycle}", flush=True)
        time.sleep(2)
        cluster_command("restart")
        back = time.monotonic()
        converge(f"cycle {cycle}, restart", back)

        time.sleep(2)
        cluster_command("stop")
        stopped = time.monotonic()
        outage_checks(f"cycle {cycle}, {arguments.stop_seconds:.0f} s stop")
        time.sleep(max(0, arguments.stop_seconds - (time.monotonic() - stopped)))
        cluster_command("start-again")
        back = time.monotonic()
        recovery_checks(f"cycle {cycle}, {arguments.stop_seconds:.0f} s stop", back)
        converge(f"cycle {cycle}, {arguments.stop_seconds:.0f} s stop", back)

    print("stops after an outage", flush=True)
    done.set()
    time.sleep(1)
    cluster_command("stop")
    time.sleep(3)
    for name in ["A", "B"]:
        if name == "B":
            cluster_command("start-again")
            time.sleep(3)
        process, _ = servers[name]
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=SHUTDOWN_DEADLINE + 10)
            took = time.monotonic() - started
            during = "during the outage" if name == "A" else "after the outage"
            if code != 0:
                fail(f"SIGTERM {during}: {name} exited {code} after {took:.1f} s")
            else:
                print(f"  SIGTERM {during}: {name} exited 0 in {took:.1f} s", flush=True)
        except subprocess.TimeoutExpired:
            fail(f"SIGTERM: {name} still ran {SHUTDOWN_DEADLINE + 10} s later")
    for name in servers:
        log = open(f"{work}/{name}.log").read()
        if "Fatal error" in log or "Cancellation took longer" in log:
            fail(f"{name} crashed: " + log[-2000:])
    print(f"writes: {written['ok']} acknowledged, {written['refused']} refused or lost during outages")
finally:
    done.set()
    stop_all()

if failures:
    for name in servers:
        print(f"--- {name}'s log (last lines)", file=sys.stderr)
        print("\n".join(open(f"{work}/{name}.log").read().splitlines()[-40:]), file=sys.stderr)
    sys.exit(1)
print(f"{arguments.cycles} cycles: no server stayed behind, every stop exited 0")
