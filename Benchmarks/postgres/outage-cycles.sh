#!/usr/bin/env bash
# Repeats Tests/postgres/outage.py's cycle (a PostgreSQL restart, then a stop of --stop-seconds,
# under writes through two servers) N times against a release build, and prints each server's
# lag after each event and how each stop ended; then one cycle with a 70 s stop. The release build first:
#   swift build -c release --product fcm-registry
#   bash Benchmarks/postgres/outage-cycles.sh [CYCLES] [STOP_SECONDS]   (FCM_REGISTRY_BINARY=.build/debug/fcm-registry for another build)
set -euo pipefail
cd "$(dirname "$0")/../.."
cycles=${1:-10}
stop=${2:-15}
python3 -c 'import requests' 2>/dev/null || pip install --quiet requests
binary=${FCM_REGISTRY_BINARY:-.build/release/fcm-registry}
python3 Tests/postgres/outage.py "$binary" --cycles "$cycles" --stop-seconds "$stop"
# One stop longer than postgres-nio's one-minute circuit breaker: the pool is replaced.
python3 Tests/postgres/outage.py "$binary" --cycles 1 --stop-seconds 70
