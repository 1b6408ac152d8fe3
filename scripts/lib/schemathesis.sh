# shellcheck shell=bash
# Schemathesis, for the contract tests of `baton serve`'s JSON API against
# its OpenAPI document (crates/cli/tests/cli/contract.rs). Source it, then
# call `install_schemathesis`: it installs the pinned version
# (scripts/schemathesis.txt) from PyPI into a virtual environment in a cache
# directory keyed by that file and the Python version
# (BATON_SCHEMATHESIS_CACHE, default ~/.cache/baton/schemathesis), reuses an
# earlier install of the same key, and exports BATON_TEST_SCHEMATHESIS (the
# path of its `st` program).
#
# Without python3 and its venv module, or when PyPI cannot be reached, it
# says so and leaves BATON_TEST_SCHEMATHESIS unset: `scripts/test` then
# lists `schemathesis` in BATON_TEST_SKIP outside CI, and under CI=true the
# contract tests fail.
#
# Messages use the caller's `step` and `note` when it defines them.

declare -F step >/dev/null || step() { printf '\n==> %s\n' "$*" >&2; }
declare -F note >/dev/null || note() { printf '    %s\n' "$*" >&2; }

install_schemathesis() {
  local list=scripts/schemathesis.txt key dir
  if ! command -v python3 >/dev/null 2>&1; then
    note "python3 is not installed: the API contract tests cannot run"
    return 0
  fi
  key=$(cat "$list" <(python3 --version 2>&1) | sha256sum | cut -c1-16)
  dir=${BATON_SCHEMATHESIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/schemathesis}/$key
  if [ ! -f "$dir/installed" ]; then
    step "installing schemathesis into $dir (pip)"
    rm -rf "$dir"
    if ! python3 -m venv "$dir" >&2; then
      note "python3 -m venv failed (Debian: apt-get install python3-venv): the API contract tests cannot run"
      rm -rf "$dir"
      return 0
    fi
    if ! "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$list" >&2; then
      note "pip could not install schemathesis: the API contract tests cannot run"
      rm -rf "$dir"
      return 0
    fi
    if ! "$dir/bin/st" --version >/dev/null 2>&1; then
      note "the installed schemathesis does not run (\`st --version\` failed): the API contract tests cannot run"
      rm -rf "$dir"
      return 0
    fi
    cp "$list" "$dir/installed"
  fi
  export BATON_TEST_SCHEMATHESIS=$dir/bin/st
  note "schemathesis: $("$dir/bin/st" --version 2>/dev/null)"
}
