# shellcheck shell=bash
# The pinned agent CLIs (scripts/agent-clis.txt) for the real-agent tests.
# Source it, then call `install_agent_clis`: it installs them with npm into
# a cache directory keyed by the pinned list (BATON_AGENT_CLI_CACHE, default
# ~/.cache/baton/agent-clis), reuses an earlier install of the same list,
# and exports BATON_TEST_AGENT_CLIS (the directory holding the programs).
#
# Without npm, or when the registry cannot be reached, it says so and leaves
# BATON_TEST_AGENT_CLIS unset: `scripts/test` then lists them in
# BATON_TEST_SKIP outside CI, and under CI=true they fail.

declare -F step >/dev/null || step() { printf '\n==> %s\n' "$*" >&2; }
declare -F note >/dev/null || note() { printf '    %s\n' "$*" >&2; }

install_agent_clis() {
  local list=scripts/agent-clis.txt packages key dir
  mapfile -t packages < <(grep -v '^[[:space:]]*\(#\|$\)' "$list")
  key=$(printf '%s\n' "${packages[@]}" "node $(node --version 2>/dev/null)" layout-2 | sha256sum | cut -c1-16)
  dir=${BATON_AGENT_CLI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/agent-clis}/$key
  if [ ! -f "$dir/installed" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      note "npm is not installed: the real-agent tests cannot run (install Node.js and npm)"
      return 0
    fi
    step "installing the agent CLIs into $dir (npm)"
    rm -rf "$dir"
    mkdir -p "$dir"
    # Install scripts must run: Claude Code's and opencode's put their
    # native binary in place.
    if ! npm install --prefix "$dir" --no-audit --no-fund --no-save \
      --loglevel=error "${packages[@]}" >&2; then
      note "npm could not install the agent CLIs: the real-agent tests cannot run"
      rm -rf "$dir"
      return 0
    fi
    local cli
    for cli in claude codex gemini opencode; do
      if ! "$dir/node_modules/.bin/$cli" --version >/dev/null 2>&1; then
        note "the installed $cli does not run (\`$cli --version\` failed): the real-agent tests cannot run"
        rm -rf "$dir"
        return 0
      fi
    done
    printf '%s\n' "${packages[@]}" >"$dir/installed"
  fi
  export BATON_TEST_AGENT_CLIS=$dir/node_modules/.bin
  note "agent CLIs: $(printf '%s ' "${packages[@]}")"
}
