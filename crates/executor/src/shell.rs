//! Shell stages: direct exec or bash, quoting, and placeholder substitution.
//!
//! **Direct exec.** A script that is one simple command made of plain words
//! (`cargo test --workspace`) means the same with or without a shell, so
//! [`command_for_script`] splits it into an argv and baton execs it
//! directly, as make does; starting bash costs about a millisecond and a
//! process per stage. Anything with shell syntax, a shell builtin or
//! keyword as the command, or a leading `VAR=` runs under
//! `bash -euo pipefail -c`, so failures inside pipelines are not lost.
//!
//! **Substitution.** Workflow values never reach a shell raw.
//! [`substitute`] replaces each
//! known `{name}` in a script in one pass and escapes the value for the
//! quoting context the placeholder sits in, tracked by a small lexer:
//!
//! | context | example | the value becomes |
//! |---|---|---|
//! | bare | `echo {v}` | one single-quoted word ([`quote`]) |
//! | double quotes | `echo "x {v}"` | `\`, `"`, `$` and `` ` `` backslash-escaped |
//! | single quotes | `echo 'x {v}'` | each `'` written as `'\''` (close, escaped quote, reopen) |
//! | unquoted heredoc | `<<EOF … {v}` | `\`, `$` and `` ` `` backslash-escaped |
//! | quoted heredoc | `<<'EOF' … {v}` | as is |
//! | `$'…'` | `$'x {v}'` | `\` and `'` backslash-escaped |
//! | `$((…))` | `$(( {n} + 1 ))` | as is when an integer, else single-quoted |
//!
//! `$( … )`, `${ … }` and backticks are followed too (a command
//! substitution starts a fresh context; backticks add one layer of
//! backslash escaping). Placeholders in comments are left alone, because a
//! newline in a value would end the comment. A value whose heredoc line
//! would end the heredoc early is not substituted. Unknown names, `${VAR}`
//! and `{{ … }}` are copied byte for byte, and a substituted value is never
//! scanned again. Exporting values as environment variables and writing
//! `"$name"` remains the most robust form; the linter points there.

use std::collections::VecDeque;

/// The program and arguments that run `script`: the script's own words when
/// it is a single simple command without shell syntax, else
/// `bash -euo pipefail -c script`.
///
/// Plain words are made of `A-Z a-z 0-9 _ . / = : , + @ % -` and separated
/// by spaces; one trailing newline is allowed. Quotes, `$`, globs,
/// redirections, `;`, `|`, `&`, other newlines, a first word that assigns
/// (`VAR=x cmd`) or names a bash builtin or keyword all need bash.
pub fn command_for_script(script: &str) -> (String, Vec<String>) {
    if let Some(mut words) = plain_words(script) {
        let program = words.remove(0);
        return (program, words);
    }
    (
        "bash".to_owned(),
        vec![
            "-euo".to_owned(),
            "pipefail".to_owned(),
            "-c".to_owned(),
            script.to_owned(),
        ],
    )
}

/// Quotes `value` as one POSIX shell word: wrapped in single quotes, each
/// `'` written as `'\''`.
pub fn quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    quoted.push_str(&value.replace('\'', r"'\''"));
    quoted.push('\'');
    quoted
}

/// Replaces each `{name}` in `script` for which `lookup` has a value, escaped
/// for its quoting context (see the module docs). Everything else is copied
/// byte for byte.
pub fn substitute<V: AsRef<str>>(script: &str, lookup: impl Fn(&str) -> Option<V>) -> String {
    Lexer {
        script,
        bytes: script.as_bytes(),
        out: String::with_capacity(script.len() + 64),
        mark: 0,
        stack: vec![Context::Bare],
        pending_heredocs: VecDeque::new(),
        at_line_start: false,
    }
    .run(&lookup)
}

