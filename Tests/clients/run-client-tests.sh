#!/usr/bin/env bash
# Drives a real fcm-registry server with unmodified client SDKs (firebase-admin for Python): first
# over plain HTTP with the SDK's URLs pointed at the server, then (run-unmodified-sdk.sh) with only a
# service-account file under Google's host names, then (run-xmpp-client.sh) XMPP client libraries
# (aiofcm, slixmpp) against the XMPP connection server, then (run-relay.sh) a relaying server
# delivering to an emulator under Google's host names, with firebase-admin and pyfcm sending through it, then
# (run-webhooks.sh) webhooks verified by a real receiver with the standardwebhooks package. Needs a built .build/debug/fcm-registry,
# python3, curl, and root for the last two parts; installs the clients in a private venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
source Tests/clients/registry-db.sh

work=$(mktemp -d)
server=""
# The server saves its audience checkpoint as it stops: wait for it before removing the folder.
stop() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work" || true
}
trap stop EXIT

python3 -m venv "$work/venv"
# aiofcm and slixmpp are the XMPP clients of run-xmpp-client.sh. aioxmpp imports pytz without
# declaring it, and calls pyOpenSSL's X509.get_extension (gone in 26.2).
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "firebase-admin==7.7.0" "pyfcm==2.1.1" pytest \
  "aiofcm==1.4" "aioxmpp==0.13.3" "pyOpenSSL==24.2.1" "pytz==2025.2" "slixmpp==1.17.0" "standardwebhooks==1.1.0"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
.build/debug/fcm-registry serve --db "$(registry_db "$work" sdk_urls)" --port "$port" > "$work/first-start.json" 2> "$work/server.log" &
server=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
  sleep 0.1
done

export FCM_REGISTRY_URL="http://127.0.0.1:$port"
export FCM_REGISTRY_PROJECT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["project_id"])' "$work/first-start.json")
export FCM_REGISTRY_KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$work/first-start.json")
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning Tests/clients/test_firebase_admin.py || { cat "$work/server.log" >&2; exit 1; }
# The migration guide's script that builds import-groups' CSV from an app server's own records.
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider Tests/clients/test_groups_from_app_db.py

# Then the same SDK with nothing but a service-account file, under Google's host names.
kill "$server" && wait "$server" || true
server=""
CLIENT_VENV="$work/venv" bash Tests/clients/run-unmodified-sdk.sh

# Then XMPP: unmodified XMPP client libraries against the connection server.
CLIENT_VENV="$work/venv" bash Tests/clients/run-xmpp-client.sh

# Then the relay: a relaying server delivers to an emulator of FCM under Google's host names, and
# firebase-admin and pyfcm (installed above for this part) send through it.
CLIENT_VENV="$work/venv" bash Tests/clients/run-relay.sh

# Then webhooks: a real receiver verifies every event with the standardwebhooks package.
CLIENT_VENV="$work/venv" bash Tests/clients/run-webhooks.sh
