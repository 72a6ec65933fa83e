#!/usr/bin/env bash
# The browser of the serving page's test (tests/serving): Debian's chromium and chromium-driver, installed
# with apt-get where they are missing. Elsewhere set CHROMIUM and CHROMEDRIVER to a Chromium and its
# ChromeDriver of the same version, and skip this script.
set -euo pipefail
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
if [ -x "$CHROMIUM" ] && [ -x "$CHROMEDRIVER" ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
if ! command -v apt-get >/dev/null || { [ -n "$sudo" ] && ! command -v sudo >/dev/null; }; then
  echo "browser: error: no $CHROMIUM or $CHROMEDRIVER, and no apt-get to install Debian's chromium chromium-driver; set CHROMIUM and CHROMEDRIVER" >&2
  exit 1
fi
echo "browser: installing Debian's chromium and chromium-driver (the serving page's test)"
$sudo apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null ||
  { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null; }
