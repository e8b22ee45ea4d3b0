#!/usr/bin/env bash
# Runs the tests behind a real nginx (proxy_nginx_test.go, and the harness
# internal/testkit/nginxtest itself): Debian's nginx-light, installed when
# missing. The tests start nginx themselves, each on 127.0.0.1 with a
# configuration, logs and temporary files of its own, and stop it by its
# PID; this script only makes sure nginx is there, and that the package's
# own service does not keep running.
set -euo pipefail
cd "$(dirname "$0")/.."

have_nginx() { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; }
if ! have_nginx; then
	SUDO=""
	if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
	# Keep the package from starting its service (a container's
	# policy-rc.d often does this already; a machine with systemd might
	# not).
	blocked=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
		$SUDO chmod +x /usr/sbin/policy-rc.d
		blocked=1
	fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nginx-light >/dev/null
	if [ -n "$blocked" ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
	# Started all the same: stop the system nginx by the PID it wrote.
	if [ -s /run/nginx.pid ]; then
		$SUDO kill -QUIT "$(cat /run/nginx.pid)" 2>/dev/null || true
	fi
fi
export PATH="$PATH:/usr/sbin"
nginx -v

go vet ./internal/testkit/nginxtest
NGINX_REQUIRED=1 go test -race -count=1 -run '^(TestNginx.*|TestStartAndLog)$' . ./internal/testkit/nginxtest
