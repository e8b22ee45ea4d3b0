#!/usr/bin/env bash
# Moves the test and lab tools out of the library's machinery in internal/
# into a folder of their own, internal/testkit/, and rewrites every import
# path and every mention in the repository (all modules, docs, scripts):
#
#   internal/{faultserver,rttest,crashtest,overload,storebench,presets,otlp}
#     -> internal/testkit/{...}
#
# internal/ then keeps the library's own machinery (events, inbound,
# operation, protocol, storekit, wire), which imports no layer, and
# internal/testkit/ the tools that import the layers they test.
#
# Idempotent: a package already moved is skipped, and a path already
# rewritten no longer matches. Run from anywhere in the repository, on a
# clean tree, then check every module:
#
#   scripts/move-test-tools.sh
#   for m in . bench integration stores/redis stores/postgres; do (cd $m && go build ./... && go vet ./...); done
#
# docs/api-changes.md is left as it is: its rows are history.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

tools=(faultserver rttest crashtest overload storebench presets otlp)
mkdir -p internal/testkit
for t in "${tools[@]}"; do
	if [ -d "internal/$t" ] && [ ! -e "internal/testkit/$t" ]; then
		git mv "internal/$t" "internal/testkit/$t"
		echo "moved internal/$t -> internal/testkit/$t"
	fi
done

# Every tracked file that names a tool at its old path: Go sources (import
# paths), docs, scripts, CI. "internal/testkit/x" does not contain
# "internal/x", so a second run finds nothing to change.
alt=$(IFS='|'; echo "${tools[*]}")
pattern="internal/($alt)\\b"
mapfile -t files < <(git grep -lE "$pattern" -- . ':!docs/api-changes.md' || true)
for f in "${files[@]}"; do
	sed -i -E "s#internal/($alt)\\b#internal/testkit/\\1#g" "$f"
	echo "rewrote $f"
done

# The import blocks of the rewritten Go files sort again.
gofiles=()
for f in "${files[@]}"; do
	case "$f" in *.go) gofiles+=("$f") ;; esac
done
if [ "${#gofiles[@]}" -gt 0 ]; then
	gofmt -w "${gofiles[@]}"
fi

# docs/architecture.md's layout paragraph, which describes the layout
# before and after the move.
sed -i 's#until `scripts/move-test-tools.sh` moves them to `internal/testkit/`, they sit beside it in `internal/`#they sit in a folder of their own, `internal/testkit/`#' docs/architecture.md
