#!/usr/bin/env bash
# Builds Errand's image as CI does, without an image registry: the Debian slim base made by
# deploy/base/build.sh, then deploy/Containerfile on it, with podman. Prints the image's name.
#
#   deploy/ci/build-image.sh [TAG]        (default localhost/errand:ci)
#
# Podman keeps the layers, so a second build with the same package-lock.json reuses its
# `npm ci` and only copies the sources again; the images of the build before go.
# ERRAND_BUILD_CA (default: the host's CA bundle) is handed to npm in the build as a secret,
# so that a TLS-intercepting proxy the host trusts is trusted there too; nothing of it stays
# in the image.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
tag=${1:-localhost/errand:ci}
cache=${ERRAND_BASE_CACHE:-/var/cache/errand-ci/base}
ca=${ERRAND_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}

mkdir -p "$cache"
exec 9>"$cache/image.lock"
flock 9
base=$("$root/deploy/base/build.sh" slim)
secret=()
[ -s "$ca" ] && secret=(--secret "id=ca-certificates,src=$ca")
# The install stage is tagged too, so that the build before this one's can go when it is
# replaced (a new package-lock.json), while the current one stays as the next build's cache.
install="$tag-install"
old=$(podman image inspect --format '{{.Id}}' "$tag" "$install" 2>/dev/null || true)
build=(podman build --network host --format docker --layers
  -f "$root/deploy/Containerfile" --ignorefile "$root/deploy/Containerfile.dockerignore"
  "${secret[@]}" --build-arg "BASE=$base")
"${build[@]}" -t "$tag" "$root" >&2
"${build[@]}" --target install -t "$install" "$root" >&2
new=$(podman image inspect --format '{{.Id}}' "$tag" "$install")
for id in $old; do
  grep -qxF "$id" <<<"$new" || podman rmi "$id" >/dev/null 2>&1 || true
done
echo "$tag"
