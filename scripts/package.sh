#!/usr/bin/env bash
# Builds the release archive: dist/fcm-registry-VERSION-linux-ARCH.tar.gz, holding
#   bin/fcm-registry                    built with the Swift runtime linked in (--static-swift-stdlib):
#                                       it needs only the C and C++ runtimes, libsqlite3 and zlib
#   lib/systemd/system/fcm-registry.service
#   share/doc/fcm-registry/             the README and docs/
# Install with:  sudo tar -xzf dist/fcm-registry-*.tar.gz -C /usr/local --strip-components 1
#                sudo systemctl enable --now fcm-registry
# The build goes to .build-package, apart from the usual .build; the commit is written into
# Sources/fcm-registry/BuildInfo.swift for the build only (`fcm-registry --version` prints it).
set -euo pipefail
cd "$(dirname "$0")/.."

info=Sources/fcm-registry/BuildInfo.swift
version=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' "$info")
commit=$(git rev-parse --short=12 HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then commit="$commit, modified"; fi
name="fcm-registry-$version-linux-$(uname -m)"

mkdir -p .build-package
cp "$info" .build-package/BuildInfo.swift.orig
trap 'mv .build-package/BuildInfo.swift.orig "$info"' EXIT
sed -i "s/static let commit = \".*\"/static let commit = \"commit $commit\"/" "$info"
swift build -c release --product fcm-registry --static-swift-stdlib --scratch-path .build-package

rm -rf "dist/$name"
mkdir -p "dist/$name/bin" "dist/$name/lib/systemd/system" "dist/$name/share/doc/fcm-registry"
cp .build-package/release/fcm-registry "dist/$name/bin/"
strip "dist/$name/bin/fcm-registry" 2>/dev/null || true
cp scripts/fcm-registry.service "dist/$name/lib/systemd/system/"
cp README.md "dist/$name/share/doc/fcm-registry/"
cp -r docs/. "dist/$name/share/doc/fcm-registry/"
tar -C dist -czf "dist/$name.tar.gz" "$name"
echo "dist/$name.tar.gz"
