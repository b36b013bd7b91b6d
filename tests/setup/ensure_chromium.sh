#!/usr/bin/env bash
# Make Debian's headless-capable `chromium` available for the browser tests.
# Idempotent: does nothing when a chromium binary is already on PATH.
# Prints the path of the binary on its last line.
set -euo pipefail

find_chromium() {
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if path="$(find_chromium)"; then
  echo "$path"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_chromium: chromium is missing and apt-get is not available" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
  else
    echo "ensure_chromium: chromium is missing and installing it needs root" >&2
    exit 1
  fi
fi

# Concurrent test sessions may both get here: one apt run at a time.
# Shared by every test session on this machine (each has a temp folder of its own), so it is not in TMPDIR.
LOCKS="${XDG_CACHE_HOME:-$HOME/.cache}/guidebench/locks"
mkdir -p "$LOCKS"
LOCK="$LOCKS/ensure-chromium.lock"
exec 9>"$LOCK"
flock 9 2>/dev/null || true
if path="$(find_chromium)"; then
  echo "$path"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >&2

path="$(find_chromium)" || { echo "ensure_chromium: chromium still missing after apt-get install" >&2; exit 1; }
echo "$path"
