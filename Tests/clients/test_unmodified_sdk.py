"""The unmodified firebase-admin SDK, set up exactly as for Google: a service-account file and nothing else.

No URL override, no custom credential: Google's host names resolve to fcm-registry through a hosts
file private to this test (run-unmodified-sdk.sh) and TLS is trusted through the CA of `tls init`.
The SDK signs a JWT, exchanges it at oauth2.googleapis.com/token, and calls fcm.googleapis.com.
"""
import asyncio
import os

import pytest
import requests

import firebase_admin
from firebase_admin import credentials, exceptions, messaging

SERVER_KEY = os.environ["FCM_REGISTRY_KEY"]
SENDER_ID = os.environ["FCM_REGISTRY_SENDER_ID"]


@pytest.fixture(scope="module")
def app():
    app = firebase_admin.initialize_app(credentials.Certificate(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]))
    yield app
    firebase_admin.delete_app(app)


def token(n):
    return f"sdk{n}xxxxxxxxxxxxxxxxxx:APA91b" + "Q" * 40 + str(n)


def test_subscribe_and_unsubscribe(app):
    response = messaging.subscribe_to_topic([token(1), token(2)], "news", app=app)
    assert (response.success_count, response.failure_count) == (2, 0)
    response = messaging.unsubscribe_from_topic([token(2)], "news", app=app)
    assert (response.success_count, response.failure_count) == (1, 0)


def test_send_to_token_fid_topic_and_condition(app):
    messaging.subscribe_to_topic([token(3)], "weather", app=app)
    messages = [
        messaging.Message(token=token(3), data={"score": "5x1"}),
        messaging.Message(fid=token(3), notification=messaging.Notification(title="fid")),
        messaging.Message(topic="weather", notification=messaging.Notification(title="t", body="b")),
        messaging.Message(condition="'weather' in topics && !('news' in topics)"),
    ]
    for message in messages:
        name = messaging.send(message, app=app)
        assert name.startswith("projects/sdk-app/messages/"), name


def test_send_to_a_notification_key(app):
    messaging.subscribe_to_topic([token(4)], "group-members", app=app)
    created = requests.post(
        "https://fcm.googleapis.com/fcm/notification",
        headers={"Authorization": f"key={SERVER_KEY}", "project_id": SENDER_ID},
        json={"operation": "create", "notification_key_name": "sdk-group", "registration_ids": [token(4)]},
    )
    created.raise_for_status()
    key = created.json()["notification_key"]
    assert messaging.send(messaging.Message(token=key, data={"a": "b"}), app=app).startswith("projects/")


def test_rekey_to_a_fid_keeps_topics(app):
    """A device moves from its registration token to a Firebase installation id: subscribed with
    the SDK, re-keyed through the native API, then a topic send reaches the FID and not the token."""
    old, fid = token(8), "fid8" + "F" * 18
    assert messaging.subscribe_to_topic([old], "rekeyed", app=app).success_count == 1
    headers = {"Authorization": f"key={SERVER_KEY}"}
    moved = requests.post(
        f"https://fcm.googleapis.com/api/tokens/{old}:rekey", headers=headers, json={"to": fid})
    moved.raise_for_status()
    assert moved.json()["topics"] == ["rekeyed"]
    name = messaging.send(messaging.Message(topic="rekeyed", data={"after": "rekey"}), app=app)
    assert name.startswith("projects/sdk-app/messages/"), name
    reached = requests.post(
        "https://fcm.googleapis.com/api/audiences:resolve", headers=headers, json={"topic": "rekeyed"})
    assert reached.json()["tokens"] == [fid]
    logged = requests.get(f"https://fcm.googleapis.com/api/tokens/{fid}/messages", headers=headers).json()
    assert [m["id"] for m in logged["messages"]][:1] == [name.rsplit("/", 1)[1]]
    # The old token is unregistered: the SDK's send to it is UNREGISTERED.
    with pytest.raises(messaging.UnregisteredError):
        messaging.send(messaging.Message(token=old, data={"a": "b"}), app=app)


@pytest.mark.parametrize("error,exception", [
    ("UNREGISTERED", messaging.UnregisteredError),
    ("SENDER_ID_MISMATCH", messaging.SenderIdMismatchError),
    ("QUOTA_EXCEEDED", messaging.QuotaExceededError),
    ("INVALID_ARGUMENT", exceptions.InvalidArgumentError),
])
def test_injected_faults_raise_the_sdks_own_errors(app, error, exception):
    """A fault set on a token makes the SDK raise the class it raises for FCM's answer."""
    tok = token(20)
    headers = {"Authorization": f"key={SERVER_KEY}"}
    requests.put(f"https://fcm.googleapis.com/api/tokens/{tok}", headers=headers).raise_for_status()
    fault = requests.put(
        f"https://fcm.googleapis.com/api/tokens/{tok}/fault", headers=headers,
        json={"error": error, "retryAfter": "0s"})
    fault.raise_for_status()
    try:
        with pytest.raises(exception):
            messaging.send(messaging.Message(token=tok, data={"a": "b"}), app=app)
    finally:
        requests.delete(f"https://fcm.googleapis.com/api/tokens/{tok}/fault", headers=headers)
    assert messaging.send(messaging.Message(token=tok, data={"a": "b"}), app=app).startswith("projects/")


def test_a_transient_fault_is_retried_by_the_sdk(app):
    """UNAVAILABLE once: the SDK retries on 503, as it does against FCM, and the send goes through."""
    tok = token(21)
    headers = {"Authorization": f"key={SERVER_KEY}"}
    requests.put(f"https://fcm.googleapis.com/api/tokens/{tok}", headers=headers).raise_for_status()
    requests.put(
        f"https://fcm.googleapis.com/api/tokens/{tok}/fault", headers=headers,
        json={"error": "UNAVAILABLE", "times": 1, "retryAfter": "1s"}).raise_for_status()
    assert messaging.send(messaging.Message(token=tok, data={"a": "b"}), app=app).startswith("projects/")


def test_send_each_and_send_each_async(app):
    messaging.subscribe_to_topic([token(5)], "each", app=app)
    messages = [messaging.Message(token=token(5)), messaging.Message(topic="each"), messaging.Message(token=token(999))]
    response = messaging.send_each(messages, app=app)
    assert (response.success_count, response.failure_count) == (2, 1)
    assert isinstance(response.responses[2].exception, messaging.UnregisteredError)
    # The async path is httpx over HTTP/2, on an app of its own: its client belongs to the event
    # loop that asyncio.run closes.
    async_app = firebase_admin.initialize_app(
        credentials.Certificate(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]), name="async")
    response = asyncio.run(messaging.send_each_async(messages, app=async_app))
    assert (response.success_count, response.failure_count) == (2, 1)
    assert isinstance(response.responses[2].exception, messaging.UnregisteredError)


def test_error_classes(app):
    with pytest.raises(messaging.UnregisteredError):
        messaging.send(messaging.Message(token=token(998)), app=app)
    with pytest.raises(exceptions.InvalidArgumentError):
        messaging.send(messaging.Message(condition="'a' in topics &&"), app=app)
