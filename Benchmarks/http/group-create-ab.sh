#!/usr/bin/env bash
# Alternates two builds: group creates/s against a trivial GET / on the same server (wrk, 2 threads,
# 64 connections, 8 s each), a fresh database each run, three rounds.
# Usage: bash group-create-ab.sh OLD_BINARY NEW_BINARY   (release builds; port 8096 free)
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
old=$1 new=$2
for round in 1 2 3; do
  for b in "$old" "$new"; do
    rm -rf "$work/run" && mkdir "$work/run"
    "$b" project create --sender-id 123456789012 --project-id bench-app --db "$work/run/b.sqlite" > "$work/run/app.json" 2>/dev/null
    KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server_key"])' "$work/run/app.json")
    "$b" serve --db "$work/run/b.sqlite" --port 8096 --xmpp-port off 2> "$work/run/serve.log" & pid=$!
    for _ in $(seq 50); do curl -fs localhost:8096/health >/dev/null 2>&1 && break; sleep 0.1; done
    get=$(wrk -t2 -c64 -d8s http://127.0.0.1:8096/ | awk '/Requests\/sec/{print $2}')
    create=$(KEY=$KEY wrk -t2 -c64 -d8s -s "$here/group-create.lua" http://127.0.0.1:8096 | awk '/Requests\/sec/{print $2}')
    kill $pid; wait $pid 2>/dev/null
    python3 -c "print('$b round $round: GET $get/s, creates $create/s, ratio %.3f' % ($create/$get))"
  done
done
