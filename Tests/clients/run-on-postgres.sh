#!/usr/bin/env bash
# The client suites against servers whose registry is in PostgreSQL. First the unmodified
# firebase-admin SDK (test_firebase_admin.py) against two servers on one database: the first
# creates the project, the SDK talks to the second, and neither may log the database's password.
# Then three servers, one killed with SIGKILL mid-write (Tests/postgres/kill_nine.py), and two
# through a restart and a stop of their database (Tests/postgres/outage.py, a cluster of its own).
# Then every client suite of run-client-tests.sh (firebase-admin, the SDK under Google's names,
# aiofcm and slixmpp over XMPP, the relay) and the console's, each server on a schema of its own
# (registry-db.sh). Needs FCM_REGISTRY_TEST_POSTGRES (Tests/postgres/cluster.sh start), psql, a
# built .build/debug/fcm-registry, python3, curl, and what those suites need.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${FCM_REGISTRY_TEST_POSTGRES:?set it to a PostgreSQL URL (Tests/postgres/cluster.sh start DIR)}"

work=$(mktemp -d)
pids=()
schema="clients_$$"
base=${FCM_REGISTRY_TEST_POSTGRES%%\?*}
export FCM_REGISTRY_CLIENT_RUN=$$
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  psql "$base" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" > /dev/null 2>&1 || true
  psql "$base" -qc "DROP SCHEMA IF EXISTS ${schema}_kill CASCADE" > /dev/null 2>&1 || true
  for made in $(psql "$base" -Atc "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'clients\_${FCM_REGISTRY_CLIENT_RUN}\_%'" 2>/dev/null); do
    psql "$base" -qc "DROP SCHEMA $made CASCADE" > /dev/null 2>&1 || true
  done
  rm -rf "$work" || true
}
trap stop EXIT
binary="$PWD/.build/debug/fcm-registry"
psql "$base" -qc "CREATE SCHEMA $schema" > /dev/null
db="$FCM_REGISTRY_TEST_POSTGRES&search_path=$schema"
[[ "$FCM_REGISTRY_TEST_POSTGRES" == *\?* ]] || db="$FCM_REGISTRY_TEST_POSTGRES?search_path=$schema"

venv=${CLIENT_VENV:-$work/venv}
if [ -z "${CLIENT_VENV:-}" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "firebase-admin==7.7.0" pytest requests
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_healthy() {
  for _ in $(seq 300); do curl -fs "$1/health" > /dev/null 2>&1 && return 0; sleep 0.1; done
  echo "server at $1 did not answer /health:" >&2; cat "$2" >&2; return 1
}
first=$(free_port)
"$binary" serve --db "$db" --port "$first" --xmpp-port off > "$work/first-start.json" 2> "$work/first.log" &
pids+=($!)
wait_healthy "http://127.0.0.1:$first" "$work/first.log"
second=$(free_port)
"$binary" serve --db "$db" --port "$second" --xmpp-port off 2> "$work/second.log" &
pids+=($!)
wait_healthy "http://127.0.0.1:$second" "$work/second.log"
password=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).password or "")' "$base")
if [ -n "$password" ] && grep -qF -- "$password" "$work/first.log" "$work/second.log"; then
  echo "a server logged the database password" >&2
  exit 1
fi
export FCM_REGISTRY_URL="http://127.0.0.1:$second"
export FCM_REGISTRY_PROJECT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["project_id"])' "$work/first-start.json")
export FCM_REGISTRY_KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$work/first-start.json")
"$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning Tests/clients/test_firebase_admin.py || {
  echo "--- first server" >&2; tail -30 "$work/first.log" >&2
  echo "--- second server" >&2; tail -30 "$work/second.log" >&2
  exit 1
}
for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
pids=()

echo "Three servers on one database, one killed with SIGKILL mid-write"
psql "$base" -qc "CREATE SCHEMA ${schema}_kill" > /dev/null
"$venv/bin/python" Tests/postgres/kill_nine.py "$binary" "${db/search_path=$schema/search_path=${schema}_kill}"

echo "Two servers through a PostgreSQL restart and a 15 s stop, under writes (a private cluster)"
"$venv/bin/python" Tests/postgres/outage.py "$binary" --cycles 1

echo "The client suites, each server on PostgreSQL"
FCM_REGISTRY_CLIENT_DB=postgres bash Tests/clients/run-client-tests.sh
echo "The console's suite, its servers on PostgreSQL"
FCM_REGISTRY_CLIENT_DB=postgres bash Tests/console/run-console-tests.sh
