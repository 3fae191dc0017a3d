#!/bin/sh
# The entry point of the PostgreSQL image deploy/base/build.sh makes from Debian's package: the
# part of the official image's interface deploy/compose.yaml uses. On the first start it makes
# the cluster in $PGDATA with the superuser $POSTGRES_USER (postgres) signing in over TCP with
# $POSTGRES_PASSWORD, and the database $POSTGRES_DB (the user's name); then it runs the server
# as the postgres user. $PGPORT and `-c name=value` arguments work as with `postgres` itself.
set -eu

if [ "${1#-}" != "$1" ]; then
  set -- postgres "$@"
fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres-entrypoint: set POSTGRES_PASSWORD (the superuser's password)" >&2
    exit 1
  fi
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    quoted=$(printf '%s' "$db" | sed 's/"/""/g')
    echo "CREATE DATABASE \"$quoted\";" | postgres --single -D "$PGDATA" -j postgres >/dev/null
  fi
  echo "postgres-entrypoint: made the cluster in $PGDATA (user $user, database $db)" >&2
fi

exec "$@"
