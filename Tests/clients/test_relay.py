"""A relaying fcm-registry delivers through "FCM": another fcm-registry, under Google's host names.

run-relay.sh starts two servers. The upstream plays FCM and Google's token endpoint on
https://fcm.googleapis.com and https://oauth2.googleapis.com (a hosts file private to the test,
TLS from `tls init`); it judges tokens, logs what it received and fails on demand. The relaying
server (plain HTTP on 127.0.0.1) holds the app's registry, turned on with `project relay` and the
upstream project's service-account file, and trusts the upstream's CA through --relay-ca-file.
Real clients (firebase-admin, pyfcm) send to the relaying server; each test checks what the
sender was answered, what the relay recorded and what the upstream received.

Tokens are registered on the upstream by subscribing them to a topic there; a token the upstream
was never told about is UNREGISTERED, as FCM's would be.
"""

import json
import os
import subprocess
import time
import urllib.parse
import uuid

import firebase_admin
import pytest
import requests
from firebase_admin import credentials, exceptions, messaging
from pyfcm import FCMNotification
from pyfcm.errors import FCMNotRegisteredError
from polling import eventually

RELAY_URL = os.environ["RELAY_URL"]
RELAY_PROJECT = os.environ["RELAY_PROJECT"]
RELAY_KEY = os.environ["RELAY_KEY"]
RELAY_SENDER_ID = os.environ["RELAY_SENDER_ID"]
RELAY_SERVICE_ACCOUNT = os.environ["RELAY_SERVICE_ACCOUNT"]
RELAY_DB = os.environ["RELAY_DB"]
BINARY = os.environ["FCM_REGISTRY_BINARY"]
UPSTREAM_URL = "https://fcm.googleapis.com"
UPSTREAM_PROJECT = os.environ["UPSTREAM_PROJECT"]
UPSTREAM_KEY = os.environ["UPSTREAM_KEY"]
UPSTREAM_SERVICE_ACCOUNT = os.environ["UPSTREAM_SERVICE_ACCOUNT"]
# serve --relay-max-attempts, as run-relay.sh sets it.
MAX_ATTEMPTS = int(os.environ["RELAY_MAX_ATTEMPTS"])

RELAY = {"Authorization": f"key={RELAY_KEY}"}
UPSTREAM = {"Authorization": f"key={UPSTREAM_KEY}"}


# MARK: - Helpers


def token(label):
    return f"{label}{uuid.uuid4().hex[:12]}:APA91b" + "Q" * 40


def quoted(value):
    """Message ids and tokens in a path: legacy ids hold ':' and '%'."""
    return urllib.parse.quote(value, safe="")


def ok(reply):
    assert reply.status_code == 200, (reply.status_code, reply.text)
    return reply.json()


def register_upstream(*tokens):
    """Tells "FCM" about the tokens: the upstream delivers only to tokens it knows."""
    ok(requests.post(f"{UPSTREAM_URL}/iid/v1:batchAdd", headers=UPSTREAM,
                     json={"to": "/topics/devices", "registration_tokens": list(tokens)}))


def subscribe_relay(topic, *tokens):
    ok(requests.post(f"{RELAY_URL}/iid/v1:batchAdd", headers=RELAY,
                     json={"to": f"/topics/{topic}", "registration_tokens": list(tokens)}))


def fault(tok, error, **more):
    ok(requests.put(f"{UPSTREAM_URL}/api/tokens/{quoted(tok)}/fault", headers=UPSTREAM,
                    json={"error": error, **more}))


def clear_fault(tok):
    requests.delete(f"{UPSTREAM_URL}/api/tokens/{quoted(tok)}/fault", headers=UPSTREAM)


def received_upstream(tok):
    """The v1 messages the upstream received for a token, oldest first, payloads decoded."""
    reply = requests.get(f"{UPSTREAM_URL}/api/tokens/{quoted(tok)}/messages", headers=UPSTREAM)
    if reply.status_code == 404:
        return []
    messages = ok(reply)["messages"]
    for message in messages:
        message["payload"] = json.loads(message["payload"])
    return list(reversed(messages))


def relay_token(tok):
    """The relay's record of a token: its state and the names of its topics."""
    record = ok(requests.get(f"{RELAY_URL}/api/tokens/{quoted(tok)}", headers=RELAY))
    return {"state": record["state"], "topics": sorted(t["name"] for t in record["topics"])}


