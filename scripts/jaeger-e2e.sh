#!/usr/bin/env bash
# End-to-end telemetry check against a real Jaeger: build Jaeger once from
# the tools module (cached outside the repo), start it on 127.0.0.1, export
# chosen lab scenarios over OTLP/HTTP, check the traces Jaeger stored
# (go test -tags jaeger ./telemetry), and stop Jaeger. With TRACE_PICTURE
# set, also redraw docs/img/retry-trace.svg from a trace Jaeger stored.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${RETRYSTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/retrystack}"
jaeger="$cache/jaeger-v1.76.0"
if [ ! -x "$jaeger" ]; then
	echo "== building Jaeger into $jaeger (about 10 minutes cold on 2 cores)"
	mkdir -p "$cache"
	(cd tools && go build -o "$jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
	mv "$jaeger.tmp" "$jaeger"
fi

log="$(mktemp)"
JAEGER_LISTEN_HOST=127.0.0.1 "$jaeger" \
	--set extensions.jaeger_query.http.endpoint=127.0.0.1:16686 \
	--set extensions.jaeger_query.grpc.endpoint=127.0.0.1:16685 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT

ready() { (echo >/dev/tcp/127.0.0.1/4318) 2>/dev/null && (echo >/dev/tcp/127.0.0.1/16686) 2>/dev/null; }
for _ in $(seq 100); do
	ready && break
	kill -0 "$pid" 2>/dev/null || { echo "jaeger exited:"; cat "$log"; exit 1; }
	sleep 0.1
done
ready || { echo "jaeger not ready:"; cat "$log"; exit 1; }

scenarios='^(seed004/503-503-200|seed003/naive-post-orders|seed003/naive-login-then-me|seed000/forhost-localhost-get-127)$'
echo "== lab -> OTLP"
go run -tags otlp ./cmd/retrylab -otlp http://127.0.0.1:4318 -run "$scenarios"
echo "== traces in Jaeger"
JAEGER_QUERY=http://127.0.0.1:16686 JAEGER_OTLP=http://127.0.0.1:4318 go test -count=1 -tags jaeger -run 'TestJaeger' ./telemetry/
if [ -n "${TRACE_PICTURE:-}" ]; then
	echo "== docs/img/retry-trace.svg from the trace Jaeger stored"
	go run ./cmd/charts waterfall http://127.0.0.1:16686 seed004/503-503-200 > docs/img/retry-trace.svg
fi
