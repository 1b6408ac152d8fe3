//! `run_bounded` returns a finished command's output and turns a hang into
//! a failure that names it.

use std::path::Path;
use std::time::Duration;

use baton_test_support::run_bounded;

#[test]
fn a_finished_command_is_captured() {
    let run = run_bounded(
        Path::new("/bin/sh"),
        Path::new("/"),
        &["-c", "echo out; echo err >&2; exit 3"],
        Duration::from_secs(20),
    );
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (3, "out\n", "err\n")
    );
}

#[test]
#[should_panic(expected = "ran longer than 200ms; killed. Its stderr ended with:\nstarted")]
fn a_hung_command_fails_with_what_it_printed() {
    run_bounded(
        Path::new("/bin/sh"),
        Path::new("/"),
        &["-c", "echo started >&2; exec sleep 30"],
        Duration::from_millis(200),
    );
}