def relay_message(message_id):
    return ok(requests.get(f"{RELAY_URL}/api/messages/{quoted(message_id)}", headers=RELAY))


def deliveries(message_id, state):
    return ok(requests.get(f"{RELAY_URL}/api/messages/{quoted(message_id)}/deliveries",
                           headers=RELAY, params={"state": state}))["deliveries"]


def settled(message_id, timeout=30.0):
    """The message's delivery counts once nothing is pending."""
    def probe():
        delivery = relay_message(message_id)["delivery"]
        return delivery if delivery and delivery["pending"] == 0 else None
    return eventually(probe, timeout)


def newest_relay_message(target):
    """The relay's newest logged message to `target` (a legacy answer without a message_id)."""
    for message in ok(requests.get(f"{RELAY_URL}/api/messages", headers=RELAY, params={"pageSize": 20}))["messages"]:
        if message["target"] == target:
            return message
    raise AssertionError(f"no logged message to {target}")


def relay_status():
    projects = ok(requests.get(f"{RELAY_URL}/api/relay", headers=RELAY))["projects"]
    assert [p["projectId"] for p in projects] == [RELAY_PROJECT]
    return projects[0]


def legacy_send(body):
    return ok(requests.post(f"{RELAY_URL}/fcm/send", headers=RELAY, json=body))


def message_id_of(name):
    assert name.startswith(f"projects/{RELAY_PROJECT}/messages/"), name
    return name.rsplit("/", 1)[1]


# MARK: - Clients


@pytest.fixture(scope="module")
def app():
    """firebase-admin with the relaying project's service account (its token_uri is the relaying
    server's /token). The SDK's send and topic URLs are pointed at the relaying server, which
    listens on plain HTTP; nothing else about the SDK is changed."""
    app = firebase_admin.initialize_app(credentials.Certificate(RELAY_SERVICE_ACCOUNT), name="relay")
    service = messaging._get_messaging_service(app)
    service._fcm_url = f"{RELAY_URL}/v1/projects/{RELAY_PROJECT}/messages:send"
    service._fcm_topic_url = f"{RELAY_URL}/v1/projects/{RELAY_PROJECT}/registrations"
    yield app
    firebase_admin.delete_app(app)


@pytest.fixture(scope="module")
def pyfcm_client():
    """pyfcm 2 (HTTP v1) with the relaying project's service account. pyfcm builds its send URL
    from the class constant FCM_END_POINT_BASE (Google's); an instance attribute of the same name,
    set before the first send, points it at the relaying server instead."""
    client = FCMNotification(service_account_file=RELAY_SERVICE_ACCOUNT, project_id=RELAY_PROJECT)
    client.FCM_END_POINT_BASE = f"{RELAY_URL}/v1/projects"
    return client


# MARK: - Set-up


def test_the_relay_is_on_and_never_shows_the_key():
    status = relay_status()
    assert status["firebaseProjectId"] == UPSTREAM_PROJECT
    assert status["upstream"] == "https://fcm.googleapis.com"
    shown = subprocess.run(
        [BINARY, "project", "show", "--project-id", RELAY_PROJECT, "--db", RELAY_DB],
        check=True, capture_output=True, text=True).stdout
    relay = json.loads(shown)["relay"]
    assert relay["firebase_project_id"] == UPSTREAM_PROJECT
    assert relay["token_uri"] == "https://oauth2.googleapis.com/token"
    with open(UPSTREAM_SERVICE_ACCOUNT) as file:
        key = json.load(file)["private_key"]
    body = "".join(key.splitlines()[1:-1])
    assert "PRIVATE KEY" not in shown and body[:40] not in shown
    assert "PRIVATE KEY" not in requests.get(f"{RELAY_URL}/api/relay", headers=RELAY).text


# MARK: - firebase-admin through the relay


