#!/usr/bin/env bash
# Relay fan-out: one topic send to TOKENS (200,000) subscribers, delivered through FCM HTTP v1
# over HTTP/2 to a private nginx that answers at once (once it has read the request), against
# h2load (1 connection, 100 streams) on the same nginx, in the same run. See README.md beside this file.
#
#   bash Benchmarks/relay/run.sh                 # print the report
#   bash Benchmarks/relay/run.sh --record        # and write it to Benchmarks/relay/RESULTS.md
#   BINARY=.build/debug/fcm-registry TOKENS=20000 bash Benchmarks/relay/run.sh
#
# Environment: BINARY (default .build/release/fcm-registry, else .build/debug/fcm-registry),
# TOKENS (200000), SMALL_TOKENS (TOKENS/10: two smaller sends first, for memory against audience; 0: none),
# H2LOAD_REQUESTS (200000), RELAY_RATE (10000000), LOG_LEVEL (serve's, warning),
# NGINX_EARLY_ANSWER=1 (answer before reading the request body, resetting each stream),
# KEEP=1 keeps the work folder (it is kept anyway when the run fails).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RECORD=0
for argument in "$@"; do
    case "$argument" in
    --record) RECORD=1 ;;
    -h | --help)
        sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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
SMALL_TOKENS=${SMALL_TOKENS:-$((TOKENS / 10))}
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
(( SMALL_TOKENS >= 0 && SMALL_TOKENS <= TOKENS )) || { echo "SMALL_TOKENS must be within 0...TOKENS" >&2; exit 2; }

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
        rm -f "$WORK/fcm-registry" # the executable's copy; logs, database and configuration stay
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
    echo "$BINARY has no 'project relay': it predates the relay, or is being rebuilt" >&2
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

SENT='{"name":"projects/$fcm_project/messages/1"}'
if [[ "${NGINX_EARLY_ANSWER:-0}" == 1 ]]; then
    # Answers as soon as the request head is in, then resets the stream (RST_STREAM NO_ERROR)
    # because the body was never read.
    SEND_LOCATION="location ~ ^/v1/projects/[^/]+/messages:send\$ {
            if (\$request_method != POST) { return 405; }
            return 200 '$SENT';
        }"
