#!/usr/bin/env bash
# Relay fan-out: one topic send to TOKENS (200,000) subscribers, delivered through FCM HTTP v1
# over HTTP/2 to a private nginx that answers at once, against h2load (1 connection, 100 streams)
# on the same nginx, in the same run. See README.md beside this file.
#
#   bash Benchmarks/relay/run.sh                 # print the report
#   bash Benchmarks/relay/run.sh --record        # and write it to Benchmarks/relay/RESULTS.md
#   BINARY=.build/debug/fcm-registry TOKENS=20000 bash Benchmarks/relay/run.sh
#
# Environment: BINARY (default .build/release/fcm-registry, else .build/debug/fcm-registry),
# TOKENS (200000), H2LOAD_REQUESTS (200000), RELAY_RATE (10000000), LOG_LEVEL (serve's, warning),
# KEEP=1 keeps the work folder (it is kept anyway when the run fails).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RECORD=0
for argument in "$@"; do
    case "$argument" in
    --record) RECORD=1 ;;
    -h | --help)
        sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "unknown argument: $argument (try --help)" >&2
        exit 2
        ;;
    esac
done

TOKENS=${TOKENS:-200000}
H2LOAD_REQUESTS=${H2LOAD_REQUESTS:-200000}
RELAY_RATE=${RELAY_RATE:-10000000}
BATCH=1000
PROJECT=bench
TOPIC=bench

if [[ -z "${BINARY:-}" ]]; then
    BINARY=$ROOT/.build/release/fcm-registry
    [[ -x "$BINARY" ]] || BINARY=$ROOT/.build/debug/fcm-registry
fi
[[ -x "$BINARY" ]] || { echo "no executable at $BINARY: build fcm-registry first" >&2; exit 1; }
BINARY=$(cd "$(dirname "$BINARY")" && pwd)/$(basename "$BINARY")
(( TOKENS % BATCH == 0 && TOKENS > 0 )) || { echo "TOKENS must be a positive multiple of $BATCH" >&2; exit 2; }

# MARK: - Tools