def test_a_v1_send_reaches_fcm_and_fcm_tokens_join_the_registry(app):
    """A token only FCM knows is delivered to, and the relay's registry adopts it."""
    tok = token("adm")
    register_upstream(tok)
    message = messaging.Message(
        token=tok, data={"score": "5x1"}, notification=messaging.Notification(title="Goal", body="5x1"),
        android=messaging.AndroidConfig(priority="high", ttl=120))
    message_id = message_id_of(messaging.send(message, app=app))

    assert settled(message_id) == {"pending": 0, "delivered": 1, "failed": 0, "cancelled": 0}
    [delivered] = deliveries(message_id, "delivered")
    assert (delivered["token"], delivered["attempts"]) == (tok, 1)
    [received] = received_upstream(tok)
    assert received["protocol"] == "v1" and received["target"] == tok
    payload = received["payload"]
    assert payload["token"] == tok
    assert payload["data"] == {"score": "5x1"}
    assert payload["notification"] == {"title": "Goal", "body": "5x1"}
    # An HTTP v1 message goes out as it was sent (firebase-admin writes the priority in lower case).
    assert payload["platform"]["android"] == {"priority": "high", "ttl": "120s"}
    assert relay_token(tok)["state"] == "registered"


def test_unregistered_raises_and_prunes_the_token(app):
    tok = token("gone")
    topic = f"news-{uuid.uuid4().hex[:6]}"
    response = messaging.subscribe_to_topic([tok], topic, app=app)
    assert response.success_count == 1
    assert relay_token(tok)["topics"] == [topic]
    pruned_before = relay_status()["pruned"]

    with pytest.raises(messaging.UnregisteredError):
        messaging.send(messaging.Message(token=tok, data={"a": "b"}), app=app)

    state = relay_token(tok)
    assert (state["state"], state["topics"]) == ("unregistered", [])
    assert relay_status()["pruned"] == pruned_before + 1
    assert received_upstream(tok) == []


def test_sender_id_mismatch_raises_and_prunes_the_token(app):
    tok = token("other")
    topic = f"mismatch-{uuid.uuid4().hex[:6]}"
    register_upstream(tok)
    subscribe_relay(topic, tok)
    fault(tok, "SENDER_ID_MISMATCH", times=1)

    with pytest.raises(messaging.SenderIdMismatchError):
        messaging.send(messaging.Message(token=tok, data={"a": "b"}), app=app)

    state = relay_token(tok)
    assert (state["state"], state["topics"]) == ("unregistered", [])
    assert received_upstream(tok) == []


def test_invalid_argument_fails_at_once_and_keeps_the_token(app):
    tok = token("bad")
    topic = f"kept-{uuid.uuid4().hex[:6]}"
    register_upstream(tok)
    subscribe_relay(topic, tok)
    fault(tok, "INVALID_ARGUMENT")
    try:
        with pytest.raises(exceptions.InvalidArgumentError):
            messaging.send(messaging.Message(token=tok, data={"a": "b"}), app=app)
        # The legacy API words it InvalidRegistration; FCM was asked once, not again.
        answer = legacy_send({"to": tok, "data": {"a": "b"}})
        assert (answer["success"], answer["failure"]) == (0, 1)
        assert answer["results"] == [{"error": "InvalidRegistration"}]
        failed = deliveries(newest_relay_message(tok)["id"], "failed")
        assert [(d["token"], d["error"], d["attempts"]) for d in failed] == [(tok, "INVALID_ARGUMENT", 1)]
    finally:
        clear_fault(tok)
    state = relay_token(tok)
    assert (state["state"], state["topics"]) == ("registered", [topic])
    assert received_upstream(tok) == []


def test_unavailable_twice_is_retried_and_delivered(app):
    """Two 503s, then FCM takes it: the relay retries (after Retry-After) within the answer's wait."""
    tok = token("flaky")
    register_upstream(tok)
    fault(tok, "UNAVAILABLE", times=2, retryAfter="1s")
    message_id = message_id_of(messaging.send(messaging.Message(token=tok, data={"try": "3"}), app=app))

    [delivered] = deliveries(message_id, "delivered")
    assert (delivered["token"], delivered["attempts"]) == (tok, 3)
    assert [m["payload"]["data"] for m in received_upstream(tok)] == [{"try": "3"}]


