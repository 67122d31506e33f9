#!/usr/bin/env bash
# The web console in a real browser: headless Chromium driven by selenium against a running server
# with a seeded registry that relays to a second fcm-registry playing FCM (plain HTTP on loopback),
# so messages have real delivery states. With --screenshots, also rewrites docs/console/ (each
# screen at 1280x800 and 390x844) and its manifest. Needs a built .build/debug/fcm-registry,
# python3, curl, chromium and chromium-driver; installs selenium in a private venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
source Tests/clients/registry-db.sh

work=$(mktemp -d)
app_db=$(registry_db "$work" console)
upstream_db=$(registry_db "$work" console_upstream)
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work" || true
}
trap stop EXIT
binary="${FCM_REGISTRY_BINARY:-$PWD/.build/debug/fcm-registry}"

venv=${CLIENT_VENV:-$work/venv}
if [ -z "${CLIENT_VENV:-}" ]; then python3 -m venv "$venv"; fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "selenium==4.51.0" pytest requests

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_healthy() {
  for _ in $(seq 300); do
    curl -fs "$1/health" > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server at $1 did not answer /health:" >&2
  cat "$2" >&2
  return 1
}
key_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$1"; }

# "FCM": an fcm-registry that judges tokens and logs what it is sent.
upstream_port=$(free_port)
"$binary" project create --sender-id 999000999000 --project-id fb-console --db "$upstream_db" > "$work/upstream.json"
"$binary" project service-account --project-id fb-console --db "$upstream_db" \
  --token-uri "http://127.0.0.1:$upstream_port/token" --output "$work/firebase-sa.json" > /dev/null
"$binary" serve --db "$upstream_db" --port "$upstream_port" --xmpp-port off 2> "$work/upstream.log" &
pids+=($!)

# The registry the console looks into, relaying to it.
port=$(free_port)
"$binary" project create --sender-id 123456789012 --project-id console-app --db "$app_db" > "$work/app.json"
"$binary" project relay --project-id console-app --service-account "$work/firebase-sa.json" \
  --upstream "http://127.0.0.1:$upstream_port" --db "$app_db" > /dev/null
# Webhooks to a local address (a closed port gives a backlog and a last error) need the private-network allowance.
"$binary" serve --db "$app_db" --port "$port" --xmpp-port off --relay-poll-interval 200ms --webhook-allow-private-networks \
  2> "$work/app.log" &
pids+=($!)
wait_healthy "http://127.0.0.1:$upstream_port" "$work/upstream.log"
wait_healthy "http://127.0.0.1:$port" "$work/app.log"

export CONSOLE_URL="http://127.0.0.1:$port" CONSOLE_KEY=$(key_of "$work/app.json")
# A second server on the same database stands for the first after a restart: what it shows comes
# from the store alone.
export CONSOLE_BINARY="$binary" CONSOLE_DB="$app_db"
# The relay's service account, to turn delivery back on after a test turns it off.
export CONSOLE_SERVICE_ACCOUNT="$work/firebase-sa.json"
export UPSTREAM_URL="http://127.0.0.1:$upstream_port" UPSTREAM_KEY=$(key_of "$work/upstream.json")
if [ "${1:-}" = "--screenshots" ]; then export CONSOLE_SCREENSHOTS="$PWD/docs/console"; shift; fi
# Further arguments go to pytest (-k NAME to run some tests).
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider Tests/console/test_console.py "$@" || {
  echo "--- server log" >&2; tail -50 "$work/app.log" >&2
  exit 1
}