else
    # Reads the whole request body first, as FCM does: the mirror reads it before the content
    # phase, the static handler then finds no file, and the named location answers.
    SEND_LOCATION="location ~ ^/v1/projects/[^/]+/messages:send\$ {
            mirror /read-body;
            root /nonexistent;
            error_page 404 405 =200 @sent;
        }
        location = /read-body { internal; return 204; }
        location @sent { return 200 '$SENT'; }"
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
    map \$uri \$fcm_project { ~^/v1/projects/(?<p>[^/]+)/ \$p; }
    server {
        $LISTEN
        ssl_certificate $WORK/tls/server.pem;
        ssl_certificate_key $WORK/tls/server-key.pem;
        default_type application/json;
        location = /token {
            return 200 '{"access_token":"bench","expires_in":3600,"token_type":"Bearer"}';
        }
        $SEND_LOCATION
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
    --relay-rate "$RELAY_RATE" --log-level "${LOG_LEVEL:-warning}" ${SERVE_OPTIONS:-} >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
# -m: a connection accepted while the server starts has once been left unanswered (seen under load).
for _ in $(seq 300); do curl -sf -m 2 "$URL/health" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf -m 10 "$URL/health" >/dev/null || { echo "serve did not start:" >&2; cat "$WORK/serve.log" >&2; exit 1; }

# MARK: - Subscribe the audiences (nothing is sent)

# batchAdd of tokens [0, count) to a topic, 1000 a call.
subscribe() {
    python3 - "$PORT" "$KEY" "$1" "$2" "$BATCH" <<'PY'
import http.client, json, sys
port, key, topic, tokens, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
headers = {"Authorization": f"key={key}", "Content-Type": "application/json"}
for start in range(0, tokens, batch):
    body = json.dumps({"to": f"/topics/{topic}", "registration_tokens": [
        f"bench{n:07d}xxxxxxxxxxxx:APA91b" + "Q" * 40 for n in range(start, min(start + batch, tokens))]})
    connection.request("POST", "/iid/v1:batchAdd", body, headers)
    answer = connection.getresponse()
    text = answer.read()
    results = json.loads(text).get("results", []) if answer.status == 200 else []
    if answer.status != 200 or len(results) != min(batch, tokens - start) or any(results):
        sys.exit(f"batchAdd at {start} answered {answer.status}: {text[:300]!r}")
PY
}

echo "subscribing $TOKENS tokens to /topics/$TOPIC..." >&2
SUBSCRIBE_START=$(now)
subscribe "$TOPIC" "$TOKENS"
SUBSCRIBE_SECONDS=$(python3 -c "print(f'{$(now) - $SUBSCRIBE_START:.1f}')")
if ((SMALL_TOKENS > 0)); then
    echo "subscribing $SMALL_TOKENS of them to /topics/$TOPIC-small..." >&2
    subscribe "$TOPIC-small" "$SMALL_TOKENS"
fi

# MARK: - Topic sends, each until every delivery is done

status_kib() { awk -v field="$2:" '$1 == field { print $2 }' "/proc/$1/status"; }
mib() { python3 -c "print(f'{$1 / 1024:.1f}')"; }

# Sends one legacy message to topic $1 ($2 subscribers) and polls its delivery every 100 ms over
# one kept-alive connection, sampling the server's RSS each time. Sets the SEND_* variables.
send_and_wait() {
    local topic=$1 audience=$2 start
    sleep 1 # let earlier work settle before the baseline
    SEND_RSS_BEFORE=$(status_kib "$SERVER_PID" VmRSS)
    SEND_HWM_BEFORE=$(status_kib "$SERVER_PID" VmHWM)
    # Reset the peak (VmHWM) to the current RSS, so that the peak read at the end is the send's.
    echo 5 >"/proc/$SERVER_PID/clear_refs" 2>/dev/null && HWM_RESET=yes || HWM_RESET=no
    SEND_NGINX_BEFORE=$(nginx_status)
    echo "sending one message to /topics/$topic ($audience subscribers)..." >&2
    start=$(now)
    SEND_ANSWER_SECONDS=$(curl -sS -m 60 -o "$WORK/send.json" -w '%{time_total}' -X POST "$URL/fcm/send" \
        -H "Authorization: key=$KEY" -H 'Content-Type: application/json' \
        -d "{\"to\":\"/topics/$topic\",\"data\":{\"k\":\"v\"}}")
    SEND_MESSAGE_ID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["message_id"])' \
        "$WORK/send.json") || {
        echo "the send answered: $(cat "$WORK/send.json")" >&2
        exit 1
    }
    read -r SEND_SECONDS SEND_DELIVERED SEND_FAILED SEND_RSS_SAMPLED SEND_SLOWEST_POLL < <(python3 - "$PORT" \
        "$KEY" "$SEND_MESSAGE_ID" "$start" "$SERVER_PID" <<'PY'
import http.client, json, sys, time
port, key, message, start, pid = sys.argv[1:]
start = float(start)
connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
def get(path):
    connection.request("GET", path, headers={"Authorization": f"key={key}"})
    answer = connection.getresponse()
    return answer.status, answer.read().decode()
peak, slowest, last, last_change = 0, 0.0, None, time.time()
while True:
    asked = time.time()
    status, text = get(f"/api/messages/{message}")
    slowest = max(slowest, time.time() - asked)
    peak = max(peak, rss())
    delivery = json.loads(text).get("delivery") if status == 200 else None
    if not delivery:
        sys.exit(f"GET /api/messages/{message} answered {status}: {text[:300]}")
    if delivery["pending"] == 0:
        print(f"{time.time() - start:.3f} {delivery['delivered']} {delivery['failed']} {peak} {slowest * 1000:.0f}")
        break
    if delivery != last:
        last, last_change = delivery, time.time()
    elif time.time() - last_change > 60:
        for path in ["/api/relay", f"/api/messages/{message}/deliveries?state=pending&pageSize=3"]:
            print(path, *get(path), file=sys.stderr)
        sys.exit(f"no progress for 60 s: {delivery}")
    time.sleep(0.1)
PY
    )
    SEND_RSS_AFTER=$(status_kib "$SERVER_PID" VmRSS)
    SEND_HWM_AFTER=$(status_kib "$SERVER_PID" VmHWM)
    SEND_NGINX_AFTER=$(nginx_status)
    if [[ "$SEND_DELIVERED" != "$audience" || "$SEND_FAILED" != 0 ]]; then
        echo "expected $audience delivered and none failed, got $SEND_DELIVERED and $SEND_FAILED" >&2
        exit 1
    fi
}

if ((SMALL_TOKENS > 0)); then
    # The first send pays for what is made once (the upstream connection, the access token,
    # caches): a warm-up, so that the two sends compared both come after it.
    send_and_wait "$TOPIC-small" "$SMALL_TOKENS"
    WARMUP_GROWTH=$((SEND_HWM_AFTER - SEND_RSS_BEFORE))
    send_and_wait "$TOPIC-small" "$SMALL_TOKENS"
    SMALL_SECONDS=$SEND_SECONDS
    SMALL_GROWTH=$((SEND_HWM_AFTER - SEND_RSS_BEFORE))
