#!/usr/bin/env bash
# Repeats Tests/postgres/outage.py's cycle (a PostgreSQL restart, then a stop of --stop-seconds,
# under writes through two servers) N times against a release build, and prints each server's
# lag after each event and how each stop ended. The release build first:
#   swift build -c release --product fcm-registry
#   bash Benchmarks/postgres/outage-cycles.sh [CYCLES] [STOP_SECONDS]   (FCM_REGISTRY_BINARY=.build/debug/fcm-registry for another build)
set -euo pipefail
cd "$(dirname "$0")/../.."
cycles=${1:-10}
stop=${2:-15}
python3 -c 'import requests' 2>/dev/null || pip install --quiet requests
exec python3 Tests/postgres/outage.py "${FCM_REGISTRY_BINARY:-.build/release/fcm-registry}" --cycles "$cycles" --stop-seconds "$stop"
