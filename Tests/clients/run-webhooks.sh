#!/usr/bin/env bash
# Webhooks end to end: a relaying fcm-registry delivers to another fcm-registry playing FCM (plain
# HTTP on loopback, as docs/relay.md's "Testing against an emulator"), and test_webhooks.py runs a
# real HTTP receiver that verifies every event with the `standardwebhooks` package from PyPI. The
# test starts and stops the relaying server itself (SIGTERM, kill -9). Needs a built
# .build/debug/fcm-registry, python3 and curl.
set -euo pipefail
cd "$(dirname "$0")/../.."
source Tests/clients/registry-db.sh

work=$(mktemp -d)
relay_db=$(registry_db "$work" hooks)
upstream_db=$(registry_db "$work" hooks_upstream)
upstream=""
stop() {
  if [ -n "$upstream" ]; then kill "$upstream" 2>/dev/null || true; wait "$upstream" 2>/dev/null || true; fi
  rm -rf "$work" || true
}
trap stop EXIT
binary="${FCM_REGISTRY_BINARY:-$PWD/.build/debug/fcm-registry}"

# The clients' venv: run-client-tests.sh passes its own; alone, this script makes one.
venv=${CLIENT_VENV:-$work/venv}
if [ -z "${CLIENT_VENV:-}" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "standardwebhooks==1.1.0" pytest requests
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
key_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$1"; }

# "FCM": its own database and project, Google's token endpoint on the same port.
up_port=$(free_port)
"$binary" project create --sender-id 999000999000 --project-id fb-hooks --db "$upstream_db" > "$work/upstream.json"
"$binary" project service-account --project-id fb-hooks --db "$upstream_db" \
  --token-uri "http://127.0.0.1:$up_port/token" --output "$work/firebase-sa.json" > /dev/null
"$binary" serve --db "$upstream_db" --port "$up_port" --xmpp-port off 2> "$work/upstream.log" &
upstream=$!
for _ in $(seq 300); do
  curl -fs "http://127.0.0.1:$up_port/health" > /dev/null 2>&1 && break
  sleep 0.1
done

# The app's registry, relaying to it; test_webhooks.py serves it.
"$binary" project create --sender-id 123456789012 --project-id hooks-app --db "$relay_db" > "$work/relay.json"
"$binary" project relay --project-id hooks-app --service-account "$work/firebase-sa.json" \
  --upstream "http://127.0.0.1:$up_port" --db "$relay_db" > /dev/null

export FCM_REGISTRY_BINARY="$binary" RELAY_DB="$relay_db" RELAY_PORT=$(free_port) RELAY_KEY=$(key_of "$work/relay.json")
export UPSTREAM_URL="http://127.0.0.1:$up_port" UPSTREAM_KEY=$(key_of "$work/upstream.json") WORK="$work"
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider Tests/clients/test_webhooks.py "$@" || {
  echo "--- relaying server:" >&2; cat "$work"/relay-*.log >&2 || true
  echo "--- upstream:" >&2; cat "$work/upstream.log" >&2
  exit 1
}