def test_internal_is_retried_up_to_max_attempts_then_fails():
    """Legacy and raw v1 (the server key as bearer), since firebase-admin would itself retry the
    relay's 500 four times."""
    tok = token("broken")
    register_upstream(tok)
    fault(tok, "INTERNAL")
    try:
        answer = legacy_send({"to": tok, "data": {"a": "b"}})
        failed = deliveries(newest_relay_message(tok)["id"], "failed")
        v1 = requests.post(
            f"{RELAY_URL}/v1/projects/{RELAY_PROJECT}/messages:send",
            headers={"Authorization": f"Bearer {RELAY_KEY}"}, json={"message": {"token": tok, "data": {"a": "v1"}}})
    finally:
        clear_fault(tok)
    assert answer["results"] == [{"error": "InternalServerError"}]
    assert [(d["token"], d["error"], d["attempts"]) for d in failed] == [(tok, "INTERNAL", MAX_ATTEMPTS)]
    assert v1.status_code == 500, v1.text
    assert v1.json()["error"]["status"] == "INTERNAL"
    assert received_upstream(tok) == []
    # The token is not FCM's fault: it stays, and the next send goes through.
    assert "message_id" in legacy_send({"to": tok, "data": {"a": "c"}})["results"][0]
    assert [m["payload"]["data"] for m in received_upstream(tok)] == [{"a": "c"}]


def test_send_each_and_topic_and_condition_sends(app):
    live, dead = token("each"), token("each-dead")
    topic = f"each-{uuid.uuid4().hex[:6]}"
    register_upstream(live)
    subscribe_relay(topic, live)
    response = messaging.send_each([
        messaging.Message(token=live, data={"n": "1"}),
        messaging.Message(token=dead, data={"n": "2"}),
        messaging.Message(topic=topic, data={"n": "3"}),
        messaging.Message(condition=f"'{topic}' in topics", data={"n": "4"}),
    ], app=app)
    assert (response.success_count, response.failure_count) == (3, 1)
    assert isinstance(response.responses[1].exception, messaging.UnregisteredError)
    for answer in (response.responses[2], response.responses[3]):
        assert settled(message_id_of(answer.message_id)) == {"pending": 0, "delivered": 1, "failed": 0, "cancelled": 0}
    got = eventually(lambda: sorted(m["payload"]["data"]["n"] for m in received_upstream(live))
                     if len(received_upstream(live)) == 3 else None)
    assert got == ["1", "3", "4"]


# MARK: - Legacy HTTP through the relay


def test_registration_ids_get_fcms_verdict_per_token():
    fine, unknown, mismatched, invalid = token("ri-ok"), token("ri-new"), token("ri-mm"), token("ri-inv")
    register_upstream(fine, mismatched, invalid)
    subscribe_relay(f"ri-{uuid.uuid4().hex[:6]}", mismatched, invalid)
    fault(mismatched, "SENDER_ID_MISMATCH", times=1)
    fault(invalid, "INVALID_ARGUMENT", times=1)
    answer = legacy_send({"registration_ids": [fine, unknown, mismatched, invalid], "data": {"k": "v"}})
    assert (answer["success"], answer["failure"]) == (1, 3)
    assert "message_id" in answer["results"][0]
    assert answer["results"][1:] == [
        {"error": "NotRegistered"}, {"error": "MismatchSenderId"}, {"error": "InvalidRegistration"}]
    assert [len(received_upstream(t)) for t in (fine, unknown, mismatched, invalid)] == [1, 0, 0, 0]
    assert relay_token(mismatched) == {"state": "unregistered", "topics": []}
    assert relay_token(invalid)["state"] == "registered"
    # Tokens only FCM knew, once it took the message, join the registry; the others do not.
    assert relay_token(fine)["state"] == "registered"
    assert requests.get(f"{RELAY_URL}/api/tokens/{quoted(unknown)}", headers=RELAY).status_code == 404


def test_legacy_fields_are_translated_to_v1():
    tok = token("legacy")
    register_upstream(tok)
    answer = legacy_send({
        "to": tok, "priority": "high", "time_to_live": 60, "collapse_key": "score",
        "content_available": True,
        "notification": {"title": "Goal", "body": "5x1", "sound": "default", "android_channel_id": "goals"},
        "data": {"score": 5, "team": "home"},
    })
    assert "message_id" in answer["results"][0], answer
    [received] = received_upstream(tok)
    payload = received["payload"]
    assert received["protocol"] == "v1"
    assert payload["token"] == tok
    assert payload["data"] == {"score": "5", "team": "home"}
    assert payload["notification"] == {"title": "Goal", "body": "5x1"}
    android = payload["platform"]["android"]
    assert (android["priority"], android["ttl"], android["collapse_key"]) == ("HIGH", "60s", "score")
    assert android["notification"] == {"sound": "default", "channel_id": "goals"}
    apns = payload["platform"]["apns"]
    assert apns["headers"]["apns-priority"] == "10"
    assert apns["headers"]["apns-collapse-id"] == "score"
    assert int(apns["headers"]["apns-expiration"]) > time.time()
    aps = apns["payload"]["aps"]
    assert aps["alert"] == {"title": "Goal", "body": "5x1"}
    assert (aps["sound"], aps["content-available"]) == ("default", 1)