missing=()
command -v nginx >/dev/null || missing+=(nginx)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v curl >/dev/null || missing+=(curl)
command -v openssl >/dev/null || missing+=(openssl)
command -v python3 >/dev/null || missing+=(python3)
if ((${#missing[@]})); then
    echo "installing ${missing[*]}" >&2
    apt-get update -qq
    # Debian's nginx package tries to start the system nginx; we never use it.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# MARK: - Work folder and cleanup

WORK=$(mktemp -d /tmp/relay-bench.XXXXXX)
NGINX_PID=
SERVER_PID=
cleanup() {
    local status=$?
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [[ -n "$NGINX_PID" ]] && kill -0 "$NGINX_PID" 2>/dev/null; then
        kill -TERM "$NGINX_PID" 2>/dev/null || true # the master stops its worker
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    if [[ "${KEEP:-0}" == 1 || $status -ne 0 ]]; then
        echo "work folder kept: $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A copy, so that a rebuild during the run does not change what is measured.
cp "$BINARY" "$WORK/fcm-registry"
FCM=$WORK/fcm-registry
if ! "$FCM" project relay --help >/dev/null 2>&1; then
    echo "$BINARY has no 'project relay': it predates the relay (or is being rebuilt); rebuild it or set BINARY" >&2
    exit 1
fi

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

now() { date +%s.%N; }

# MARK: - TLS and the upstream

"$FCM" tls init --dir "$WORK/tls" >/dev/null
UPSTREAM_PORT=$(free_port)
UPSTREAM=https://127.0.0.1:$UPSTREAM_PORT
mkdir -p "$WORK/nginx"

NGINX_VERSION=$(nginx -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
if [[ "$(printf '%s\n' 1.25.1 "$NGINX_VERSION" | sort -V | head -1)" == 1.25.1 ]]; then
    LISTEN="listen 127.0.0.1:$UPSTREAM_PORT ssl; http2 on;"
else
    LISTEN="listen 127.0.0.1:$UPSTREAM_PORT ssl http2;"
fi

cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    client_body_buffer_size 64k;
    keepalive_requests 1000000000;
    keepalive_timeout 600s;
    http2_max_concurrent_streams 512;
    server {
        $LISTEN
        ssl_certificate $WORK/tls/server.pem;
        ssl_certificate_key $WORK/tls/server-key.pem;
        default_type application/json;
        location = /token {
            return 200 '{"access_token":"bench","expires_in":3600,"token_type":"Bearer"}';
        }
        location ~ ^/v1/projects/(?<fcm_project>[^/]+)/messages:send\$ {
            if (\$request_method != POST) { return 405; }
            return 200 '{"name":"projects/\$fcm_project/messages/1"}';
        }
        location = /nginx_status { stub_status; }
        location / { return 404; }
    }
}
EOF
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" -t -q
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" -g 'daemon off;' \
    >"$WORK/nginx/stdout.log" 2>&1 &
NGINX_PID=$!

nginx_status() { curl -sS -m 10 --cacert "$WORK/tls/ca.pem" "$UPSTREAM/nginx_status"; }
for _ in $(seq 100); do nginx_status >/dev/null 2>&1 && break; sleep 0.1; done
nginx_status >/dev/null || { echo "nginx did not start:" >&2; cat "$WORK/nginx/error.log" >&2; exit 1; }

# MARK: - The relaying registry

DB=$WORK/registry.sqlite
KEY=$("$FCM" project create --sender-id 222 --project-id "$PROJECT" --db "$DB" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["server_key"])')

openssl genrsa -out "$WORK/sa-key.pem" 2048 2>/dev/null
python3 - "$WORK/sa-key.pem" "$UPSTREAM/token" "$PROJECT" >"$WORK/sa.json" <<'PY'
import json, sys
key, token_uri, project = sys.argv[1:]
json.dump({
    "type": "service_account",
    "project_id": project,
    "private_key_id": "bench-key-1",
    "private_key": open(key).read(),
    "client_email": f"relay@{project}.iam.gserviceaccount.com",
    "client_id": "1",
    "token_uri": token_uri,
}, sys.stdout)
PY
"$FCM" project relay --project-id "$PROJECT" --service-account "$WORK/sa.json" --upstream "$UPSTREAM" \
    --db "$DB" >/dev/null

PORT=$(free_port)
URL=http://127.0.0.1:$PORT
"$FCM" serve --db "$DB" --port "$PORT" --xmpp-port off --relay-ca-file "$WORK/tls/ca.pem" \
    --relay-rate "$RELAY_RATE" --log-level "${LOG_LEVEL:-warning}" >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
# -m: a connection accepted while the server starts has once been left unanswered (seen under load).
for _ in $(seq 300); do curl -sf -m 2 "$URL/health" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf -m 10 "$URL/health" >/dev/null || { echo "serve did not start:" >&2; cat "$WORK/serve.log" >&2; exit 1; }

# MARK: - Subscribe the audience (nothing is sent)

echo "subscribing $TOKENS tokens to /topics/$TOPIC..." >&2
SUBSCRIBE_START=$(now)
python3 - "$PORT" "$KEY" "$TOPIC" "$TOKENS" "$BATCH" <<'PY'
import http.client, json, sys
port, key, topic, tokens, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
headers = {"Authorization": f"key={key}", "Content-Type": "application/json"}
for start in range(0, tokens, batch):
    body = json.dumps({"to": f"/topics/{topic}", "registration_tokens": [
        f"bench{n:07d}xxxxxxxxxxxx:APA91b" + "Q" * 40 for n in range(start, start + batch)]})
    connection.request("POST", "/iid/v1:batchAdd", body, headers)
    answer = connection.getresponse()
    text = answer.read()
    results = json.loads(text).get("results", []) if answer.status == 200 else []
    if answer.status != 200 or len(results) != batch or any(results):
        sys.exit(f"batchAdd at {start} answered {answer.status}: {text[:300]!r}")
PY
SUBSCRIBE_SECONDS=$(python3 -c "print(f'{$(now) - $SUBSCRIBE_START:.1f}')")

status_kib() { awk -v field="$2:" '$1 == field { print $2 }' "/proc/$1/status"; }
mib() { python3 -c "print(f'{$1 / 1024:.1f}')"; }

sleep 1 # let the subscriptions' after-work settle before the baseline
RSS_BEFORE=$(status_kib "$SERVER_PID" VmRSS)
HWM_BEFORE=$(status_kib "$SERVER_PID" VmHWM)
# Reset the peak (VmHWM) to the current RSS, so that the peak read at the end is the send's.
echo 5 >"/proc/$SERVER_PID/clear_refs" 2>/dev/null && HWM_RESET=yes || HWM_RESET=no
NGINX_BEFORE=$(nginx_status)

# MARK: - One topic send, until every delivery is done

echo "sending one message to /topics/$TOPIC..." >&2
SEND_START=$(now)
ANSWER_SECONDS=$(curl -sS -m 60 -o "$WORK/send.json" -w '%{time_total}' -X POST "$URL/fcm/send" \
    -H "Authorization: key=$KEY" -H 'Content-Type: application/json' \
    -d "{\"to\":\"/topics/$TOPIC\",\"data\":{\"k\":\"v\"}}")
MESSAGE_ID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["message_id"])' "$WORK/send.json") || {
    echo "the send answered: $(cat "$WORK/send.json")" >&2
    exit 1
}

# Polls every 100 ms over one kept-alive connection, sampling the server's RSS each time.
read -r DONE_SECONDS DELIVERED FAILED RSS_MAX_SAMPLED < <(python3 - "$PORT" "$KEY" "$MESSAGE_ID" "$SEND_START" \
    "$SERVER_PID" "$TOKENS" <<'PY'
import http.client, json, sys, time
port, key, message, start, pid, tokens = sys.argv[1:]
start, tokens = float(start), int(tokens)
connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
peak, last, last_change = 0, None, time.time()
while True:
    connection.request("GET", f"/api/messages/{message}", headers={"Authorization": f"key={key}"})
    answer = connection.getresponse()
    body = json.loads(answer.read())
    peak = max(peak, rss())
    delivery = body.get("delivery") or {}
    if answer.status != 200 or not delivery:
        sys.exit(f"GET /api/messages/{message} answered {answer.status}: {body}")
    if delivery["pending"] == 0:
        print(f"{time.time() - start:.3f} {delivery['delivered']} {delivery['failed']} {peak}")
        break
    if delivery != last:
        last, last_change = delivery, time.time()
    elif time.time() - last_change > 60:
        for path in ["/api/relay", f"/api/messages/{message}/deliveries?state=pending&pageSize=3"]:
            connection.request("GET", path, headers={"Authorization": f"key={key}"})
            print(path, connection.getresponse().read().decode(), file=sys.stderr)
        sys.exit(f"no progress for 60 s: {delivery}")
    time.sleep(0.1)
PY
)
RSS_AFTER=$(status_kib "$SERVER_PID" VmRSS)
HWM_AFTER=$(status_kib "$SERVER_PID" VmHWM)
NGINX_AFTER=$(nginx_status)
RELAY_STATUS=$(curl -sS -m 10 -H "Authorization: key=$KEY" "$URL/api/relay")

# MARK: - h2load against the same nginx

echo "h2load: $H2LOAD_REQUESTS requests, 1 connection, 100 streams..." >&2
printf '{"message":{"token":"bench0000000xxxxxxxxxxxx:APA91b%s","data":{"k":"v"}}}' \
    "$(printf 'Q%.0s' $(seq 40))" >"$WORK/h2load-body.json"
h2load -n "$H2LOAD_REQUESTS" -c 1 -m 100 -H 'content-type: application/json' -H 'authorization: Bearer bench' \
    -d "$WORK/h2load-body.json" "$UPSTREAM/v1/projects/$PROJECT/messages:send" >"$WORK/h2load.txt" 2>&1 || true
H2LOAD_RATE=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$WORK/h2load.txt")
H2LOAD_OK=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' "$WORK/h2load.txt")
[[ -n "$H2LOAD_RATE" ]] || { echo "h2load failed:" >&2; cat "$WORK/h2load.txt" >&2; exit 1; }

# MARK: - Report

read -r DELIVERIES_RATE RATIO < <(python3 -c "
d = $TOKENS / $DONE_SECONDS
print(f'{d:.0f} {d / $H2LOAD_RATE:.2f}')")
# stub_status: "Active connections: N", then accepts, handled, requests.
counts() { awk 'NR == 3 { print $1, $3 }' <<<"$1"; }
read -r ACCEPTS_BEFORE REQUESTS_BEFORE < <(counts "$NGINX_BEFORE")
read -r ACCEPTS_AFTER REQUESTS_AFTER < <(counts "$NGINX_AFTER")
# Each status read is itself a connection and a request.
RELAY_CONNECTIONS=$((ACCEPTS_AFTER - ACCEPTS_BEFORE - 1))
RELAY_REQUESTS=$((REQUESTS_AFTER - REQUESTS_BEFORE - 1))
case "$BINARY" in */debug/*) FLAVOR=" (debug build)" ;; */release/*) FLAVOR=" (release build)" ;; *) FLAVOR= ;; esac
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z "$(git -C "$ROOT" status --porcelain -- Sources Package.swift 2>/dev/null)" ]] || COMMIT="$COMMIT + uncommitted changes"
verdict() { python3 -c "print('met' if $1 else 'NOT met')"; }
PEAK_GROWTH=$(( (HWM_AFTER - RSS_BEFORE) * 1024 / TOKENS ))

REPORT=$(cat <<EOF
# Relay fan-out: one topic send to $TOKENS tokens

$(date -u '+%Y-%m-%d %H:%M UTC'); \`Benchmarks/relay/run.sh\` (TOKENS=$TOKENS); commit $COMMIT;
\`$BINARY\`$FLAVOR. Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'),
$(uname -r); nginx $NGINX_VERSION (1 worker, \`return 200\`, TLS + HTTP/2, no access log), $(h2load --version | head -1).
\`serve --relay-rate $RELAY_RATE\`: the default pace is FCM's quota of 10,000 sends/s per project, raised
here so that the relay itself is measured.

| measure | value |
|---|---|
| deliveries/s (send → pending 0) | **$DELIVERIES_RATE** ($TOKENS in ${DONE_SECONDS} s, polled every 100 ms) |
| delivered / failed | $DELIVERED / $FAILED |
| h2load, 1 connection × 100 streams, same nginx | $H2LOAD_RATE req/s ($H2LOAD_OK of $H2LOAD_REQUESTS succeeded) |
| deliveries/s ÷ h2load req/s | **$RATIO** |
| \`POST /fcm/send\` answer time | $(python3 -c "print(f'{$ANSWER_SECONDS * 1000:.1f}')") ms (message $MESSAGE_ID) |
| upstream connections / requests during the send | $RELAY_CONNECTIONS / $RELAY_REQUESTS (token fetches included) |
| RSS after subscribing, before the send | $(mib "$RSS_BEFORE") MiB (peak so far $(mib "$HWM_BEFORE") MiB) |
| RSS peak during the send (VmHWM$( [[ $HWM_RESET == yes ]] && echo ", reset before the send" )) | $(mib "$HWM_AFTER") MiB (highest 100 ms sample $(mib "$RSS_MAX_SAMPLED") MiB) |
| RSS at the end | $(mib "$RSS_AFTER") MiB |
| peak growth per recipient | $PEAK_GROWTH bytes |
| subscribing $TOKENS tokens (batchAdd × $((TOKENS / BATCH))) | ${SUBSCRIBE_SECONDS} s |

Goals: ≥ 10,000 deliveries/s — $(verdict "$DELIVERIES_RATE >= 10000"); ≥ half of h2load's rate —
$(verdict "$RATIO >= 0.5").

Relay status at the end: \`$RELAY_STATUS\`
EOF
)
echo "$REPORT"
if ((RECORD)); then
    echo "$REPORT" >"$HERE/RESULTS.md"
    echo "written to $HERE/RESULTS.md" >&2
fi
if [[ "$DELIVERED" != "$TOKENS" || "$FAILED" != 0 ]]; then
    echo "expected $TOKENS delivered and none failed; serve's log: $WORK/serve.log" >&2
    exit 1
fi
