#!/usr/bin/env bash
# The dashboard's browser test (tests/runtime/test_dashboard_browser.py) drives Debian's chromium through
# Selenium with Debian's chromedriver: nothing is downloaded at test time. `make test` runs this; it installs
# both with apt when running as root and they are missing, and otherwise says that the test will be skipped.
set -uo pipefail
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's chromium and chromium-driver (the dashboard's browser test)"
    (apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; }) \
        || say "apt-get could not install chromium: the dashboard's browser test will be skipped"
else
    say "no chromium/chromedriver and no root apt-get: the dashboard's browser test will be skipped" \
        "(install chromium and chromium-driver to run it)"
fi
