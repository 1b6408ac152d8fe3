# shellcheck shell=bash
# The cargo-fuzz targets (fuzz/), for scripts/test and scripts/soak. Source
# it, then call `run_fuzz_targets SECONDS`: it builds every target once
# (nightly Rust, release with debug assertions and AddressSanitizer), then
# fuzzes each for SECONDS on one core and prints its executions.
#
# cargo-fuzz is installed with `cargo install` into a cache directory
# (BATON_CARGO_FUZZ_CACHE, default ~/.cache/baton/cargo-fuzz) when no
# `cargo fuzz` is on PATH. Without nightly Rust, or when the install fails,
# the fuzzing is skipped with a note, and fails the run under CI=true.
#
# Each target starts from its committed seeds (fuzz/corpus/<target>) and a
# working corpus kept beside the build (<target dir>/fuzz-corpus/<target>),
# where libFuzzer writes what it finds, so the committed corpus stays
# small. A crash, timeout or leak stops the run; libFuzzer saves the input
# under fuzz/artifacts/<target>/ (fuzz/README.md says what to do next).

declare -F step >/dev/null || step() { printf '\n==> %s\n' "$*" >&2; }
declare -F note >/dev/null || note() { printf '    %s\n' "$*" >&2; }

fuzz_targets=(load compile placeholders verdict prompt)
cargo_fuzz_version=0.13.2

# Says why fuzzing cannot run: fails under CI, skips loudly elsewhere.
fuzz_unavailable() {
  if [ "${CI:-}" = "true" ]; then
    note "error: $1; CI must run the fuzz targets"
    exit 1
  fi
  note "SKIPPED the fuzz targets: $1"
  return 1
}

# Puts a `cargo fuzz` on PATH, installing it when missing.
ensure_cargo_fuzz() {
  if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    fuzz_unavailable "nightly Rust is not installed (rustup toolchain install nightly)"
    return 1
  fi
  if cargo fuzz --version >/dev/null 2>&1; then
    return 0
  fi
  local root=${BATON_CARGO_FUZZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/cargo-fuzz}
  if [ ! -x "$root/bin/cargo-fuzz" ]; then
    step "installing cargo-fuzz $cargo_fuzz_version into $root"
    if ! cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked --root "$root" >&2; then
      fuzz_unavailable "cargo-fuzz could not be installed"
      return 1
    fi
  fi
  export PATH="$root/bin:$PATH"
}

# run_fuzz_targets SECONDS: fuzz every target for SECONDS.
run_fuzz_targets() {
  local seconds=$1 target log execs summary=()
  ensure_cargo_fuzz || return 0
  # cargo-fuzz has no --locked: check the committed lock file first.
  if ! cargo +nightly metadata --locked --format-version 1 \
    --manifest-path fuzz/Cargo.toml >/dev/null; then
    note "fuzz/Cargo.lock is out of date: run \`cargo +nightly update --workspace --manifest-path fuzz/Cargo.toml\` and commit it"
    exit 1
  fi
  step "building the fuzz targets (nightly, release, AddressSanitizer)"
  local start=$SECONDS
  cargo +nightly fuzz build -O
  note "built in $((SECONDS - start)) s"
  local dir=${CARGO_TARGET_DIR:-fuzz/target}
  for target in "${fuzz_targets[@]}"; do
    step "fuzzing $target for $seconds s"
    mkdir -p "$dir/fuzz-corpus/$target"
    log="$dir/fuzz-corpus/$target.log"
    # -timeout: one input taking 10 s is a hang (a 4 KiB input normally
    # takes well under a millisecond); stderr is libFuzzer's report.
    if ! cargo +nightly fuzz run -O "$target" "$dir/fuzz-corpus/$target" "fuzz/corpus/$target" -- \
      -max_total_time="$seconds" -timeout=10 -print_final_stats=1 2>"$log"; then
      tail -n 40 "$log" >&2
      note "fuzz target $target failed: the input is under fuzz/artifacts/$target/ (fuzz/README.md)"
      exit 1
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    summary+=("$target: ${execs:-?} execs in $seconds s")
  done
  step "fuzz targets: no crash, hang or leak"
  for line in "${summary[@]}"; do note "$line"; done
}
