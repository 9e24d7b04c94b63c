#!/usr/bin/env bash
# Installs the clients tests/interop_clients/clients.rs drives, at their pinned versions:
# Debian's kcat (on Debian's librdkafka), kafka-python and its codec libraries in
# tests/clients/.venv (a venv, since pip may refuse to install into the system's Python:
# PEP 668), kafkajs from the committed package-lock.json, and the Go clients (franz-go and
# sarama, pinned by go/go.sum, from the Go module proxy) built into go/bin. Each step is
# skipped while what it installed is there and matches its pins and sources, so a second run
# costs a fraction of a second.
# Run by .ci/run, and by tests/interop_clients/clients.rs itself before its first suite, so
# `cargo test` needs no step before it.
set -euo pipefail
cd "$(dirname "$0")"

need() { command -v "$1" >/dev/null 2>&1; }
missing=()
need kcat || missing+=(kcat)
need python3 || missing+=(python3)
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
need npm || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "tests/clients/setup.sh: missing ${missing[*]}: install them with apt-get (as root)" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}" >&2
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
fi

if ! .venv/bin/python -c '' 2>/dev/null; then
  rm -rf .venv
  python3 -m venv .venv
fi
if ! cmp -s requirements.txt .venv/installed-requirements.txt; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt >&2
  cp requirements.txt .venv/installed-requirements.txt
fi
if ! cmp -s package-lock.json node_modules/installed-package-lock.json; then
  npm ci --no-audit --no-fund --loglevel=error >&2
  cp package-lock.json node_modules/installed-package-lock.json
fi
# The Go clients: rebuilt when their sources or pins change (the stamp is their checksums).
# They need the Go toolchain go/go.mod names (1.26); Debian's golang-go is older.
if ! need go || ! go version | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])'; then
  echo "tests/clients/setup.sh: the Go clients need Go 1.26 or newer on the PATH (found: $(go version 2>/dev/null || echo none))" >&2
  exit 1
fi
stamp=$(cd go && sha256sum go.mod go.sum ./*.go)
if [ ! -x go/bin/goclients ] || [ "$stamp" != "$(cat go/bin/.stamp 2>/dev/null)" ]; then
  (cd go && go build -o bin/goclients .) >&2
  printf '%s\n' "$stamp" > go/bin/.stamp
fi
