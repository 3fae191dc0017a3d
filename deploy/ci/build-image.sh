#!/usr/bin/env bash
# Builds Errand's image as CI does, without an image registry: the Debian slim base made by
# deploy/base/build.sh, then deploy/Containerfile on it, with podman. Prints the image's name.
#
#   deploy/ci/build-image.sh [TAG]        the full image (default localhost/errand:ci)
#   deploy/ci/build-image.sh TAG api      the API-only target `api`
#
# The labels' version is package.json's, the revision git's HEAD (with "-dirty" when the work
# tree has changes), the source the remote origin's URL when it is one of http(s).
#
# Podman keeps the layers, so a second build with the same package-lock.json reuses its
# `npm ci` and only copies the sources again; the images of the build before go.
# ERRAND_BUILD_CA (default: the host's CA bundle) is handed to npm in the build as a secret,
# so that a TLS-intercepting proxy the host trusts is trusted there too; nothing of it stays
# in the image.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
tag=${1:-localhost/errand:ci}
target=${2:-full}
case "$target" in
  full) stages=() install=install ;;
  api) stages=(--target api) install=install-api ;;
  *)
    echo "unknown target $target (full or api)" >&2
    exit 2
    ;;
esac
cache=${ERRAND_BASE_CACHE:-/var/cache/errand-ci/base}
ca=${ERRAND_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}

mkdir -p "$cache"
exec 9>"$cache/image.lock"
flock 9
base=$("$root/deploy/base/build.sh" slim)
secret=()
[ -s "$ca" ] && secret=(--secret "id=ca-certificates,src=$ca")
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$root/package.json")
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$revision" != unknown ] && [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
  revision="$revision-dirty"
fi
source=$(git -C "$root" remote get-url origin 2>/dev/null || true)
[[ "$source" =~ ^https?:// ]] || source=''
# The Containerfile's LABEL reads them as build arguments; but podman's layer cache (buildah
# 1.28) hands back a cached image with the labels of the build that made it, whatever the build
# arguments or --label now say. So the layers are built (and cached) as TAG-layers, and the
# labels put on them by a build of one FROM, never cached, which only writes the image's config.
args=()
labels=()
for label in "version=${version:-unknown}" "revision=$revision" "source=$source"; do
  key=${label%%=*}
  args+=(--build-arg "${key^^}=${label#*=}")
  labels+=(--label "org.opencontainers.image.$label")
done
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
# The install stage is tagged too, so that the build before this one's can go when it is
# replaced (a new package-lock.json), while the current one stays as the next build's cache.
installed="$tag-install"
layers="$tag-layers"
old=$(podman image inspect --format '{{.Id}}' "$tag" "$layers" "$installed" 2>/dev/null || true)
build=(podman build --network host --format docker --layers
  -f "$root/deploy/Containerfile" --ignorefile "$root/deploy/Containerfile.dockerignore"
  "${secret[@]}" --build-arg "BASE=$base")
"${build[@]}" "${args[@]}" "${stages[@]}" -t "$layers" "$root" >&2
"${build[@]}" --target "$install" -t "$installed" "$root" >&2
printf 'FROM %s\n' "$(podman image inspect --format '{{.Id}}' "$layers")" >"$context/Containerfile"
podman build --pull=never --no-cache --format docker "${labels[@]}" -t "$tag" "$context" >&2
new=$(podman image inspect --format '{{.Id}}' "$tag" "$layers" "$installed")
for id in $old; do
  grep -qxF "$id" <<<"$new" || podman rmi "$id" >/dev/null 2>&1 || true
done
echo "$tag"
