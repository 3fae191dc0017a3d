#!/usr/bin/env bash
# Makes a base image from Debian's packages with mmdebstrap and imports it into podman, for a
# build without an image registry (ours in CI: see docs/deploy.md#building-without-a-registry).
#
#   deploy/base/build.sh slim       Debian slim (minbase): the base of deploy/Containerfile
#   deploy/base/build.sh postgres   PostgreSQL from Debian's postgresql package, started like
#                                   the official image (POSTGRES_PASSWORD, POSTGRES_USER,
#                                   POSTGRES_DB, PGDATA, PGPORT): for deploy/compose.yaml
#
# Prints the image's name. The tarball is kept in $ERRAND_BASE_CACHE (/var/cache/errand-ci/base)
# and the image in podman's storage, both named by a hash of the release, the mirror, the
# package list and the files that shape them: a second run with the same inputs reuses them.
# Needs root (mmdebstrap's root mode), mmdebstrap, podman and util-linux's flock.
set -euo pipefail

kind=${1:-}
release=${ERRAND_BASE_RELEASE:-bookworm}
mirror=${ERRAND_BASE_MIRROR:-http://deb.debian.org/debian}
security=${ERRAND_BASE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
cache=${ERRAND_BASE_CACHE:-/var/cache/errand-ci/base}
here=$(cd "$(dirname "$0")" && pwd)

# What Debian's slim images leave out; later apt-get installs honour it too.
slim=(
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/groff/*'
  --dpkgopt='path-exclude=/usr/share/lintian/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-include=/usr/share/locale/locale.alias'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
)
changes=(--change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]')
case "$kind" in
  slim)
    name=localhost/errand-base/debian
    packages=()
    hooks=()
    shaped_by=("$0")
    ;;
  postgres)
    name=localhost/errand-base/postgres
    packages=(postgresql ca-certificates)
    # The package makes a cluster "main"; this image makes its own in PGDATA at first start.
    hooks=(
      --customize-hook='chroot "$1" sh -c "pg_lsclusters -h | while read -r v c _; do pg_dropcluster \"\$v\" \"\$c\"; done"'
      --customize-hook="copy-in $here/postgres-entrypoint.sh /usr/local/bin"
      --customize-hook='chroot "$1" sh -c "ln -s \$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)/* /usr/local/bin/ && chmod 0755 /usr/local/bin/postgres-entrypoint.sh"'
    )
    shaped_by=("$0" "$here/postgres-entrypoint.sh")
    changes+=(
      --change 'ENV PGDATA=/var/lib/postgresql/data'
      --change 'VOLUME /var/lib/postgresql/data'
      --change 'EXPOSE 5432'
      --change 'STOPSIGNAL SIGINT'
      --change 'ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]'
      --change 'CMD ["postgres"]'
    )
    ;;
  *)
    sed -n '2,14s/^# \{0,1\}//p' "$0" >&2
    exit 2
    ;;
esac

key=$(
  {
    printf '%s\n' "$kind" "$release" "$mirror" "$security" "${packages[@]}"
    cat "${shaped_by[@]}"
  } | sha256sum | cut -c1-12
)
tag="$name:$release-$key"
tarball="$cache/$kind-$release-$key.tar"

mkdir -p "$cache"
exec 9>"$cache/$kind.lock"
flock 9
if podman image exists "$tag"; then
  echo "$tag"
  exit 0
fi
if [ ! -s "$tarball" ]; then
  echo "base: mmdebstrap $release ($kind) into $tarball" >&2
  include=()
  [ "${#packages[@]}" -gt 0 ] && include=(--include="$(IFS=,; echo "${packages[*]}")")
  # merged /usr made by mmdebstrap's own hook, not by the usrmerge package (and its perl).
  mmdebstrap --mode=root --variant=minbase --format=tar \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr "${slim[@]}" "${include[@]}" "${hooks[@]}" \
    "$release" "$tarball.partial" \
    "deb $mirror $release main" "deb $mirror $release-updates main" \
    "deb $security $release-security main" >&2
  mv "$tarball.partial" "$tarball"
  # Older tarballs of this kind are of other inputs: keep only the current one.
  find "$cache" -maxdepth 1 -name "$kind-*.tar" ! -name "$(basename "$tarball")" -delete
fi
podman import "${changes[@]}" "$tarball" "$tag" >/dev/null
# Images of other inputs go when nothing is built on them any more.
podman images --format '{{.Repository}}:{{.Tag}}' "$name" | grep -vxF "$tag" |
  xargs -r podman rmi >/dev/null 2>&1 || true
echo "$tag"
