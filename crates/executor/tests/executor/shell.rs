//! `shell`: the direct-exec decision and quoting that survives bash.

use std::path::Path;
use std::process::Command;

use baton_executor::shell::{command_for_script, quote, substitute};
use proptest::prelude::*;

fn direct(script: &str, argv: &[&str]) {
    let (program, args) = command_for_script(script);
    let mut actual = vec![program];
    actual.extend(args);
    assert_eq!(actual, argv, "script: {script:?}");
}

fn bash(script: &str) {
    let (program, args) = command_for_script(script);
    assert_eq!(program, "bash", "script: {script:?}");
    assert_eq!(args, ["-euo", "pipefail", "-c", script]);
}

#[test]
fn simple_commands_are_executed_directly() {
    direct("cargo test --workspace", &["cargo", "test", "--workspace"]);
    direct("cargo test\n", &["cargo", "test"]);
    direct("  make   -j2  all ", &["make", "-j2", "all"]);
    direct(
        "./scripts/build.sh --out=dist/a,b +x @y 50%",
        &["./scripts/build.sh", "--out=dist/a,b", "+x", "@y", "50%"],
    );
    direct("true", &["true"]);
    direct("false", &["false"]);
    direct(
        "python3 -m pytest -q tests/unit:part",
        &["python3", "-m", "pytest", "-q", "tests/unit:part"],
    );
}

#[test]
fn shell_syntax_builtins_and_assignments_need_bash() {
    for script in [
        "",
        " ",
        "\n",
        "echo hi",
        "cd src",
        "exit 1",
        "test -f x",
        "[ -f x ]",
        "export A=1",
        "source env.sh",
        ". env.sh",
        "if",
        "A=1 make",
        "make; make install",
        "make && make install",
        "make | tee log",
        "make > log",
        "make < in",
        "make &",
        "ls *.rs",
        "ls file?",
        "ls [ab]",
        "echo $HOME",
        "echo 'quoted'",
        "echo \"quoted\"",
        "cat ~/x",
        "make\nmake install",
        "make\n\n",
        "make\tall",
        "cmd # comment",
        "echo {a,b}",
        "cmd \\x",
        "cmd `x`",
        "cmd !x",
    ] {
        bash(script);
    }
}

#[test]
fn quote_round_trips_through_bash() {
    for value in ["", "plain", "it's", "a b", "'", "''", "$(x)", "\n", "\\"] {
        assert_eq!(
            run_bash(&format!("printf %s {}", quote(value)), Path::new("/")),
            value
        );
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test checks what bash makes of the quoting"
)]
fn run_bash(script: &str, cwd: &Path) -> String {
    let output = Command::new("bash")
        .args(["-c", script])
        .current_dir(cwd)
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "bash failed: {script}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("bash prints the UTF-8 it was given")
}

/// One bash invocation prints the value from every context, separated by
/// NUL bytes (which a value cannot contain).
///
/// The last context's backticks are the script's own and unquoted: bash
/// splits and globs what they print, as it would any command's output
/// there. `set -f` turns the globbing off, so that a value such as `/*`,
/// printed intact by the inner `printf`, is not compared as the list of
/// `/`; no other expansion in the script is unquoted.
const CONTEXTS: &str = concat!(
    "set -f\n",
    "printf %s {v}; printf '\\0'\n",
    "printf %s \"{v}\"; printf '\\0'\n",
    "printf %s '{v}'; printf '\\0'\n",
    "printf %s \"pre {v} post\"; printf '\\0'\n",
    "printf %s 'pre {v} post'; printf '\\0'\n",
    "printf %s \"$(printf %s {v})\"; printf '\\0'\n",
    "printf %s $'{v}'; printf '\\0'\n",
    "cat <<EOF\n{v}\nEOF\nprintf '\\0'\n",
    "cat <<'EOF'\n{v}\nEOF\nprintf '\\0'\n",
    "printf %s `printf %s {v}`; printf '\\0'\n",
);

fn hostile_value() -> impl Strategy<Value = String> {
    let pieces = prop::collection::vec(
        prop_oneof![
            Just("'"),
            Just("\""),
            Just("$("),
            Just(")"),
            Just("`"),
            Just("\n"),
            Just(";"),
            Just("\\"),
            Just("$"),
            Just("${X}"),
            Just("{"),
            Just("}"),
            Just("{v}"),
            Just(" "),
            Just("\t"),
            Just("a"),
            Just("*"),
            Just("EOF"),
            Just("#"),
            Just("'\\''"),
            Just("$(touch canary)"),
            Just("`touch canary`"),
            Just("-n"),
            Just("é"),
        ],
        0..16,
    )
    .prop_map(|pieces| pieces.concat());
    prop_oneof![pieces, "[^\u{0}]{0,24}"]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn substituted_values_reach_printf_intact(value in hostile_value()) {
        let dir = tempfile::tempdir().expect("temp dir");
        let script = substitute(CONTEXTS, |name| (name == "v").then_some(value.as_str()));
        let printed = run_bash(&script, dir.path());
        let fields: Vec<&str> = printed.split('\0').collect();
        prop_assert_eq!(fields.len(), 11, "script:\n{}", script);
        let ends_heredoc = value.split('\n').any(|line| line == "EOF");
        let trimmed = value.trim_end_matches('\n');
        prop_assert_eq!(fields[0], value.as_str(), "bare");
        prop_assert_eq!(fields[1], value.as_str(), "double quotes");
        prop_assert_eq!(fields[2], value.as_str(), "single quotes");
        prop_assert_eq!(fields[3], format!("pre {value} post"), "inside double-quoted text");
        prop_assert_eq!(fields[4], format!("pre {value} post"), "inside single-quoted text");
        prop_assert_eq!(fields[5], trimmed, "command substitution in double quotes");
        prop_assert_eq!(fields[6], value.as_str(), "$'…'");
        if !ends_heredoc {
            prop_assert_eq!(fields[7], format!("{value}\n"), "heredoc");
            prop_assert_eq!(fields[8], format!("{value}\n"), "quoted heredoc");
        }
        // Unquoted backticks split words; printf %s joins them, so compare
        // without whitespace.
        let squeeze = |text: &str| text.split_whitespace().collect::<String>();
        prop_assert_eq!(squeeze(fields[9]), squeeze(&value), "backticks");
        prop_assert!(!dir.path().join("canary").exists(), "a payload ran");
    }
}
