//! The check the `placeholders` fuzz target runs on [`shell::substitute`]
//! (`fuzz/`), kept here so that the corpus is replayed by an ordinary test
//! on the stable toolchain (`tests/executor/fuzz_corpus.rs`).
//!
//! The property that matters is that a value never becomes shell code.
//! Values reach the script as variable references, except where
//! [`shell::substitute`] judges that bash reads them as text (a quoted
//! heredoc) or as an integer (arithmetic). The first kind is where a wrong
//! judgement would run a value, and bash itself can tell without running
//! anything: a value inlined as code can break the script's syntax, text
//! in a real heredoc cannot. So when a value was inlined, the script is
//! rendered once with a harmless value and once with one that breaks any
//! code it lands in, and `bash -n` (parse only, nothing runs) must accept
//! the second whenever it accepts the first. Bash starts only for scripts
//! that inline a value, which keeps the check cheap; the proptest in
//! `tests/executor/shell.rs` runs bash on values in every context.

use std::process::{Command, Stdio};

use crate::shell::{self, Substituted};

/// A value the fuzzer did not choose: quotes, a command substitution, a
/// newline.
const DEFAULT_VALUE: &str = "a'b \"$(touch canary)\" `c`\nd";

/// A value that is harmless wherever bash reads it.
const HARMLESS: &str = "n n";

/// A value that leaves unbalanced quotes and a command substitution open
/// wherever bash reads it as code, and is no heredoc delimiter (it has
/// quotes) and no integer.
const BREAKER: &str = "'\"`$(";

/// Splits the input at its first `0xFF` byte (never part of UTF-8) into
/// the script and the value of every placeholder; without one, the value is
/// [`DEFAULT_VALUE`].
pub fn placeholders(data: &[u8]) {
    let (script, value) = match data.iter().position(|byte| *byte == 0xFF) {
        Some(at) => (
            &data[..at],
            String::from_utf8_lossy(&data[at + 1..]).into_owned(),
        ),
        None => (data, DEFAULT_VALUE.to_owned()),
    };
    let script = String::from_utf8_lossy(script);
    check_substituted(&script, &value);
    check_inlined_values_are_text(&script);
}

/// Every `{name}` is known unless the name holds a space, so that unknown
/// placeholders are exercised too.
fn known(name: &str) -> bool {
    !name.contains(' ')
}

fn substitute(script: &str, value: &str) -> Result<Substituted, String> {
    shell::substitute(script, |name| known(name).then_some(value))
}

/// A refusal names a placeholder of the script and has a reason the value
/// gives; a result sets one well-named variable per name, each holding the
/// value and referred to by the script.
fn check_substituted(script: &str, value: &str) {
    match substitute(script, value) {
        Err(message) => {
            let name = message
                .strip_prefix("`{")
                .and_then(|rest| rest.split_once("}`"))
                .map(|(name, _)| name)
                .unwrap_or_else(|| panic!("a refusal that names no placeholder: {message}"));
            assert!(
                script.contains(&format!("{{{name}}}")),
                "refused {name}, which the script does not hold"
            );
            let integer = {
                let digits = value.strip_prefix('-').unwrap_or(value);
                !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit())
            };
            // After a heredoc baton cannot read, every value is refused,
            // whatever it holds: the refusal is for the script's shape.
            let after_unclear_heredoc = message.contains("comes after a heredoc");
            assert!(
                value.contains('\0') || !integer || after_unclear_heredoc,
                "refused the integer {value:?}: {message}"
            );
        }
        Ok(substituted) => {
            for (position, (variable, held)) in substituted.env.iter().enumerate() {
                let suffix = variable
                    .strip_prefix("BATON_P_")
                    .unwrap_or_else(|| panic!("variable {variable} is not a BATON_P_ one"));
                assert!(
                    suffix
                        .bytes()
                        .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_'),
                    "variable {variable:?} is no shell name"
                );
                assert_eq!(held, value, "{variable} holds another value");
                assert!(
                    substituted.env[..position]
                        .iter()
                        .all(|(earlier, _)| earlier != variable),
                    "{variable} set twice"
                );
                assert!(
                    substituted.script.contains(&format!("${{{variable}}}")),
                    "{variable} is set but the script never refers to it"
                );
            }
            if !script.contains('{') {
                assert_eq!(
                    substituted.script, script,
                    "a script without placeholders changed"
                );
            }
        }
    }
}

/// Where a value was inlined, it is text to bash: a value that breaks code
/// breaks nothing (see the module docs).
fn check_inlined_values_are_text(script: &str) {
    let (Ok(harmless), Ok(breaker)) = (substitute(script, HARMLESS), substitute(script, BREAKER))
    else {
        return;
    };
    if harmless.script == breaker.script || script.contains('\0') {
        return;
    }
    if parses(&harmless.script) {
        assert!(
            parses(&breaker.script),
            "a value was inlined where bash reads it as code:\n{}",
            breaker.script
        );
    }
}

/// Whether `bash -n` (read the script, run nothing) accepts the script.
fn parses(script: &str) -> bool {
    #[expect(
        clippy::disallowed_methods,
        reason = "bash only parses the script (-n); nothing in it runs"
    )]
    let status = Command::new("bash")
        .args(["--norc", "--noprofile", "-n", "-c", script])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|error| panic!("cannot start bash to parse a script: {error}"));
    status.success()
}
