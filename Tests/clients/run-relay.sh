#!/usr/bin/env bash
# The relay end to end, as it runs against Google: a relaying fcm-registry delivers to another
# fcm-registry that plays FCM under Google's host names (fcm.googleapis.com, oauth2.googleapis.com
# on port 443, TLS from `tls init`, trusted through --relay-ca-file), and real clients (firebase-admin,
# pyfcm) send through the relaying server (test_relay.py). The relaying server and pytest run in a
# mount namespace of their own whose /etc/hosts maps Google's names to 127.0.0.1, so the machine's
# is untouched. Needs root (port 443, unshare), a built .build/debug/fcm-registry, python3 and curl.
set -euo pipefail
cd "$(dirname "$0")/../.."
source Tests/clients/registry-db.sh

work=$(mktemp -d)
relay_db=$(registry_db "$work" relay)
upstream_db=$(registry_db "$work" relay_upstream)
upstream=""
stop() {
  # The relaying server is stopped inside the namespace; its pid is kept here in case that shell died.
  if [ -s "$work/relay.pid" ]; then kill "$(cat "$work/relay.pid")" 2>/dev/null || true; fi
  if [ -n "$upstream" ]; then kill "$upstream" 2>/dev/null || true; wait "$upstream" 2>/dev/null || true; fi
  rm -rf "$work" || true
}
trap stop EXIT
binary="$PWD/.build/debug/fcm-registry"
max_attempts=3

# The clients' venv: run-client-tests.sh passes its own; alone, this script makes one.
venv=${CLIENT_VENV:-$work/venv}
if [ -z "${CLIENT_VENV:-}" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "firebase-admin==7.7.0" "pyfcm==2.1.1" pytest
fi

# Waits for a server's /health (curl arguments follow); fails with the server's log.
wait_healthy() {
  local log=$1
  shift
  for _ in $(seq 300); do
    curl -fs "$@" > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server did not answer /health:" >&2
  cat "$log" >&2
  return 1
}

# The upstream: FCM and Google's token endpoint, its own database and project.
"$binary" tls init --dir "$work/certs" > /dev/null
"$binary" project create --sender-id 999000999000 --project-id fb-upstream --db "$upstream_db" \
  > "$work/upstream.json"
"$binary" project service-account --project-id fb-upstream --db "$upstream_db" \
  --output "$work/firebase-sa.json" > /dev/null
"$binary" serve --db "$upstream_db" --port off --tls-port 443 --xmpp-port off \
  --tls-cert "$work/certs/server.pem" --tls-key "$work/certs/server-key.pem" 2> "$work/upstream.log" &
upstream=$!
wait_healthy "$work/upstream.log" --cacert "$work/certs/ca.pem" --resolve fcm.googleapis.com:443:127.0.0.1 \
  https://fcm.googleapis.com/health

# The relaying server's project, relaying to the upstream's Firebase project by its service account
# (token_uri https://oauth2.googleapis.com/token, upstream https://fcm.googleapis.com: the defaults).
# Its own clients get a service account whose token_uri is the relaying server's /token.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$binary" project create --sender-id 123456789012 --project-id relay-app --db "$relay_db" > "$work/relay.json"
"$binary" project relay --project-id relay-app --service-account "$work/firebase-sa.json" --db "$relay_db" \
  > /dev/null
"$binary" project service-account --project-id relay-app --db "$relay_db" \
  --token-uri "http://127.0.0.1:$port/token" --output "$work/relay-sa.json" > /dev/null

cat > "$work/hosts" <<HOSTS
127.0.0.1 localhost
127.0.0.1 fcm.googleapis.com iid.googleapis.com oauth2.googleapis.com iamcredentials.googleapis.com
HOSTS

key_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$1"; }
export RELAY_URL="http://127.0.0.1:$port" RELAY_PROJECT=relay-app RELAY_SENDER_ID=123456789012
export RELAY_KEY=$(key_of "$work/relay.json") RELAY_DB="$relay_db"
export RELAY_SERVICE_ACCOUNT="$work/relay-sa.json" RELAY_MAX_ATTEMPTS=$max_attempts
export UPSTREAM_PROJECT=fb-upstream UPSTREAM_KEY=$(key_of "$work/upstream.json")
export UPSTREAM_SERVICE_ACCOUNT="$work/firebase-sa.json" FCM_REGISTRY_BINARY="$binary"
export work binary venv port max_attempts relay_db

# In the namespace: the relaying server resolves Google's names through the private hosts file.
# It trusts the upstream's CA only through --relay-ca-file (pytest alone gets it as its CA bundle).
# Three attempts keep a failing recipient's back-off (about 1 s, then 2 s) inside the 10 s answer.
in_namespace() {
  set -euo pipefail
  mount --bind "$work/hosts" /etc/hosts
  "$binary" serve --db "$relay_db" --port "$port" --xmpp-port off \
    --relay-ca-file "$work/certs/ca.pem" --relay-max-attempts "$max_attempts" --relay-poll-interval 200ms \
    2> "$work/relay.log" &
  relay_server=$!
  echo "$relay_server" > "$work/relay.pid"
  trap 'kill "$relay_server" 2>/dev/null || true; wait "$relay_server" 2>/dev/null || true' EXIT
  wait_healthy "$work/relay.log" "$RELAY_URL/health"
  PYTHONDONTWRITEBYTECODE=1 REQUESTS_CA_BUNDLE="$work/certs/ca.pem" SSL_CERT_FILE="$work/certs/ca.pem" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning Tests/clients/test_relay.py
}
export -f in_namespace wait_healthy
unshare -m bash -c in_namespace || {
  echo "--- relaying server:" >&2; cat "$work/relay.log" >&2
  echo "--- upstream:" >&2; cat "$work/upstream.log" >&2
  exit 1
}
