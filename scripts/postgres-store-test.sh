#!/usr/bin/env bash
# Runs the Postgres idempotency store's tests against a real PostgreSQL on
# 127.0.0.1: Debian's package, installed when missing, initialised here in
# a temporary directory, started with pg_ctl on a free port, and stopped
# by its PID at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

pgbin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
if [ -z "$(pgbin)" ]; then
	SUDO=""
	if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
bin=$(pgbin)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
dir=$(mktemp -d)
as=()
if [ "$(id -u)" = 0 ]; then
	# PostgreSQL refuses to run as root: the package's own user runs it.
	chown postgres "$dir"
	as=(runuser -u postgres --)
fi
"${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U retrystack --no-sync >/dev/null
# fsync off: the tests kill the service in front of the database, never
# the database.
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
	-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >/dev/null
pid=$(head -1 "$dir/data/postmaster.pid")
stop() {
	kill -INT "$pid" 2>/dev/null || true # fast shutdown
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	rm -rf "$dir"
}
trap stop EXIT

cd stores/postgres
go mod tidy -diff
go vet ./...
PG_URL="postgres://retrystack@127.0.0.1:$port/postgres" PG_REQUIRED=1 go test -race -count=1 ./...
