#!/usr/bin/env bash
# The i18n tests re-extract the marked strings with GNU gettext's xgettext (and scripts/i18n compiles with msgfmt).
set -eu
if command -v xgettext >/dev/null && command -v msgfmt >/dev/null; then
  exit 0
fi
echo "Installing Debian's gettext for the translation tests (apt-get)"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends gettext >/dev/null
xgettext --version | head -1
