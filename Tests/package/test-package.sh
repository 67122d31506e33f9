#!/usr/bin/env bash
# The release archive works outside the build: it unpacks into an empty folder, its binary needs
# only the C and C++ runtimes, libsqlite3 and zlib, and it runs there (--version, a condition check, and
# serve answering /health on a fresh database).
set -euo pipefail
cd "$(dirname "$0")/../.."
archive=$(bash scripts/package.sh | tail -n 1)
place=$(mktemp -d)
stop() { if [ -n "${server:-}" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi; rm -rf "$place"; }
trap stop EXIT
tar -xzf "$archive" -C "$place" --strip-components 1
binary="$place/bin/fcm-registry"

echo "ldd $binary:"
ldd "$binary" | tee "$place/ldd.txt"
# Allowed: the kernel's vDSO, the dynamic loader, the C runtime (libc, libm, libdl, libpthread,
# librt, libutil), the C++ runtime (libstdc++, libgcc_s), libsqlite3, and zlib (libz: the relay's
# HTTP client links it; every Debian system has it, zlib1g is of required priority).
unexpected=$(grep -vE '^\s*(linux-vdso\.so|/lib.*/ld-linux|lib(c|m|dl|pthread|rt|util)\.so|libstdc\+\+\.so|libgcc_s\.so|libsqlite3\.so|libz\.so)' "$place/ldd.txt" || true)
if [ -n "$unexpected" ]; then
  echo "the binary needs more than the C and C++ runtimes, libsqlite3 and zlib:" >&2
  echo "$unexpected" >&2
  exit 1
fi
if grep -q "not found" "$place/ldd.txt"; then echo "a library is missing" >&2; exit 1; fi

cd "$place"
version=$("$binary" --version)
echo "--version: $version"
case "$version" in *"commit "*) ;; *) echo "--version names no commit" >&2; exit 1 ;; esac
"$binary" condition check "'a' in topics && !('b' in topics)"
for unit in lib/systemd/system/fcm-registry.service share/doc/fcm-registry/README.md share/doc/fcm-registry/operations.md; do
  test -f "$unit" || { echo "missing $unit" >&2; exit 1; }
done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$binary" serve --port "$port" --db "$place/registry.sqlite" --key-file "$place/key.json" --log-level warning &
server=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/health"
echo
echo "the release archive works from $place"
