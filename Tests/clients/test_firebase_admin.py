"""The unmodified firebase-admin Python SDK against a running fcm-registry.

Its base URLs are pointed at the server and the server key is its bearer token; nothing else
about the SDK is changed. Run by run-client-tests.sh, which starts the server.
"""

import os
import uuid

import firebase_admin
import google.auth.credentials
import pytest
import requests
from firebase_admin import credentials, messaging

BASE_URL = os.environ["FCM_REGISTRY_URL"]
PROJECT_ID = os.environ["FCM_REGISTRY_PROJECT"]
SERVER_KEY = os.environ["FCM_REGISTRY_KEY"]


class ServerKeyCredentials(google.auth.credentials.Credentials):
    """google-auth credentials whose access token is the fcm-registry server key."""

    def __init__(self, key):
        super().__init__()
        self.token = key

    def refresh(self, request):
        pass

    @property
    def valid(self):
        return True


class ServerKeyCredential(credentials.Base):
    def __init__(self, key):
        self._credentials = ServerKeyCredentials(key)

    def get_credential(self):
        return self._credentials


@pytest.fixture(scope="module")
def app():
    app = firebase_admin.initialize_app(
        ServerKeyCredential(SERVER_KEY), {"projectId": PROJECT_ID}, name=str(uuid.uuid4()))
    messaging._MessagingService.IID_URL = BASE_URL
    service = messaging._get_messaging_service(app)
    service._fcm_topic_url = f"{BASE_URL}/v1/projects/{PROJECT_ID}/registrations"
    yield app
    firebase_admin.delete_app(app)


def token(n):
    return f"sdk{n}{uuid.uuid4().hex[:8]}:APA91b" + "x" * 40


def topics_of(tok):
    reply = requests.get(
        f"{BASE_URL}/iid/info/{tok}?details=true", headers={"Authorization": f"key={SERVER_KEY}"})
    if reply.status_code == 404:
        return set()
    return set(reply.json().get("rel", {}).get("topics", {}))


def test_v1_subscribe_and_unsubscribe(app):
    tokens = [token(1), token(2)]
    response = messaging.subscribe_to_topic(tokens, "/topics/sdk-news", app=app)
    assert response.success_count == 2 and response.failure_count == 0
    assert all("sdk-news" in topics_of(t) for t in tokens)
    # Subscribing again answers 409 ALREADY_EXISTS, which the SDK counts as success.
    again = messaging.subscribe_to_topic(tokens[:1], "sdk-news", app=app)
    assert again.success_count == 1 and again.failure_count == 0
    response = messaging.unsubscribe_from_topic(tokens, "sdk-news", app=app)
    assert response.success_count == 2
    assert all("sdk-news" not in topics_of(t) for t in tokens)


def test_v1_unregistered_token_is_reported(app):
    dead = token(6)
    requests.put(f"{BASE_URL}/api/tokens/{dead}", headers={"Authorization": f"key={SERVER_KEY}"}).raise_for_status()
    requests.delete(f"{BASE_URL}/api/tokens/{dead}", headers={"Authorization": f"key={SERVER_KEY}"}).raise_for_status()
    response = messaging.subscribe_to_topic([token(7), dead], "sdk-dead", app=app)
    assert response.success_count == 1
    assert [(e.index, e.reason) for e in response.errors] == [(1, "NOT_FOUND")]


def test_legacy_iid_subscribe_and_unsubscribe(app):
    tokens = [token(3), "not a token", token(4)]
    response = messaging.subscribe_to_topic_legacy(tokens, "sdk-legacy", app=app)
    assert response.success_count == 2
    assert response.failure_count == 1
    assert response.errors[0].index == 1
    assert response.errors[0].reason == "INVALID_ARGUMENT"
    assert "sdk-legacy" in topics_of(tokens[0])
    response = messaging.unsubscribe_from_topic_legacy([tokens[0], tokens[2]], "sdk-legacy", app=app)
    assert response.success_count == 2
    assert "sdk-legacy" not in topics_of(tokens[0])


def test_topic_fault_refuses_subscriptions_until_spent(app):
    # PUT /api/topics/{t}/fault plays FCM's per-topic subscription rate limit: both the v1 and the
    # Instance ID paths report RESOURCE_EXHAUSTED for each token (the Admin SDKs'
    # TOPICS_SUBSCRIPTION_RATE_EXCEEDED), and nothing is subscribed until the fault is spent.
    tokens = [token(8), token(9)]
    requests.put(
        f"{BASE_URL}/api/topics/sdk-busy/fault", headers={"Authorization": f"key={SERVER_KEY}"},
        json={"error": "TOPICS_SUBSCRIPTION_RATE_EXCEEDED", "times": 3}).raise_for_status()
    response = messaging.subscribe_to_topic(tokens, "sdk-busy", app=app)
    assert [(e.index, e.reason) for e in response.errors] == [(0, "RESOURCE_EXHAUSTED"), (1, "RESOURCE_EXHAUSTED")]
    response = messaging.subscribe_to_topic_legacy(tokens, "sdk-busy", app=app)
    assert [(e.index, e.reason) for e in response.errors] == [(0, "RESOURCE_EXHAUSTED"), (1, "RESOURCE_EXHAUSTED")]
    assert not any("sdk-busy" in topics_of(t) for t in tokens)
    # Two v1 calls and one batchAdd: the fault is spent.
    response = messaging.subscribe_to_topic(tokens, "sdk-busy", app=app)
    assert response.success_count == 2
    assert all("sdk-busy" in topics_of(t) for t in tokens)


def test_wrong_key_is_unauthenticated():
    other = firebase_admin.initialize_app(
        ServerKeyCredential("wrong-key"), {"projectId": PROJECT_ID}, name=str(uuid.uuid4()))
    try:
        with pytest.raises(firebase_admin.exceptions.UnauthenticatedError):
            messaging.subscribe_to_topic_legacy([token(5)], "sdk-auth", app=other)
    finally:
        firebase_admin.delete_app(other)
