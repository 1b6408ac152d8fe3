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
fn run_bash_with(script: &str, cwd: &Path, env: &[(String, String)]) -> String {
    let output = Command::new("bash")
        .args(["-c", script])
        .current_dir(cwd)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "bash failed: {script}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("bash prints the UTF-8 it was given")
}

fn run_bash(script: &str, cwd: &Path) -> String {
    run_bash_with(script, cwd, &[])
}

/// The bash contexts a placeholder is tried in, each printing what it
/// received (or only using it), with how to compare: the value exactly,
/// with its trailing newlines trimmed (command substitution), with its
/// blanks squeezed out (unquoted expansions split words), or not at all.
/// Each line runs in one bash process, its outputs separated by NUL bytes.
#[derive(Clone, Copy)]
enum Expect {
    Exact,
    Trimmed,
    Squeezed,
    Wrapped,
    Heredoc,
    Nothing,
}

const CONTEXTS: &[(&str, &str, Expect)] = &[
    ("bare", "printf %s {v}", Expect::Exact),
    ("double quotes", "printf %s \"{v}\"", Expect::Exact),
    ("single quotes", "printf %s '{v}'", Expect::Exact),
    (
        "inside double-quoted text",
        "printf %s \"pre {v} post\"",
        Expect::Wrapped,
    ),
    (
        "inside single-quoted text",
        "printf %s 'pre {v} post'",
        Expect::Wrapped,
    ),
    (
        "command substitution",
        "printf %s \"$(printf %s {v})\"",
        Expect::Trimmed,
    ),
    ("$'…'", "printf %s $'{v}'", Expect::Exact),
    ("heredoc", "cat <<EOF\n{v}\nEOF", Expect::Heredoc),
    ("quoted heredoc", "cat <<'EOF'\n{v}\nEOF", Expect::Heredoc),
    (
        "after a heredoc whose delimiter has a space",
        "cat <<'A B'\nA B\nprintf %s {v}",
        Expect::Exact,
    ),
    (
        "after a here-string",
        "cat <<<'E' >/dev/null\nprintf %s {v}\n: E",
        Expect::Exact,
    ),
    (
        "after `<<` in a ${…} pattern",
        "x=; printf %s \"${x/<<'E'/}\"\nprintf %s {v}\n: E",
        Expect::Exact,
    ),
    ("backticks", "printf %s `printf %s {v}`", Expect::Squeezed),
    (
        "default in double quotes",
        "printf %s \"${UNSET:-{v}}\"",
        Expect::Exact,
    ),
    ("default bare", "printf %s ${UNSET:-{v}}", Expect::Squeezed),
    (
        "case arm in $(…)",
        "printf %s \"$(case a in a) printf %s '{v}';; esac)\"",
        Expect::Trimmed,
    ),
    (
        "after $((…)) in $(…)",
        "printf %s \"$(printf %s $((1+1)) >/dev/null; printf %s '{v}')\"",
        Expect::Trimmed,
    ),
    (
        "after (( … << … ))",
        "(( y = 1 << 2 )); printf %s '{v}'",
        Expect::Exact,
    ),
    (
        "apostrophe in double quotes",
        "printf %s \"it's {v}\"",
        Expect::Nothing,
    ),
    (
        "nested $(…)",
        "printf %s \"$(printf %s \"$(printf %s {v})\")\"",
        Expect::Trimmed,
    ),
    (
        "function body",
        "f() { printf %s \"{v}\"; }; f",
        Expect::Exact,
    ),
    (
        "if branch",
        "if true; then printf %s {v}; fi",
        Expect::Exact,
    ),
    ("pipeline", "printf %s {v} | cat", Expect::Exact),
    ("subshell", "(printf %s '{v}')", Expect::Exact),
    (
        "for loop",
        "for _ in 1; do printf %s \"{v}\"; done",
        Expect::Exact,
    ),
    ("assignment", "x={v}; printf %s \"$x\"", Expect::Exact),
    (
        "array",
        "arr=({v}); printf %s \"${arr[*]}\"",
        Expect::Nothing,
    ),
    ("string test", "[[ {v} == x ]] || true", Expect::Nothing),
    ("test builtin", "[ \"{v}\" = x ] || true", Expect::Nothing),
    (
        "redirection target",
        "printf %s x > \"out-{v}\" 2>/dev/null || true",
        Expect::Nothing,
    ),
];

