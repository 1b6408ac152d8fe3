# shellcheck shell=bash
# A real browser for the browser tests of `baton serve` (crates/cli/tests/
# browser/). Source it, then call `install_chromium`: it finds Debian's
# Chromium (`/usr/bin/chromium`, or `chromium` on PATH), installing it with
# apt-get when running as root and it is missing, and installs the pinned
# playwright-core (only the driver: the full `playwright` package would
# download browsers of its own) with npm into a cache directory keyed by
# its version (BATON_PLAYWRIGHT_CACHE, default ~/.cache/baton/playwright),
# reusing an earlier install of the same version.
#
# It exports BATON_TEST_CHROMIUM (the browser's path) and
# BATON_TEST_PLAYWRIGHT (the node_modules directory holding
# playwright-core). When it cannot provide one of them it says why and
# leaves both unset: `scripts/test` then lists `browser` in BATON_TEST_SKIP
# outside CI, and under CI=true those tests fail.
#
# Messages use the caller's `step` and `note` when it defines them.

declare -F step >/dev/null || step() { printf '\n==> %s\n' "$*" >&2; }
declare -F note >/dev/null || note() { printf '    %s\n' "$*" >&2; }

playwright_core_version=1.65.2

# The path of an installed Chromium, empty when there is none.
find_chromium() {
  if [ -x /usr/bin/chromium ]; then
    printf '%s' /usr/bin/chromium
    return
  fi
  command -v chromium 2>/dev/null || true
}

# Prints the node_modules directory holding the pinned playwright-core,
# installing it when missing; fails (after saying why) when it cannot.
install_playwright_core() {
  local key dir
  key=$(printf '%s\n' "playwright-core@$playwright_core_version" "node $(node --version 2>/dev/null)" |
    sha256sum | cut -c1-16)
  dir=${BATON_PLAYWRIGHT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/playwright}/$key
  if [ ! -f "$dir/installed" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      note "npm is not installed: the browser tests cannot run (install Node.js and npm)"
      return 1
    fi
    step "installing playwright-core $playwright_core_version into $dir (npm)"
    rm -rf "$dir"
    mkdir -p "$dir"
    if ! npm install --prefix "$dir" --no-audit --no-fund --no-save --ignore-scripts \
      --loglevel=error "playwright-core@$playwright_core_version" >&2; then
      note "npm could not install playwright-core: the browser tests cannot run"
      rm -rf "$dir"
      return 1
    fi
    if ! (cd "$dir" && node -e 'require("playwright-core").chromium') >/dev/null 2>&1; then
      note "the installed playwright-core does not load in node: the browser tests cannot run"
      rm -rf "$dir"
      return 1
    fi
    printf '%s\n' "$playwright_core_version" >"$dir/installed"
  fi
  printf '%s' "$dir/node_modules"
}

install_chromium() {
  local chromium modules
  chromium=$(find_chromium)
  if [ -z "$chromium" ]; then
    if [ "$(id -u)" != 0 ]; then
      note "Chromium is not installed: the browser tests cannot run (install Debian's chromium package)"
      return 0
    fi
    step "installing chromium (apt-get)"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2; }; then
      note "apt-get could not install chromium: the browser tests cannot run"
      return 0
    fi
    chromium=$(find_chromium)
    if [ -z "$chromium" ]; then
      note "chromium installed, but no chromium found: the browser tests cannot run"
      return 0
    fi
  fi
  if ! "$chromium" --version >/dev/null 2>&1; then
    note "$chromium does not run (\`chromium --version\` failed): the browser tests cannot run"
    return 0
  fi
  modules=$(install_playwright_core) || return 0
  export BATON_TEST_CHROMIUM=$chromium
  export BATON_TEST_PLAYWRIGHT=$modules
  note "browser: $("$chromium" --version 2>/dev/null), playwright-core $playwright_core_version"
}
