#!/usr/bin/env bash
# Fuzzes a running fcm-registry against its own contract: schemathesis reads GET /openapi.json and
# sends generated requests to every operation with a server key. It fails on any 5xx answer and on
# any answer whose status, content type or body the document does not describe. Needs a built
# .build/debug/fcm-registry, python3 and curl; installs schemathesis in a private venv.
set -euo pipefail
cd "$(dirname "$0")/../.."

work=$(mktemp -d)
server=""
stop() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work" || true
}
trap stop EXIT

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==4.32.5"

binary=.build/debug/fcm-registry
db="$work/registry.sqlite"
"$binary" project create --db "$db" --project-id fuzz-app --sender-id 424242424242 > "$work/project.json"
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$work/project.json")

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$binary" serve --db "$db" --port "$port" --log-level warning 2> "$work/server.log" &
server=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
  sleep 0.1
done

# A little of everything, so that lookups find something as well as nothing.
base="http://127.0.0.1:$port"
tokens='["fuzz-token-1:APA91bAAAA","fuzz-token-2:APA91bBBBB","fuzz-token-3:APA91bCCCC"]'
curl -fs "$base/iid/v1:batchAdd" -H "Authorization: key=$key" -H 'Content-Type: application/json' \
  -d "{\"to\":\"/topics/news\",\"registration_tokens\":$tokens}" > /dev/null
curl -fs "$base/fcm/notification" -H "Authorization: key=$key" -H 'project_id: 424242424242' \
  -H 'Content-Type: application/json' \
  -d "{\"operation\":\"create\",\"notification_key_name\":\"family\",\"registration_ids\":$tokens}" > /dev/null
curl -fs "$base/fcm/send" -H "Authorization: key=$key" -H 'Content-Type: application/json' \
  -d '{"to":"/topics/news","data":{"hello":"world"}}' > /dev/null

# The XMPP drain and the token's DELETE change state other operations read; they are fuzzed like
# the rest. Every check that compares an answer with the document, and no server error. One
# worker: with two, hypothesis describes its strategies from two threads at once, which
# CPython 3.11's ast module does not survive ("AST constructor recursion depth mismatch").
# The v1 paths name the project: fuzzing it only ever meets 403, so it is pinned to the key's.
cat > "$work/schemathesis.toml" <<'TOML'
[parameters]
"path.project" = "fuzz-app"
TOML
# Run from the scratch folder: schemathesis keeps its cache (.schemathesis/) in the working
# directory, and a test run leaves the checkout as it found it.
# Revoking or rotating a key (the fuzzer guesses ids 1, 2, …) would end the run's own key: those two
# operations run last, in a run of their own.
status=0
fuzz() {
  (cd "$work" && "$work/venv/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$base/openapi.json" \
    --header "Authorization: key=$key" --header "project_id: 424242424242" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --phases examples,coverage,fuzzing --max-examples "${SCHEMATHESIS_EXAMPLES:-50}" --workers 1 \
    --request-timeout 10 --seed 1 --no-color "$@") 2>&1 | tee -a "$work/schemathesis.log"
}
fuzz --exclude-operation-id revokeKey --exclude-operation-id rotateKey || status=$?
fuzz --include-operation-id revokeKey --include-operation-id rotateKey || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- server log" >&2
  tail -50 "$work/server.log" >&2
fi
exit "$status"
