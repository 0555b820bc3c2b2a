#!/usr/bin/env bash
# Runs the Go client's tests offline (tests/clients/run.sh lib-go sets the
# LP_* addresses): redigo from Debian's golang-github-gomodule-redigo-dev
# through go.mod's replace, no module proxy, the build cache in CACHE_DIR.
set -euo pipefail
cache=${1:-${TMPDIR:-/tmp}/lockproxy-go-cache}
cd "$(dirname "${BASH_SOURCE[0]}")"
mkdir -p "$cache"
export GOFLAGS=-mod=mod GOPROXY=off GOCACHE=$cache/build GOPATH=$cache/gopath
go version
go vet ./...
exec go test -race -count=1 -timeout 60s -v ./...
