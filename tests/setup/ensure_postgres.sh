#!/usr/bin/env bash
# Make Debian's PostgreSQL server binaries (initdb, pg_ctl) available for the scale-out tests.
# Idempotent: does nothing when /usr/lib/postgresql/<version>/bin/initdb exists.
# The tests run their own throwaway cluster on 127.0.0.1 (guidebench.search.services); this script never
# starts a server, and tells the package not to create (and start) its default cluster either.
# Prints the bin folder on its last line.
set -euo pipefail

find_bin() {
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$found" ] && [ -x "$found/initdb" ] && [ -x "$found/pg_ctl" ]; then
    echo "$found"
    return 0
  fi
  return 1
}

if bin="$(find_bin)"; then
  echo "$bin"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_postgres: PostgreSQL is missing and apt-get is not available" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
  else
    echo "ensure_postgres: PostgreSQL is missing and installing it needs root" >&2
    exit 1
  fi
fi

# Concurrent test sessions may both get here: one apt run at a time.
# Shared by every test session on this machine (each has a temp folder of its own), so it is not in TMPDIR.
LOCKS="${XDG_CACHE_HOME:-$HOME/.cache}/guidebench/locks"
mkdir -p "$LOCKS"
LOCK="$LOCKS/ensure-postgres.lock"
exec 9>"$LOCK"
flock 9 2>/dev/null || true
if bin="$(find_bin)"; then
  echo "$bin"
  exit 0
fi

# No default cluster on port 5432: nothing would stop it when the tests end.
$SUDO mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.d/guidebench.conf >/dev/null

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2
$SUDO apt-get install -y -q --no-install-recommends postgresql >&2

bin="$(find_bin)" || { echo "ensure_postgres: initdb still missing after apt-get install" >&2; exit 1; }
echo "$bin"