def test_a_topic_send_is_answered_at_once_and_delivered_in_the_background():
    live = [token("t-live"), token("t-live")]
    dead = token("t-dead")
    topic = f"weather-{uuid.uuid4().hex[:6]}"
    register_upstream(*live)
    subscribe_relay(topic, *live, dead)
    answer = legacy_send({"to": f"/topics/{topic}", "notification": {"title": "Rain"}})
    message_id = str(answer["message_id"])

    assert settled(message_id) == {"pending": 0, "delivered": 2, "failed": 1, "cancelled": 0}
    assert sorted(d["token"] for d in deliveries(message_id, "delivered")) == sorted(live)
    failed = deliveries(message_id, "failed")
    assert [(d["token"], d["state"], d["error"]) for d in failed] == [(dead, "failed", "UNREGISTERED")]
    assert deliveries(message_id, "pending") == []
    for tok in live:
        [received] = received_upstream(tok)
        assert received["payload"]["token"] == tok
        assert received["payload"]["notification"] == {"title": "Rain"}
    # FCM called the dead token gone: it left the topic.
    state = relay_token(dead)
    assert (state["state"], state["topics"]) == ("unregistered", [])


def test_a_device_group_answers_with_failed_registration_ids():
    member, gone = token("g-ok"), token("g-gone")
    register_upstream(member)
    created = ok(requests.post(
        f"{RELAY_URL}/fcm/notification", headers={**RELAY, "project_id": RELAY_SENDER_ID},
        json={"operation": "create", "notification_key_name": f"group-{uuid.uuid4().hex[:6]}",
              "registration_ids": [member, gone]}))
    answer = legacy_send({"to": created["notification_key"], "data": {"g": "1"}})
    assert answer == {"success": 1, "failure": 1, "failed_registration_ids": [gone]}
    assert [m["payload"]["data"] for m in received_upstream(member)] == [{"g": "1"}]
    assert relay_token(gone)["state"] == "unregistered"


# MARK: - FCM's quota


def test_quota_exceeded_pauses_the_project_then_delivers():
    tok = token("quota")
    topic = f"quota-{uuid.uuid4().hex[:6]}"
    register_upstream(tok)
    subscribe_relay(topic, tok)
    ok(requests.put(f"{UPSTREAM_URL}/api/fault", headers=UPSTREAM,
                    json={"error": "QUOTA_EXCEEDED", "times": 1, "retryAfter": "3s"}))
    try:
        message_id = str(legacy_send({"to": f"/topics/{topic}", "data": {"q": "1"}})["message_id"])

        def paused_status():
            status = relay_status()
            return status if "pausedUntil" in status else None

        # The pause lasts the upstream's Retry-After (3 s): polled well inside it.
        paused = eventually(paused_status, every=0.05)
        assert paused["lastError"] == "QUOTA_EXCEEDED"
        assert settled(message_id) == {"pending": 0, "delivered": 1, "failed": 0, "cancelled": 0}
    finally:
        requests.delete(f"{UPSTREAM_URL}/api/fault", headers=UPSTREAM)
    [delivered] = deliveries(message_id, "delivered")
    # The request FCM refused with 429 spent no attempt: a closed quota never uses up a recipient's.
    assert delivered["attempts"] == 1
    assert [m["payload"]["data"] for m in received_upstream(tok)] == [{"q": "1"}]
    assert "pausedUntil" not in relay_status()


def test_a_direct_send_waits_through_a_short_quota_pause():
    unknown = token("quota-direct")
    ok(requests.put(f"{UPSTREAM_URL}/api/fault", headers=UPSTREAM,
                    json={"error": "QUOTA_EXCEEDED", "times": 1, "retryAfter": "2s"}))
    try:
        answer = legacy_send({"to": unknown, "data": {"q": "2"}})
    finally:
        requests.delete(f"{UPSTREAM_URL}/api/fault", headers=UPSTREAM)
        # Whatever was answered, let the pause and the retry end before the next test.
        eventually(lambda: relay_status()["pending"] == 0 and "pausedUntil" not in relay_status())
    assert answer["results"] == [{"error": "NotRegistered"}]


