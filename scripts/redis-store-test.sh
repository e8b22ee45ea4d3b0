#!/usr/bin/env bash
# Runs the Redis module's tests (the idempotency store's conformance, the
# Fleet's shared budget and holds) against a real redis-server on
# 127.0.0.1: Debian's package, installed when missing, started here on a
# free port with nothing persisted, stopped at the end. The tests that kill
# and restart a Redis start their own (REDIS_REQUIRED: never skipped).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-redis.sh

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
	--daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.1
done

cd stores/redis
go mod tidy -diff
go vet ./...
REDIS_ADDR="127.0.0.1:$port" REDIS_REQUIRED=1 go test -race -count=1 ./...
