#!/usr/bin/env bash
# The unmodified firebase-admin SDK against fcm-registry under Google's host names: a service-account
# file from `project service-account`, TLS from `tls init`, and a hosts file private to the test (a
# mount namespace of its own, so the machine's /etc/hosts is untouched). Needs root (port 443,
# unshare), a built .build/debug/fcm-registry, python3 and curl.
set -euo pipefail
cd "$(dirname "$0")/../.."
source Tests/clients/registry-db.sh

work=$(mktemp -d)
db=$(registry_db "$work" unmodified)
server=""
stop() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work" || true
}
trap stop EXIT
binary=.build/debug/fcm-registry

# The SDK's venv: run-client-tests.sh passes its own; alone, this script makes one.
venv=${CLIENT_VENV:-$work/venv}
if [ -z "${CLIENT_VENV:-}" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "firebase-admin==7.7.0" pytest
fi

"$binary" tls init --dir "$work/certs" > /dev/null
"$binary" project create --sender-id 555000555000 --project-id sdk-app --db "$db" > "$work/project.json"
"$binary" project service-account --project-id sdk-app --db "$db" --output "$work/service-account.json"
"$binary" serve --db "$db" --port off --tls-port 443 \
  --tls-cert "$work/certs/server.pem" --tls-key "$work/certs/server-key.pem" 2> "$work/server.log" &
server=$!
for _ in $(seq 100); do
  curl -fs --cacert "$work/certs/ca.pem" --resolve fcm.googleapis.com:443:127.0.0.1 \
    https://fcm.googleapis.com/health > /dev/null 2>&1 && break
  sleep 0.1
done

cat > "$work/hosts" <<HOSTS
127.0.0.1 localhost
127.0.0.1 fcm.googleapis.com iid.googleapis.com oauth2.googleapis.com iamcredentials.googleapis.com
HOSTS

export GOOGLE_APPLICATION_CREDENTIALS="$work/service-account.json"
export REQUESTS_CA_BUNDLE="$work/certs/ca.pem" SSL_CERT_FILE="$work/certs/ca.pem"
export FCM_REGISTRY_KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$work/project.json")
export FCM_REGISTRY_SENDER_ID=555000555000
unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$work/hosts" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning Tests/clients/test_unmodified_sdk.py \
  || { cat "$work/server.log" >&2; exit 1; }