# MARK: - pyfcm through the relay


def test_pyfcm_notify_reaches_fcm(pyfcm_client):
    tok = token("pyfcm")
    register_upstream(tok)
    result = pyfcm_client.notify(
        fcm_token=tok, notification_title="Hello", notification_body="from pyfcm", data_payload={"k": "v"})
    message_id = message_id_of(result["name"])
    assert settled(message_id) == {"pending": 0, "delivered": 1, "failed": 0, "cancelled": 0}
    [received] = received_upstream(tok)
    assert received["payload"]["token"] == tok
    assert received["payload"]["notification"] == {"title": "Hello", "body": "from pyfcm"}
    assert received["payload"]["data"] == {"k": "v"}


def test_pyfcm_topic_send_and_unregistered_token(pyfcm_client):
    tok = token("pyfcm-topic")
    topic = f"pyfcm-{uuid.uuid4().hex[:6]}"
    register_upstream(tok)
    subscribe_relay(topic, tok)
    message_id = message_id_of(pyfcm_client.notify(topic_name=topic, data_payload={"t": "1"})["name"])
    assert settled(message_id) == {"pending": 0, "delivered": 1, "failed": 0, "cancelled": 0}
    assert [m["payload"]["data"] for m in received_upstream(tok)] == [{"t": "1"}]
    with pytest.raises(FCMNotRegisteredError):
        pyfcm_client.notify(fcm_token=token("pyfcm-gone"), data_payload={"t": "2"})


# MARK: - Turning it off (last: the project stops relaying)


def curl_send(body, key):
    """`curl -i` as an app server's retry would send it: the answer's status, headers and body bytes."""
    out = subprocess.run(
        ["curl", "-s", "-i", "--max-time", "30", "-H", f"Authorization: key={RELAY_KEY}",
         "-H", "Content-Type: application/json", "-H", f"Idempotency-Key: {key}",
         f"{RELAY_URL}/fcm/send", "--data-binary", body],
        check=True, capture_output=True).stdout.decode()
    head, _, payload = out.partition("\r\n\r\n")
    lines = head.split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, payload


def test_two_identical_sends_with_one_idempotency_key_are_delivered_once():
    """A retried send (the first answer lost on the way) reaches FCM once, and is answered the same."""
    tok = token("idem")
    register_upstream(tok)
    key = f"order-{uuid.uuid4()}"
    first = curl_send(json.dumps({"to": tok, "data": {"order": "4711"}}), key)
    # The retry, spaced and ordered otherwise: the same request.
    again = curl_send('{ "data": {"order": "4711"},\n  "to": "%s" }' % tok, key)
    assert first[0] == again[0] == 200, (first, again)
    assert json.loads(first[2])["success"] == 1, first
    assert again[2] == first[2]
    assert "idempotent-replayed" not in first[1]
    assert again[1]["idempotent-replayed"] == "true"
    assert [m["payload"]["data"] for m in received_upstream(tok)] == [{"order": "4711"}]
    # Another message under the key is refused, and sends nothing either.
    other = curl_send(json.dumps({"to": tok, "data": {"order": "4712"}}), key)
    assert other[0] == 422, other
    assert len(received_upstream(tok)) == 1


def test_relay_off_stops_delivery():
    """After `project relay --off`, sends are only logged again: nothing reaches the upstream."""
    tok = token("off")
    register_upstream(tok)
    subscribe_relay(f"off-{uuid.uuid4().hex[:6]}", tok)
    subprocess.run([BINARY, "project", "relay", "--project-id", RELAY_PROJECT, "--off", "--db", RELAY_DB],
                   check=True, capture_output=True)
    assert ok(requests.get(f"{RELAY_URL}/api/relay", headers=RELAY))["projects"] == []
    # The send path caches relay settings for up to a second: probe until a send is not relayed.
    probes = iter(range(1000))

    def unrelayed_send():
        probe = str(next(probes))
        answer = legacy_send({"to": tok, "data": {"probe": probe}})
        message_id = answer["results"][0]["message_id"]
        return probe if relay_message(message_id)["delivery"] is None else None

    last = eventually(unrelayed_send, timeout=10, every=0.2)
    assert last not in [m["payload"]["data"]["probe"] for m in received_upstream(tok)]