/// The script of every context, one after another.
fn contexts_script() -> String {
    let mut script = String::from("set -f\n");
    for (_, context, _) in CONTEXTS {
        script.push_str(context);
        script.push_str("\nprintf '\\0'\n");
    }
    script
}

/// Runs every context with `value`; checks what each printed, and that no
/// payload ran (a payload touches `canary`).
fn check_contexts(value: &str) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let substituted = substitute(&contexts_script(), |name| (name == "v").then_some(value))
        .map_err(TestCaseError::fail)?;
    let printed = run_bash_with(&substituted.script, dir.path(), &substituted.env);
    let fields: Vec<&str> = printed.split('\0').collect();
    prop_assert_eq!(
        fields.len(),
        CONTEXTS.len() + 1,
        "script:\n{}",
        substituted.script
    );
    let squeeze = |text: &str| text.split_whitespace().collect::<String>();
    for ((name, _, expect), printed) in CONTEXTS.iter().zip(&fields) {
        match expect {
            Expect::Exact => prop_assert_eq!(*printed, value, "{}", name),
            Expect::Trimmed => prop_assert_eq!(*printed, value.trim_end_matches('\n'), "{}", name),
            Expect::Squeezed => prop_assert_eq!(squeeze(printed), squeeze(value), "{}", name),
            Expect::Wrapped => prop_assert_eq!(*printed, format!("pre {value} post"), "{}", name),
            Expect::Heredoc if !value.split('\n').any(|line| line == "EOF") => {
                prop_assert_eq!(*printed, format!("{value}\n"), "{}", name);
            }
            Expect::Heredoc | Expect::Nothing => {}
        }
    }
    prop_assert!(
        !dir.path().join("canary").exists(),
        "a payload ran: {:?}",
        value
    );
    Ok(())
}

/// Values built to break out of every context, and to run `touch canary`
/// when they do.
const HOSTILE: &[&str] = &[
    "$(touch canary)",
    "`touch canary`",
    "'; touch canary; '",
    "\"; touch canary; \"",
    "'\"$(touch canary)\"'",
    "\ntouch canary\n",
    "a\nEOF\ntouch canary\n",
    "x'; touch canary #",
    "$((a[$(touch canary)]))",
    "a[$(touch canary)]",
    "${X:-$(touch canary)}",
    "$'\\x27'; touch canary",
    "\\'; touch canary; \\'",
    "\\\"; touch canary; \\\"",
    ")\"; touch canary; \"(",
    "esac; touch canary; case x in x)",
    "}; touch canary; {",
    ")); touch canary; ((",
    "]; touch canary; [",
    "*",
    "-n",
    "--",
    "$HOME",
    "~",
    "{v}",
    "{{v}}",
    "$(echo $(touch canary))",
    "`echo \\`touch canary\\``",
    "\t;touch\tcanary",
    "é ü 😀 $(touch canary)",
];

#[test]
fn hostile_values_never_run_in_any_context() {
    for value in HOSTILE {
        check_contexts(value).unwrap_or_else(|error| panic!("{value:?}: {error}"));
    }
    eprintln!(
        "{} bash contexts × {} hostile values: no payload ran",
        CONTEXTS.len(),
        HOSTILE.len()
    );
}

#[test]
fn a_value_bash_would_evaluate_as_arithmetic_must_be_an_integer() {
    for script in [
        "echo $(( {v} ))",
        "echo $(( \"{v}\" ))",
        "(( x = {v} ))",
        "let x={v}",
        "[[ {v} -eq 1 ]]",
        "echo ${a[{v}]}",
        "a[{v}]=1",
        "echo ${a:{v}}",
        "echo \"${a[*]:{v}:1}\"",
        "echo ${a:\"{v}\"}",
    ] {
        for value in ["a[$(touch canary)]", "1+1", "x", ""] {
            assert!(
                substitute(script, |name| (name == "v").then_some(value)).is_err(),
                "{script} with {value:?}"
            );
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let substituted =
            substitute(script, |name| (name == "v").then_some("-7")).expect("an integer");
        let _ = run_bash_with(
            &format!(
                "a=(1 2 3 4 5 6 7 8); {} >/dev/null || true",
                substituted.script
            ),
            dir.path(),
            &substituted.env,
        );
    }
}

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
            Just("esac"),
            Just("))"),
            Just("["),
            Just("]"),
        ],
        0..16,
    )
    .prop_map(|pieces| pieces.concat());
    prop_oneof![pieces, "[^\u{0}]{0,24}"]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn substituted_values_reach_bash_intact(value in hostile_value()) {
        check_contexts(&value)?;
    }
}
