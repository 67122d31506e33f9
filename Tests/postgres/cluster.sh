#!/usr/bin/env bash
# A private PostgreSQL cluster for the test suites: `cluster.sh start DIR` makes one in DIR (initdb,
# password authentication, loopback only, a free port), creates the role and database `registry`,
# and prints the URL the suites read from FCM_REGISTRY_TEST_POSTGRES; `cluster.sh stop DIR` stops it.
# `cluster.sh restart DIR` restarts it (fast mode: sessions are ended, as a failover does), and
# `cluster.sh start-again DIR` starts a stopped one on the same port, for the outage tests.
# Runs as the invoking user, or as `postgres` when that is root (PostgreSQL refuses to run as root).
# Needs Debian's postgresql (initdb and pg_ctl under /usr/lib/postgresql/*/bin).
set -euo pipefail

command=${1:?start or stop}
dir=${2:?a folder for the cluster}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$command" in
start)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  password=$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')
  echo "$password" > "$dir.password"
  [ "$(id -u)" = 0 ] && chown postgres "$dir.password"
  as_owner "$bin/initdb" --pgdata "$dir/data" --username postgres --auth-local trust --auth-host scram-sha-256 \
    --pwfile "$dir.password" --encoding UTF8 --locale C.UTF-8 > "$dir.initdb.log"
  options="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=1000 -c fsync=on"
  echo "$options" > "$dir.options"
  as_owner "$bin/pg_ctl" --pgdata "$dir/data" --log "$dir/server.log" --wait -o "$options" start > /dev/null
  as_owner psql -h "$dir" -p "$port" -U postgres -q -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE registry LOGIN PASSWORD '$password'" -c "CREATE DATABASE registry OWNER registry" > /dev/null
  echo "postgres://registry:$password@127.0.0.1:$port/registry?sslmode=disable"
  ;;
stop)
  as_owner "$bin/pg_ctl" --pgdata "$dir/data" --mode fast --wait stop > /dev/null || true
  ;;
restart)
  as_owner "$bin/pg_ctl" --pgdata "$dir/data" --log "$dir/server.log" --mode fast --wait -o "$(cat "$dir.options")" restart > /dev/null
  ;;
start-again)
  as_owner "$bin/pg_ctl" --pgdata "$dir/data" --log "$dir/server.log" --wait -o "$(cat "$dir.options")" start > /dev/null
  ;;
*)
  echo "usage: cluster.sh start|stop|restart|start-again DIR" >&2
  exit 2
  ;;
esac