/// Bash builtins and reserved words: as a command name they need bash, even
/// where an external program of the same name exists (its behaviour can
/// differ). `true` and `false` are not here: `/usr/bin/true` and
/// `/usr/bin/false` ignore their arguments and exit 0 and 1 exactly as the
/// builtins do, and `make` runs them directly too.
const SHELL_WORDS: &[&str] = &[
    "!",
    ".",
    ":",
    "[",
    "[[",
    "]]",
    "{",
    "}",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "do",
    "done",
    "echo",
    "elif",
    "else",
    "enable",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "fc",
    "fg",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "in",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "then",
    "time",
    "times",
    "trap",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// The longest placeholder name looked up (as in `baton-workflow`'s
/// renderer); longer brace groups are text.
const MAX_NAME_LEN: usize = 128;

fn plain_words(script: &str) -> Option<Vec<String>> {
    let body = script.strip_suffix('\n').unwrap_or(script);
    let plain = |byte: u8| byte.is_ascii_alphanumeric() || b"_./=:,+@%- ".contains(&byte);
    if !body.bytes().all(plain) {
        return None;
    }
    let words: Vec<String> = body
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let first = words.first()?;
    if first.contains('=') || SHELL_WORDS.contains(&first.as_str()) {
        return None;
    }
    Some(words)
}

/// A quoting context of the lexer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Context {
    /// Unquoted shell text.
    Bare,
    /// Inside `'…'`.
    Single,
    /// Inside `"…"`.
    Double,
    /// Inside `$'…'`.
    AnsiC,
    /// Inside `$(…)`; counts unmatched `(`.
    CommandSubstitution(usize),
    /// Inside `$((…))`; counts unmatched `(`.
    Arithmetic(usize),
    /// Inside `${…}`.
    Parameter,
    /// Inside `` `…` ``.
    Backtick,
    /// A heredoc body, up to the line equal to `delimiter`.
    Heredoc(Heredoc),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Heredoc {
    delimiter: String,
    /// `<<'EOF'` or `<<"EOF"` or `<<\EOF`: the body is literal.
    quoted: bool,
    /// `<<-`: leading tabs are stripped, also before the delimiter.
    strip_tabs: bool,
}

struct Lexer<'s> {
    script: &'s str,
    bytes: &'s [u8],
    out: String,
    /// Start of the text not yet copied to `out`.
    mark: usize,
    stack: Vec<Context>,
    pending_heredocs: VecDeque<Heredoc>,
    /// Whether the position is at the start of a heredoc body line.
    at_line_start: bool,
}

