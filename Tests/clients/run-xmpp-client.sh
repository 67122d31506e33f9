#!/usr/bin/env bash
# Unmodified XMPP clients from PyPI (aiofcm on aioxmpp, and slixmpp) against fcm-registry's XMPP
# connection server: TLS from `tls init` on the XMPP port (5235, FCM's), and a hosts file private to
# the test (a mount namespace of its own, so the machine's /etc/hosts is untouched) that sends
# fcm-xmpp.googleapis.com, where aiofcm always connects, to the server. Needs root (unshare) and a
# free port 5235, a built .build/debug/fcm-registry, python3 and curl.
set -euo pipefail
cd "$(dirname "$0")/../.."
source Tests/clients/registry-db.sh

work=$(mktemp -d)
db=$(registry_db "$work" xmpp)
server=""
stop() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work" || true
}
trap stop EXIT
binary=.build/debug/fcm-registry
xmpp_port=5235  # aiofcm's FCM_PORT

# The clients' venv: run-client-tests.sh passes its own; alone, this script makes one. aioxmpp
# imports pytz without declaring it, and calls pyOpenSSL's X509.get_extension (gone in 26.2).
venv=${CLIENT_VENV:-$work/venv}
if [ -z "${CLIENT_VENV:-}" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "aiofcm==1.4" "aioxmpp==0.13.3" "pyOpenSSL==24.2.1" "pytz==2025.2" "slixmpp==1.17.0" pytest
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
tls_port=$(free_port)

"$binary" tls init --dir "$work/certs" > /dev/null
"$binary" serve --db "$db" --key-file "$work/key.json" --port "$port" \
  --tls-port "$tls_port" --tls-cert "$work/certs/server.pem" --tls-key "$work/certs/server-key.pem" \
  --xmpp-port "$xmpp_port" --log-level debug 2> "$work/server.log" &
server=$!
ready=""
for _ in $(seq 100); do
  if curl -fs "http://127.0.0.1:$port/health" > /dev/null 2>&1 \
    && (: < "/dev/tcp/127.0.0.1/$xmpp_port") 2> /dev/null; then
    ready=1; break
  fi
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "fcm-registry did not start (HTTP $port, XMPP $xmpp_port)" >&2; cat "$work/server.log" >&2; exit 1
fi

cat > "$work/hosts" <<HOSTS
127.0.0.1 localhost
127.0.0.1 fcm-xmpp.googleapis.com gcm.googleapis.com gcm-xmpp.googleapis.com fcm.googleapis.com
HOSTS

export FCM_REGISTRY_URL="http://127.0.0.1:$port"
export FCM_REGISTRY_KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$work/key.json")
export FCM_REGISTRY_SENDER_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sender_id"])' "$work/key.json")
export FCM_REGISTRY_XMPP_HOST=127.0.0.1 FCM_REGISTRY_XMPP_PORT=$xmpp_port
export FCM_REGISTRY_CA="$work/certs/ca.pem" SSL_CERT_FILE="$work/certs/ca.pem"
unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$work/hosts" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning Tests/clients/test_xmpp_client.py \
  || { echo "--- fcm-registry log ---" >&2; cat "$work/server.log" >&2; exit 1; }
