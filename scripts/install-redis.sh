#!/usr/bin/env bash
# Installs Debian's redis-server when it is missing: the Redis store's
# tests and the bench module's fleet command start their own on 127.0.0.1.
set -euo pipefail
if ! command -v redis-server >/dev/null; then
	SUDO=""
	if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
