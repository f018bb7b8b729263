#!/usr/bin/env bash
# The browser tests drive Debian's Chromium at /usr/bin/chromium (never a downloaded browser).
set -eu
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
echo "Installing Debian's chromium for the browser tests (apt-get)"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-noto-cjk >/dev/null
/usr/bin/chromium --version
