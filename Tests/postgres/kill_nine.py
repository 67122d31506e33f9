"""Three servers on one PostgreSQL database, one killed with SIGKILL while writes pour through all three.

Every write a server acknowledged is then found through each surviving server and through a server
started afterwards; a write whose answer was lost with the killed server is either there whole or
not at all (a group with both its members, or no group); and every server's index counts each topic
as the tables do. Run by run-on-postgres.sh: argv is the fcm-registry binary and a database URL
whose schema is empty.
"""
import json
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import requests

BINARY, DB = sys.argv[1], sys.argv[2]
TOPICS = [f"t{n}" for n in range(8)]
work = tempfile.mkdtemp()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name):
    port = free_port()
    log = open(f"{work}/{name}.log", "w")
    out = open(f"{work}/{name}.json", "w")
    process = subprocess.Popen(
        [BINARY, "serve", "--db", DB, "--port", str(port), "--xmpp-port", "off", "--log-level", "warning"],
        stdout=out, stderr=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if requests.get(f"{url}/health", timeout=1).ok:
                return process, url
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{name} did not start: " + open(f"{work}/{name}.log").read())


first, first_url = start("a")
project = json.load(open(f"{work}/a.json"))
headers = {"Authorization": f"key={project['server_key']}", "project_id": project["sender_id"],
           "Content-Type": "application/json"}
second, second_url = start("b")
third, third_url = start("c")
urls = [first_url, second_url, third_url]

acknowledged_subscriptions = []  # (token, topic)
acknowledged_groups = []  # (name, [tokens])
unanswered_groups = []  # the answer was lost: all or nothing
lock = threading.Lock()
stop = threading.Event()


def token(worker, n):
    return f"kill{worker}x{n}:APA91b" + "k" * 40


def writer(worker):
    n = 0
    rng = random.Random(worker)
    while not stop.is_set():
        n += 1
        url = urls[(worker + n) % 3]
        if n % 2:
            topic = rng.choice(TOPICS)
            tokens = [token(worker, f"{n}s{k}") for k in range(3)]
            try:
                reply = requests.post(f"{url}/iid/v1:batchAdd", headers=headers, timeout=10,
                                      json={"to": f"/topics/{topic}", "registration_tokens": tokens})
            except requests.RequestException:
                continue
            if reply.status_code == 200 and all(not r for r in reply.json()["results"]):
                with lock:
                    acknowledged_subscriptions.extend((t, topic) for t in tokens)
        else:
            name = f"g{worker}x{n}"
            members = [token(worker, f"{n}g{k}") for k in range(2)]
            body = {"operation": "create", "notification_key_name": name, "registration_ids": members}
            try:
                reply = requests.post(f"{url}/fcm/notification", headers=headers, json=body, timeout=10)
            except requests.RequestException:
                with lock:
                    unanswered_groups.append((name, members))
                continue
            if reply.status_code == 200 and "notification_key" in reply.json():
                with lock:
                    acknowledged_groups.append((name, members))


workers = [threading.Thread(target=writer, args=(w,)) for w in range(12)]
for thread in workers:
    thread.start()
time.sleep(2)
second.send_signal(signal.SIGKILL)
second.wait()
killed_at = len(acknowledged_subscriptions) + len(acknowledged_groups)
time.sleep(1.5)
stop.set()
for thread in workers:
    thread.join()
fourth, fourth_url = start("d")
survivors = [first_url, third_url, fourth_url]
failures = []


def topics_of(url, tok):
    reply = requests.get(f"{url}/iid/info/{tok}?details=true", headers=headers, timeout=10)
    if reply.status_code != 200:
        return set()
    return set(reply.json().get("rel", {}).get("topics", {}))


for url in survivors:
    for tok, topic in acknowledged_subscriptions:
        if topic not in topics_of(url, tok):
            failures.append(f"{url}: acknowledged subscription of {tok} to {topic} is missing")
    for name, members in acknowledged_groups:
        reply = requests.get(f"{url}/api/groups/{name}", headers=headers, timeout=10)
        if reply.status_code != 200 or sorted(m["token"] for m in reply.json().get("members", [])) != sorted(members):
            failures.append(f"{url}: acknowledged group {name} is missing or changed: {reply.status_code} {reply.text[:200]}")
    for name, members in unanswered_groups:
        reply = requests.get(f"{url}/api/groups/{name}", headers=headers, timeout=10)
        if reply.status_code == 200 and sorted(m["token"] for m in reply.json().get("members", [])) != sorted(members):
            failures.append(f"{url}: unanswered group {name} is half there: {reply.text[:200]}")
    # Each server's index, caught up from the feed, counts what the tables hold.
    for topic in TOPICS:
        count = requests.post(f"{url}/api/audiences:resolve", headers=headers, timeout=10,
                              json={"condition": f"'{topic}' in topics", "countOnly": True}).json()["count"]
        listed = requests.get(f"{url}/api/topics/{topic}", headers=headers, timeout=10)
        stored = listed.json().get("subscriberCount") if listed.status_code == 200 else 0
        if count != stored:
            failures.append(f"{url}: index counts {count} in {topic}, the topic {stored}")

for process in (first, third, fourth):
    process.terminate()
    process.wait()
print(f"{len(acknowledged_subscriptions)} subscriptions and {len(acknowledged_groups)} groups acknowledged "
      f"({killed_at} before the kill), {len(unanswered_groups)} group creates unanswered; "
      f"checked through 3 servers: {len(failures)} failures")
for failure in failures[:20]:
    print(failure)
sys.exit(1 if failures or not acknowledged_groups or not acknowledged_subscriptions else 0)