fi
send_and_wait "$TOPIC" "$TOKENS"
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
d = $TOKENS / $SEND_SECONDS
print(f'{d:.0f} {d / $H2LOAD_RATE:.3f}')")
# stub_status: "Active connections: N", then accepts, handled, requests.
counts() { awk 'NR == 3 { print $1, $3 }' <<<"$1"; }
read -r ACCEPTS_BEFORE REQUESTS_BEFORE < <(counts "$SEND_NGINX_BEFORE")
read -r ACCEPTS_AFTER REQUESTS_AFTER < <(counts "$SEND_NGINX_AFTER")
# Each status read is itself a connection and a request.
RELAY_CONNECTIONS=$((ACCEPTS_AFTER - ACCEPTS_BEFORE - 1))
RELAY_REQUESTS=$((REQUESTS_AFTER - REQUESTS_BEFORE - 1))
case "$BINARY" in */debug/*) FLAVOR=" (debug build)" ;; */release/*) FLAVOR=" (release build)" ;; *) FLAVOR= ;; esac
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git -C "$ROOT" status --porcelain -- Sources Package.swift 2>/dev/null)" ]]; then
    COMMIT="$COMMIT + uncommitted changes"
fi
verdict() { python3 -c "print('met' if $1 else 'NOT met')"; }
GROWTH=$((SEND_HWM_AFTER - SEND_RSS_BEFORE))
if [[ "${NGINX_EARLY_ANSWER:-0}" == 1 ]]; then
    NGINX_MODE="answers \`200\` on the request head, before the body (then resets the stream)"
else
    NGINX_MODE="reads the request body, then answers \`200\`"
fi
PEAK_NOTE=
[[ $HWM_RESET == yes ]] && PEAK_NOTE=", reset before the send"
SMALL_ROW=
if ((SMALL_TOKENS > 0)); then
    SMALL_RATE=$(python3 -c "print(f'{$SMALL_TOKENS / $SMALL_SECONDS:.0f}')")
    SMALL_ROW="| the same for a send to $SMALL_TOKENS, made before it | $(mib "$SMALL_GROWTH") MiB"
    SMALL_ROW+=" ($SMALL_RATE deliveries/s; a first, warm-up send to them grew it $(mib "$WARMUP_GROWTH") MiB) |"
fi

REPORT=$(
    cat <<EOF
# Relay fan-out: one topic send to $TOKENS tokens

$(date -u '+%Y-%m-%d %H:%M UTC'); \`Benchmarks/relay/run.sh\` (TOKENS=$TOKENS); commit $COMMIT;
\`$BINARY\`$FLAVOR. Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'),
Linux $(uname -r). Upstream: nginx $NGINX_VERSION on loopback, 1 worker, TLS + HTTP/2, no access log; it
$NGINX_MODE. $(h2load --version | head -1). \`serve --relay-rate $RELAY_RATE\`: the default pace is
FCM's quota of 10,000 sends/s per project, raised here so that the relay itself is measured.

| measure | value |
|---|---|
| deliveries/s (send → pending 0) | **$DELIVERIES_RATE** ($TOKENS in ${SEND_SECONDS} s, polled every 100 ms) |
| delivered / failed | $SEND_DELIVERED / $SEND_FAILED |
| h2load, 1 connection × 100 streams, same nginx | $H2LOAD_RATE req/s ($H2LOAD_OK of $H2LOAD_REQUESTS succeeded) |
| deliveries/s ÷ h2load req/s | **$RATIO** |
| \`POST /fcm/send\` answer time | $(python3 -c "print(f'{$SEND_ANSWER_SECONDS * 1000:.1f}')") ms |
| slowest \`GET /api/messages/{id}\` during the send | $SEND_SLOWEST_POLL ms |
| upstream connections / requests during the send | $RELAY_CONNECTIONS / $RELAY_REQUESTS (token fetches included) |
| RSS before the send | $(mib "$SEND_RSS_BEFORE") MiB (peak since start $(mib "$SEND_HWM_BEFORE") MiB) |
| RSS peak during the send (VmHWM$PEAK_NOTE) | $(mib "$SEND_HWM_AFTER") MiB (highest 100 ms sample $(mib "$SEND_RSS_SAMPLED") MiB) |
| RSS at the end | $(mib "$SEND_RSS_AFTER") MiB |
| peak growth during the send | $(mib "$GROWTH") MiB |
$SMALL_ROW
| subscribing $TOKENS tokens (batchAdd × $((TOKENS / BATCH))) | ${SUBSCRIBE_SECONDS} s |

Goals: ≥ 10,000 deliveries/s — $(verdict "$DELIVERIES_RATE >= 10000"); ≥ half of h2load's rate —
$(verdict "$RATIO >= 0.5"); memory not growing with the audience — compare the two growth rows.

Relay status at the end: \`$RELAY_STATUS\`
EOF
)
echo "$REPORT"
if ((RECORD)); then
    echo "$REPORT" >"$HERE/RESULTS.md"
    echo "written to $HERE/RESULTS.md" >&2
fi