impl Lexer<'_> {
    fn run<V: AsRef<str>>(mut self, lookup: &impl Fn(&str) -> Option<V>) -> String {
        let mut i = 0;
        while i < self.bytes.len() {
            i = self.step(i, lookup);
        }
        self.out.push_str(&self.script[self.mark..]);
        self.out
    }

    fn top(&self) -> &Context {
        self.stack
            .last()
            .expect("the bottom context is never popped")
    }

    /// Whether the innermost context parses shell words (quotes, comments,
    /// heredoc operators).
    fn in_code(&self) -> bool {
        match self.top() {
            Context::Bare | Context::CommandSubstitution(_) | Context::Backtick => true,
            Context::Parameter => !self.parameter_in_double_quotes(),
            _ => false,
        }
    }

    /// `${…}` inside `"…"`: single quotes there are literal.
    fn parameter_in_double_quotes(&self) -> bool {
        self.stack
            .iter()
            .rev()
            .find(|context| !matches!(context, Context::Parameter))
            .is_some_and(|context| matches!(context, Context::Double | Context::Heredoc(_)))
    }

    /// Handles the byte at `i` and returns the next position.
    fn step<V: AsRef<str>>(&mut self, i: usize, lookup: &impl Fn(&str) -> Option<V>) -> usize {
        if self.at_line_start {
            self.at_line_start = false;
            if let Some(next) = self.heredoc_end(i) {
                return next;
            }
        }
        let byte = self.bytes[i];
        let next = self.bytes.get(i + 1).copied();
        if byte == b'{' {
            return self.placeholder(i, lookup);
        }
        match self.top().clone() {
            Context::Single => {
                if byte == b'\'' {
                    self.stack.pop();
                }
                i + 1
            }
            Context::AnsiC => match byte {
                b'\\' => i + 2,
                b'\'' => {
                    self.stack.pop();
                    i + 1
                }
                _ => i + 1,
            },
            Context::Double => match byte {
                b'\\' => i + 2,
                b'"' => {
                    self.stack.pop();
                    i + 1
                }
                b'$' => self.dollar(i, next),
                b'`' => {
                    self.stack.push(Context::Backtick);
                    i + 1
                }
                _ => i + 1,
            },
            Context::Heredoc(heredoc) => {
                if heredoc.quoted {
                    if byte == b'\n' {
                        self.at_line_start = true;
                    }
                    return i + 1;
                }
                match byte {
                    b'\\' if next == Some(b'\n') => {
                        self.at_line_start = true;
                        i + 2
                    }
                    b'\\' => i + 2,
                    b'\n' => {
                        self.at_line_start = true;
                        i + 1
                    }
                    b'$' => self.dollar(i, next),
                    b'`' => {
                        self.stack.push(Context::Backtick);
                        i + 1
                    }
                    _ => i + 1,
                }
            }
            Context::Arithmetic(depth) => {
                match byte {
                    b'(' => *self.stack.last_mut().expect("top") = Context::Arithmetic(depth + 1),
                    b')' if depth == 0 => {
                        self.stack.pop();
                    }
                    b')' => *self.stack.last_mut().expect("top") = Context::Arithmetic(depth - 1),
                    _ => {}
                }
                i + 1
            }
            Context::Bare
            | Context::CommandSubstitution(_)
            | Context::Backtick
            | Context::Parameter => self.code(i, byte, next),
        }
    }

    /// A byte in a context that parses shell words.
    fn code(&mut self, i: usize, byte: u8, next: Option<u8>) -> usize {
        let literal_single_quotes = !self.in_code();
        match byte {
            b'\\' => i + 2,
            b'\'' if literal_single_quotes => i + 1,
            b'\'' => {
                self.stack.push(Context::Single);
                i + 1
            }
            b'"' => {
                self.stack.push(Context::Double);
                i + 1
            }
            b'$' => self.dollar(i, next),
            b'`' if *self.top() == Context::Backtick => {
                self.stack.pop();
                i + 1
            }
            b'`' => {
                self.stack.push(Context::Backtick);
                i + 1
            }
            b'}' if *self.top() == Context::Parameter => {
                self.stack.pop();
                i + 1
            }
            b'(' | b')' => {
                if let Context::CommandSubstitution(depth) = *self.top() {
                    match (byte, depth) {
                        (b')', 0) => {
                            self.stack.pop();
                        }
                        (b')', _) => {
                            *self.stack.last_mut().expect("top") =
                                Context::CommandSubstitution(depth - 1);
                        }
                        _ => {
                            *self.stack.last_mut().expect("top") =
                                Context::CommandSubstitution(depth + 1);
                        }
                    }
                }
                i + 1
            }
            b'#' if self.at_word_start(i) && !literal_single_quotes => {
                // A comment: skip to the end of the line, substituting
                // nothing (a newline in a value would end the comment).
                self.bytes[i..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(self.bytes.len(), |offset| i + offset)
            }
            b'<' if next == Some(b'<') && self.bytes.get(i + 2) != Some(&b'<') => {
                self.heredoc_operator(i + 2)
            }
            b'\n' => {
                if let Some(heredoc) = self.pending_heredocs.pop_front() {
                    self.stack.push(Context::Heredoc(heredoc));
                    self.at_line_start = true;
                }
                i + 1
            }
            _ => i + 1,
        }
    }

    /// `$` followed by `(`, `((`, `{` or `'` opens a context.
    fn dollar(&mut self, i: usize, next: Option<u8>) -> usize {
        match next {
            Some(b'(') if self.bytes.get(i + 2) == Some(&b'(') => {
                self.stack.push(Context::Arithmetic(0));
                i + 3
            }
            Some(b'(') => {
                self.stack.push(Context::CommandSubstitution(0));
                i + 2
            }
            Some(b'{') => {
                self.stack.push(Context::Parameter);
                i + 2
            }
            Some(b'\'') if self.in_code() => {
                self.stack.push(Context::AnsiC);
                i + 2
            }
            _ => i + 1,
        }
    }

    fn at_word_start(&self, i: usize) -> bool {
        i == 0 || b" \t\n;&|()<>".contains(&self.bytes[i - 1])
    }

    /// Parses the word after `<<` (or `<<-`) and queues its heredoc.
    fn heredoc_operator(&mut self, mut i: usize) -> usize {
        let strip_tabs = self.bytes.get(i) == Some(&b'-');
        if strip_tabs {
            i += 1;
        }
        while matches!(self.bytes.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        let start = i;
        while i < self.bytes.len() && !b" \t\n;&|<>()".contains(&self.bytes[i]) {
            i += 1;
        }
        let word = &self.script[start..i];
        if word.is_empty() {
            return i;
        }
        let quoted = word.contains(['\'', '"', '\\']);
        let delimiter: String = word
            .chars()
            .filter(|c| !matches!(c, '\'' | '"' | '\\'))
            .collect();
        self.pending_heredocs.push_back(Heredoc {
            delimiter,
            quoted,
            strip_tabs,
        });
        i
    }

    /// At the start of a heredoc body line: if the line is the delimiter,
    /// ends the heredoc (starting the next pending one) and returns the
    /// position after the line.
    fn heredoc_end(&mut self, i: usize) -> Option<usize> {
        let Context::Heredoc(heredoc) = self.top() else {
            return None;
        };
        let line_end = self.bytes[i..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(self.bytes.len(), |offset| i + offset);
        let line = &self.script[i..line_end];
        let line = if heredoc.strip_tabs {
            line.trim_start_matches('\t')
        } else {
            line
        };
        if line != heredoc.delimiter {
            return None;
        }
        self.stack.pop();
        if let Some(next) = self.pending_heredocs.pop_front() {
            self.stack.push(Context::Heredoc(next));
            self.at_line_start = true;
        }
        Some((line_end + 1).min(self.bytes.len()))
    }

    /// `{` at `i`: a `{{ … }}` block is skipped, a known `{name}` replaced.
    fn placeholder<V: AsRef<str>>(
        &mut self,
        i: usize,
        lookup: &impl Fn(&str) -> Option<V>,
    ) -> usize {
        let after = &self.script[i + 1..];
        if let Some(block) = after.strip_prefix('{') {
            return block.find("}}").map_or(i + 2, |end| i + 2 + end + 2);
        }
        let Some(end) = after
            .find(['{', '}'])
            .filter(|end| after.as_bytes()[*end] == b'}')
        else {
            return i + 1;
        };
        if end > MAX_NAME_LEN {
            return i + 1;
        }
        let Some(value) = lookup(&after[..end]) else {
            return i + 1;
        };
        let Some(escaped) = self.escape(value.as_ref()) else {
            return i + 1;
        };
        self.out.push_str(&self.script[self.mark..i]);
        self.out.push_str(&escaped);
        self.mark = i + 1 + end + 1;
        self.mark
    }

    /// `value` escaped for the current context, or `None` when it cannot be
    /// placed there safely.
    fn escape(&self, value: &str) -> Option<String> {
        let innermost = self
            .stack
            .iter()
            .rev()
            .find(|context| **context != Context::Parameter)
            .expect("the bottom context is not a parameter");
        let mut escaped = match innermost {
            Context::Bare | Context::CommandSubstitution(_) | Context::Backtick => quote(value),
            Context::Single => value.replace('\'', r"'\''"),
            Context::Double => backslash_escape(value, b"\\\"$`"),
            Context::AnsiC => backslash_escape(value, b"\\'"),
            Context::Arithmetic(_) => {
                let digits = value.strip_prefix('-').unwrap_or(value);
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    value.to_owned()
                } else {
                    quote(value)
                }
            }
            Context::Heredoc(heredoc) => {
                let ends_early = value.split('\n').any(|line| {
                    let line = if heredoc.strip_tabs {
                        line.trim_start_matches('\t')
                    } else {
                        line
                    };
                    line == heredoc.delimiter
                });
                if ends_early {
                    return None;
                }
                if heredoc.quoted {
                    value.to_owned()
                } else {
                    backslash_escape(value, b"\\$`")
                }
            }
            Context::Parameter => unreachable!("skipped above"),
        };
        // Inside backticks the shell removes one level of backslashes before
        // parsing the command, and an unescaped backtick would end it.
        let backticks = self
            .stack
            .iter()
            .filter(|context| **context == Context::Backtick)
            .count();
        for _ in 0..backticks {
            escaped = backslash_escape(&escaped, b"\\`$");
        }
        Some(escaped)
    }
}

fn backslash_escape(value: &str, special: &[u8]) -> String {
    let mut escaped = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        if c.is_ascii() && special.contains(&(c as u8)) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(script: &str, expected: &str) {
        let lookup = |name: &str| match name {
            "v" => Some("a'b \"c\" $d `e`"),
            "n" => Some("42"),
            "path" => Some("/tmp/x y"),
            _ => None,
        };
        assert_eq!(substitute(script, lookup), expected, "script: {script}");
    }

    #[test]
    fn substitutes_per_context() {
        check("echo {path}", "echo '/tmp/x y'");
        check("echo \"at {path}\"", "echo \"at /tmp/x y\"");
        check("echo 'at {path}'", "echo 'at /tmp/x y'");
        check("echo {v}", r#"echo 'a'\''b "c" $d `e`'"#);
        check("echo \"{v}\"", r#"echo "a'b \"c\" \$d \`e\`""#);
        check("echo '{v}'", r#"echo 'a'\''b "c" $d `e`'"#);
        check("echo $(( {n} + 1 ))", "echo $(( 42 + 1 ))");
        check("echo $(( {path} ))", "echo $(( '/tmp/x y' ))");
        check("echo $'{v}'", r#"echo $'a\'b "c" $d `e`'"#);
    }

    #[test]
    fn leaves_unknown_names_braces_and_parameters_alone() {
        check(
            "echo {unknown} {{ v }} {{v}} ${v} ${HOME}",
            "echo {unknown} {{ v }} {{v}} ${v} ${HOME}",
        );
        check("echo {a,b} {} {", "echo {a,b} {} {");
        check(
            "# a comment with {path}\necho {n}",
            "# a comment with {path}\necho '42'",
        );
        check("echo x#{n}", "echo x#'42'");
    }

    #[test]
    fn follows_nested_contexts() {
        check("echo \"$(echo {path})\"", "echo \"$(echo '/tmp/x y')\"");
        check("echo \"${X:-{path}}\"", "echo \"${X:-/tmp/x y}\"");
        check("echo ${X:-{path}}", "echo ${X:-'/tmp/x y'}");
        check("echo `echo {n}`", r"echo `echo '42'`");
        check("echo \"it's {n}\"", "echo \"it's 42\"");
    }

    #[test]
    fn heredocs() {
        check(
            "cat <<EOF\n{v}\nEOF\necho {n}",
            "cat <<EOF\na'b \"c\" \\$d \\`e\\`\nEOF\necho '42'",
        );
        check(
            "cat <<'EOF'\n{v}\nEOF\n",
            "cat <<'EOF'\na'b \"c\" $d `e`\nEOF\n",
        );
        check(
            "cat <<-EOF\n\t{n}\n\tEOF\necho {n}",
            "cat <<-EOF\n\t42\n\tEOF\necho '42'",
        );
        let lookup = |name: &str| (name == "x").then_some("a\nEOF\nrm -rf /");
        assert_eq!(
            substitute("cat <<EOF\n{x}\nEOF\n", lookup),
            "cat <<EOF\n{x}\nEOF\n"
        );
    }

    #[test]
    fn quote_is_posix() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
