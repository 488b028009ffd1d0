#!/bin/sh
# Start PostgreSQL as the postgres user, creating the cluster on the first start (the way the
# official image does for the same variables).
set -eu

user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"

mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 0700 "$PGDATA"

as_postgres() {
    setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "examhall-postgres: POSTGRES_PASSWORD is empty; set it (compose.postgres.yaml takes it from EXAMHALL_POSTGRES_PASSWORD in .env)." >&2
        exit 1
    fi
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    chown postgres "$pwfile"
    # Trust on the socket, as in the official image: only this container reaches it, and
    # `docker compose exec postgres psql -U examhall` (or pg_dump) needs no password then.
    as_postgres initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 > /dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
    if [ "$database" != "postgres" ]; then
        # Single-user mode: no server (and so no connection) is needed to create it.
        echo "CREATE DATABASE \"$database\" OWNER \"$user\"" \
            | as_postgres postgres --single -D "$PGDATA" -j postgres > /dev/null
    fi
    echo "examhall-postgres: created the cluster in $PGDATA with database $database." >&2
fi

exec setpriv --reuid=postgres --regid=postgres --init-groups -- postgres -D "$PGDATA"
