//! Integration tests for baton-executor, one binary.
//!
//! They start real processes, but only tiny `sh -c` scripts and coreutils;
//! agent behaviour is tested against the fake agent in `baton-test-support`.

#![expect(
    clippy::print_stderr,
    reason = "tests report measured figures (kill latencies, peak memory) on stderr"
)]

mod fuzz_corpus;
mod process;
mod profile;
mod shell;
mod support;
