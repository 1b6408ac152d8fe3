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
//! **Substitution.** Workflow values never reach a shell as code.
//! [`substitute`] replaces each known `{name}` in a script with a reference
//! to an environment variable (`BATON_P_name`) that holds the value, written
//! for the quoting context the placeholder sits in, tracked by a small
//! lexer; the caller sets the variables on the process. Bash expands a
//! variable once and never parses what it held, so however the lexer
//! judges a context, a value does not run:
//!
//! | context | example | the placeholder becomes |
//! |---|---|---|
//! | bare | `echo {v}` | `"${BATON_P_v}"` |
//! | double quotes | `echo "x {v}"` | `${BATON_P_v}` |
//! | single quotes | `echo 'x {v}'` | `'"${BATON_P_v}"'` (close, expand, reopen) |
//! | `$'…'` | `$'x {v}'` | `'"${BATON_P_v}"$'` |
//! | unquoted heredoc | `<<EOF … {v}` | `${BATON_P_v}` |
//! | quoted heredoc | `<<'EOF' … {v}` | the value as is (bash reads it as text) |
//! | arithmetic | `$(( {n} + 1 ))`, `(( {n} ))`, `let x={n}`, `[[ {n} -eq 1 ]]`, `a[{n}]`, `${x:{n}:{n}}` | the value, which must be an integer |
//!
//! Arithmetic is the exception because bash evaluates even a variable's
//! value there (`a[$(cmd)]` runs `cmd`): a value that is not a plain
//! integer is refused before bash starts. `$( … )`, `${ … }`, backticks and
//! `case` arms are followed (a command substitution starts a fresh
//! context). Placeholders in comments are left alone. A value whose quoted
//! heredoc line would end the heredoc early is not substituted, and after a
//! heredoc word that is not plain ([`heredoc`]) no value is placed at all.
//! In a quoted heredoc inside backticks, a value with a backtick or a
//! backslash is refused: bash reads backticks before the heredoc. After a
//! heredoc begun inside backticks that close before its body, no value is
//! placed: bash reads that body only inside them, so the lines after are
//! code that look like it.
//! Unknown names, `${VAR}` and `{{ … }}` are copied byte for byte.

use std::collections::{HashMap, VecDeque};

mod heredoc;

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

/// A script whose values were moved into environment variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Substituted {
    /// The script, referring to the values as variables.
    pub script: String,
    /// The variables to set on the process that runs it.
    pub env: Vec<(String, String)>,
}

/// Replaces each `{name}` in `script` for which `lookup` has a value with a
/// reference to a variable holding it (see the module docs). Everything
/// else is copied byte for byte.
///
/// # Errors
///
/// A value that is not an integer where bash would evaluate it as
/// arithmetic; the message names the placeholder.
pub fn substitute<V: AsRef<str>>(
    script: &str,
    lookup: impl Fn(&str) -> Option<V>,
) -> Result<Substituted, String> {
    Lexer {
        script,
        bytes: script.as_bytes(),
        out: String::with_capacity(script.len() + 64),
        mark: 0,
        stack: vec![Context::Bare],
        pending_heredocs: VecDeque::new(),
        at_line_start: false,
        variables: HashMap::new(),
        env: Vec::new(),
        error: None,
        unclear_heredoc: None,
        backticks: Vec::new(),
        heredoc_left_in_backticks: None,
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

/// The most bytes one `NAME=value` string passed to a program may take,
/// its terminating NUL included (Linux's `MAX_ARG_STRLEN`).
const MAX_VARIABLE_BYTES: usize = 128 * 1024;

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
    /// Inside `${…}`; where its text starts.
    Parameter(usize),
    /// Inside `` `…` ``.
    Backtick,
    /// A heredoc body, up to the line equal to `delimiter`.
    Heredoc(Heredoc),
    /// Inside `((…))` as a command, up to `))`; counts unmatched `(`.
    ArithmeticCommand(usize),
    /// Inside `name[…]` or `$[…]`: evaluated as arithmetic.
    Subscript,
    /// Between `case` and `esac`, where `)` ends a pattern.
    Case,
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
    /// The variable each placeholder name was given.
    variables: HashMap<String, String>,
    env: Vec<(String, String)>,
    /// The first value refused.
    error: Option<String>,
    /// The word of a heredoc whose end is not known (see [`heredoc`]):
    /// no value may be placed after it.
    unclear_heredoc: Option<String>,
    /// For each backtick substitution open, how many heredocs were pending
    /// when it opened.
    backticks: Vec<usize>,
    /// The word of a heredoc begun inside backticks that closed before its
    /// body: bash reads the body only inside the backticks, so the lines
    /// after them are code this lexer would take for the body. No value
    /// may be placed after it.
    heredoc_left_in_backticks: Option<String>,
}

impl Lexer<'_> {
    fn run<V: AsRef<str>>(
        mut self,
        lookup: &impl Fn(&str) -> Option<V>,
    ) -> Result<Substituted, String> {
        let mut i = 0;
        while i < self.bytes.len() {
            i = self.step(i, lookup);
        }
        if let Some(error) = self.error {
            return Err(error);
        }
        self.out.push_str(&self.script[self.mark..]);
        Ok(Substituted {
            script: self.out,
            env: self.env,
        })
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
            Context::Bare | Context::CommandSubstitution(_) | Context::Backtick | Context::Case => {
                true
            }
            Context::Parameter(_) => !self.parameter_in_double_quotes(),
            _ => false,
        }
    }

    /// `${…}` inside `"…"`: single quotes there are literal.
    fn parameter_in_double_quotes(&self) -> bool {
        self.stack
            .iter()
            .rev()
            .find(|context| !matches!(context, Context::Parameter(_)))
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
                b'`' => self.open_backtick(i),
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
                    b'`' => self.open_backtick(i),
                    _ => i + 1,
                }
            }
            Context::Arithmetic(depth) | Context::ArithmeticCommand(depth) => {
                self.arithmetic(i, byte, next, depth)
            }
            Context::Subscript => {
                match byte {
                    b']' => {
                        self.stack.pop();
                    }
                    b'$' => return self.dollar(i, next),
                    _ => {}
                }
                i + 1
            }
            Context::Bare
            | Context::CommandSubstitution(_)
            | Context::Backtick
            | Context::Case
            | Context::Parameter(_) => self.code(i, byte, next),
        }
    }

    /// A byte inside `$((…))` or `((…))`: both end at `))` with no `(`
    /// left open (a single `)` there closes a group, not the context).
    fn arithmetic(&mut self, i: usize, byte: u8, next: Option<u8>, depth: usize) -> usize {
        let top = self.stack.last_mut().expect("top");
        let with = |depth| match top {
            Context::ArithmeticCommand(_) => Context::ArithmeticCommand(depth),
            _ => Context::Arithmetic(depth),
        };
        match byte {
            b'(' => *top = with(depth + 1),
            b')' if depth == 0 && next == Some(b')') => {
                self.stack.pop();
                return i + 2;
            }
            b')' => *top = with(depth.saturating_sub(1)),
            b'$' => return self.dollar(i, next),
            _ => {}
        }
        i + 1
    }

    /// A byte in a context that parses shell words.
    fn code(&mut self, i: usize, byte: u8, next: Option<u8>) -> usize {
        let literal_single_quotes = !self.in_code();
        // Inside `${…}`, `#` and `<<` are operators of the expansion
        // (`${x#pre}`, `${x/<</y}`), never a comment or a heredoc.
        let in_parameter = matches!(self.top(), Context::Parameter(_));
        if !literal_single_quotes && self.at_word_start(i) {
            if byte == b'(' && next == Some(b'(') {
                self.stack.push(Context::ArithmeticCommand(0));
                return i + 2;
            }
            if self.word_at(i) == "case" {
                self.stack.push(Context::Case);
                return i + 4;
            }
            if *self.top() == Context::Case && self.word_at(i) == "esac" {
                self.stack.pop();
                return i + 4;
            }
        }
        if byte == b'[' && i > 0 && is_name_byte(self.bytes[i - 1]) && !literal_single_quotes {
            self.stack.push(Context::Subscript);
            return i + 1;
        }
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
            b'`' if *self.top() == Context::Backtick => self.close_backtick(i),
            b'`' => self.open_backtick(i),
            b'}' if matches!(self.top(), Context::Parameter(_)) => {
                self.stack.pop();
                i + 1
            }
            b'(' | b')' => {
                // In `case`, `)` ends a pattern.
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
            b'#' if self.at_word_start(i) && !literal_single_quotes && !in_parameter => {
                // A comment: skip to the end of the line, substituting
                // nothing (a newline in a value would end the comment).
                self.bytes[i..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(self.bytes.len(), |offset| i + offset)
            }
            // `<<<` is a here-string, read as a whole: from its second `<`,
            // it would look like a heredoc.
            b'<' if next == Some(b'<') && self.bytes.get(i + 2) == Some(&b'<') => i + 3,
            b'<' if next == Some(b'<') && !in_parameter => self.heredoc_operator(i + 2),
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
                self.stack.push(Context::Parameter(i + 2));
                i + 2
            }
            Some(b'[') => {
                self.stack.push(Context::Subscript);
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

    /// The shell word that starts at `i` (up to a blank or an operator).
    fn word_at(&self, i: usize) -> &str {
        let end = self.bytes[i..]
            .iter()
            .position(|byte| b" \t\n;&|()<>".contains(byte))
            .map_or(self.bytes.len(), |offset| i + offset);
        &self.script[i..end]
    }

    /// Parses the word after `<<` (or `<<-`) and queues its heredoc. After
    /// a word that is not plain (see [`heredoc`]), no value is placed.
    fn heredoc_operator(&mut self, mut i: usize) -> usize {
        let strip_tabs = self.bytes.get(i) == Some(&b'-');
        if strip_tabs {
            i += 1;
        }
        while matches!(self.bytes.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        match heredoc::word(self.script, i) {
            heredoc::Word::Plain {
                end,
                delimiter,
                quoted,
            } => {
                self.pending_heredocs.push_back(Heredoc {
                    delimiter,
                    quoted,
                    strip_tabs,
                });
                end
            }
            heredoc::Word::Missing => i,
            heredoc::Word::Unclear => {
                let line_end = self.script[i..]
                    .find('\n')
                    .map_or(self.script.len(), |at| i + at);
                self.unclear_heredoc
                    .get_or_insert_with(|| self.script[i..line_end].to_owned());
                i
            }
        }
    }

    /// A backtick substitution opens at `i`.
    fn open_backtick(&mut self, i: usize) -> usize {
        self.stack.push(Context::Backtick);
        self.backticks.push(self.pending_heredocs.len());
        i + 1
    }

    /// The backtick substitution open closes at `i`. A heredoc begun
    /// inside it whose body has not started never gets one outside it.
    fn close_backtick(&mut self, i: usize) -> usize {
        self.stack.pop();
        let before = self.backticks.pop().unwrap_or(0);
        if self.pending_heredocs.len() > before {
            let inner = self.pending_heredocs.split_off(before);
            if let Some(heredoc) = inner.front() {
                self.heredoc_left_in_backticks
                    .get_or_insert_with(|| heredoc.delimiter.clone());
            }
        }
        i + 1
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
        let name = &after[..end];
        let Some(value) = lookup(name) else {
            return i + 1;
        };
        let Some(replacement) = self.replacement(i, name, value.as_ref()) else {
            return i + 1;
        };
        self.out.push_str(&self.script[self.mark..i]);
        self.out.push_str(&replacement);
        self.mark = i + 1 + end + 1;
        self.mark
    }

    /// What `{name}` at `i` becomes in the current context, or `None` when
    /// it is left as it is.
    fn replacement(&mut self, i: usize, name: &str, value: &str) -> Option<String> {
        if let Some(word) = &self.heredoc_left_in_backticks {
            let message = format!(
                "`{{{name}}}` comes after a heredoc (`<<{word}`) begun inside backticks that close before its body, so baton cannot tell how bash reads the lines after them; use `$( … )` with the heredoc's body inside it, or a file"
            );
            self.error.get_or_insert(message);
            return None;
        }
        if let Some(word) = &self.unclear_heredoc {
            let message = format!(
                "`{{{name}}}` comes after a heredoc (`<<{word}`) whose delimiter is not a plain word, so baton cannot tell where that heredoc ends or whether bash reads its lines as text; write the delimiter as EOF, 'EOF' or \"EOF\" (letters, digits and _.,:@%+=/- only)"
            );
            self.error.get_or_insert(message);
            return None;
        }
        if value.contains('\0') {
            self.error.get_or_insert_with(|| {
                format!(
                    "`{{{name}}}` holds a NUL byte, which no program argument or variable can carry"
                )
            });
            return None;
        }
        // `BATON_P_<name>=<value>` must fit the kernel's limit for one
        // variable (MAX_ARG_STRLEN, with its NUL), or the script cannot start.
        let limit = MAX_VARIABLE_BYTES - "BATON_P_=".len() - name.len() - 1;
        if value.len() > limit {
            self.error.get_or_insert_with(|| {
                format!(
                    "`{{{name}}}` holds {} bytes, more than the {limit} a script's variable can carry; pass a value this large through a file (an upstream stage's output, say)",
                    value.len()
                )
            });
            return None;
        }
        if self.arithmetic_at(i) {
            let digits = value.strip_prefix('-').unwrap_or(value);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                self.error.get_or_insert_with(|| {
                    format!(
                        "`{{{name}}}` is used where bash evaluates arithmetic ($(( )), (( )), let, [[ -eq ]], an array subscript or a ${{name:offset:length}} bound), which would run code in its value; it must be an integer there, and is {value:?}"
                    )
                });
                return None;
            }
            // `${x:` then `-1` would read as the default `${x:-1}`.
            if value.starts_with('-') && i > 0 && self.bytes[i - 1] == b':' {
                return Some(format!(" {value}"));
            }
            return Some(value.to_owned());
        }
        let innermost = self
            .stack
            .iter()
            .rev()
            .find(|context| !matches!(context, Context::Parameter(_)))
            .expect("the bottom context is not a parameter")
            .clone();
        if let Context::Heredoc(heredoc) = &innermost
            && heredoc.quoted
        {
            // Bash reads a quoted heredoc's body as text: the value goes in
            // as it is, unless a line of it would end the heredoc. Inside
            // backticks, bash first reads the whole substitution up to the
            // next unescaped backtick and takes out the backslashes before
            // `\`, `` ` `` and `$`: a value holding either would end or change
            // the command around it.
            if self.stack.contains(&Context::Backtick) && value.contains(['`', '\\']) {
                self.error.get_or_insert_with(|| {
                    format!(
                        "`{{{name}}}` is in a quoted heredoc inside backticks, where a backtick or backslash in its value would end or change the command; write the substitution as $( … ) instead of backticks"
                    )
                });
                return None;
            }
            let ends_early = value.split('\n').any(|line| {
                let line = if heredoc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                line == heredoc.delimiter
            });
            return (!ends_early).then(|| value.to_owned());
        }
        let variable = self.variable(name, value);
        Some(match innermost {
            Context::Single => format!("'\"${{{variable}}}\"'"),
            Context::AnsiC => format!("'\"${{{variable}}}\"$'"),
            Context::Double | Context::Heredoc(_) => format!("${{{variable}}}"),
            _ => format!("\"${{{variable}}}\""),
        })
    }

    /// Whether a placeholder at `i` is evaluated as arithmetic: inside
    /// `$((…))`, `((…))`, `$[…]`, a subscript or the offset or length of
    /// `${name:offset:length}`, in the words of `let` or `declare -i`, or in
    /// a `[[ … ]]` that compares numbers.
    fn arithmetic_at(&self, i: usize) -> bool {
        if self.stack.iter().any(|context| {
            matches!(
                context,
                Context::Arithmetic(_) | Context::ArithmeticCommand(_) | Context::Subscript
            )
        }) {
            return true;
        }
        let innermost_parameter = self.stack.iter().rev().find_map(|context| match context {
            Context::Parameter(start) => Some(*start),
            _ => None,
        });
        if innermost_parameter.is_some_and(|start| substring_bounds(&self.script[start..i])) {
            return true;
        }
        let line_start = self.script[..i].rfind('\n').map_or(0, |at| at + 1);
        let line_end = self.script[i..]
            .find('\n')
            .map_or(self.script.len(), |at| i + at);
        let before = &self.script[line_start..i];
        let command = before
            .rsplit([';', '&', '|', '(', '`'])
            .next()
            .unwrap_or_default()
            .trim_start();
        let mut words = command.split_whitespace();
        let first = words.next().unwrap_or_default();
        if first == "let"
            || (matches!(
                first,
                "declare" | "local" | "typeset" | "readonly" | "export"
            ) && words.any(|word| word.starts_with('-') && word.contains('i')))
        {
            return true;
        }
        // `[[ … ]]` around the placeholder, with a numeric comparison in it.
        let Some(open) = before.rfind("[[") else {
            return false;
        };
        if before[open..].contains("]]") {
            return false;
        }
        let close = self.script[i..line_end]
            .find("]]")
            .map_or(line_end, |at| i + at);
        let test = &self.script[line_start + open..close];
        ["-eq", "-ne", "-lt", "-le", "-gt", "-ge"]
            .iter()
            .any(|operator| test.split_whitespace().any(|word| word == *operator))
    }

    /// The variable that holds `name`'s value, set on first use.
    fn variable(&mut self, name: &str, value: &str) -> String {
        if let Some(variable) = self.variables.get(name) {
            return variable.clone();
        }
        let base: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let mut variable = format!("BATON_P_{base}");
        while self.env.iter().any(|(taken, _)| *taken == variable) {
            variable.push('_');
        }
        self.variables.insert(name.to_owned(), variable.clone());
        self.env.push((variable.clone(), value.to_owned()));
        variable
    }
}

/// Whether `${` followed by `inside` has reached the offset or length of
/// a substring expansion (`${name:offset}`, `${name:offset:length}`, also
/// `${name: -1}`), which bash evaluates as arithmetic, rather than a
/// default (`${name:-…}`, `:=`, `:?`, `:+`), a pattern or a plain name.
fn substring_bounds(inside: &str) -> bool {
    let rest = inside.strip_prefix('!').unwrap_or(inside);
    let name_length = if rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len())
    } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
        rest.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len())
    } else if rest.starts_with(['@', '*', '#', '?', '$', '!', '-']) {
        1
    } else {
        return false;
    };
    let mut rest = &rest[name_length..];
    if rest.starts_with('[') {
        let Some(close) = rest.find(']') else {
            return false;
        };
        rest = &rest[close + 1..];
    }
    rest.strip_prefix(':')
        .is_some_and(|bounds| !bounds.starts_with(['-', '=', '?', '+']))
}

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
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
        let substituted = substitute(script, lookup).expect("substitutes");
        assert_eq!(substituted.script, expected, "script: {script}");
    }

    #[test]
    fn substitutes_per_context() {
        check("echo {path}", "echo \"${BATON_P_path}\"");
        check("echo \"at {path}\"", "echo \"at ${BATON_P_path}\"");
        check("echo 'at {path}'", "echo 'at '\"${BATON_P_path}\"''");
        check("echo $'{v}'", "echo $''\"${BATON_P_v}\"$''");
        check("echo $(( {n} + 1 ))", "echo $(( 42 + 1 ))");
        check("(( y = {n} << 2 ))", "(( y = 42 << 2 ))");
        check("let x={n}", "let x=42");
        check("[[ {n} -eq 3 ]]", "[[ 42 -eq 3 ]]");
        check("echo ${a[{n}]}", "echo ${a[42]}");
    }

    #[test]
    fn values_are_variables_set_once_per_name() {
        let lookup = |name: &str| (name == "v").then_some("x");
        let substituted = substitute("echo {v} \"{v}\"", lookup).expect("substitutes");
        assert_eq!(substituted.env, [("BATON_P_v".to_owned(), "x".to_owned())]);
    }

    #[test]
    fn a_value_that_is_not_an_integer_is_refused_in_arithmetic() {
        for script in [
            "echo $(( {v} ))",
            "(( {v} ))",
            "let x={v}",
            "[[ {v} -gt 1 ]]",
            "echo ${a[{v}]}",
            "declare -i x={v}",
            "echo $(( \"{v}\" ))",
        ] {
            let error = substitute(script, |name| (name == "v").then_some("a[$(touch x)]"))
                .expect_err(script);
            assert!(error.contains("`{v}`"), "{error}");
        }
    }

    #[test]
    fn a_value_too_large_for_one_variable_is_refused_naming_its_size() {
        let large = "k".repeat(MAX_VARIABLE_BYTES);
        let error = substitute("echo {v}", |name| (name == "v").then_some(large.as_str()))
            .expect_err("refused");
        assert!(error.contains("`{v}` holds 131072 bytes"), "{error}");
        let fits = "k".repeat(MAX_VARIABLE_BYTES - "BATON_P_v=".len() - 1);
        substitute("echo {v}", |name| (name == "v").then_some(fits.as_str())).expect("fits");
    }

    #[test]
    fn a_nul_byte_is_refused() {
        let error =
            substitute("echo {v}", |name| (name == "v").then_some("a\0b")).expect_err("refused");
        assert!(error.contains("NUL"), "{error}");
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
            "# a comment with {path}\necho \"${BATON_P_n}\"",
        );
    }

    #[test]
    fn follows_nested_contexts() {
        check(
            "echo \"$(echo {path})\"",
            "echo \"$(echo \"${BATON_P_path}\")\"",
        );
        check("echo \"${X:-{path}}\"", "echo \"${X:-${BATON_P_path}}\"");
        check("echo `echo {n}`", "echo `echo \"${BATON_P_n}\"`");
        check(
            "echo \"$(echo $((1+1)) '{path}')\"",
            "echo \"$(echo $((1+1)) ''\"${BATON_P_path}\"'')\"",
        );
        check(
            "echo \"$(case x in x) echo '{path}';; esac)\"",
            "echo \"$(case x in x) echo ''\"${BATON_P_path}\"'';; esac)\"",
        );
    }

    #[test]
    fn heredocs() {
        check(
            "cat <<EOF\n{v}\nEOF\necho {n}",
            "cat <<EOF\n${BATON_P_v}\nEOF\necho \"${BATON_P_n}\"",
        );
        check(
            "cat <<'EOF'\n{v}\nEOF\n",
            "cat <<'EOF'\na'b \"c\" $d `e`\nEOF\n",
        );
        let lookup = |name: &str| (name == "x").then_some("a\nEOF\nrm -rf /");
        assert_eq!(
            substitute("cat <<'EOF'\n{x}\nEOF\n", lookup)
                .expect("substitutes")
                .script,
            "cat <<'EOF'\n{x}\nEOF\n"
        );
    }

    #[test]
    fn a_quoted_heredoc_in_backticks_takes_no_backtick_or_backslash() {
        let script = "x=`cat <<'EOF'\n{v}\nEOF\n`";
        for value in ["a`touch pwned`b", "a\\`b"] {
            let error = substitute(script, |name| (name == "v").then_some(value)).expect_err(value);
            assert!(error.contains("$( … ) instead of backticks"), "{error}");
        }
        let text = substitute(script, |name| (name == "v").then_some("a'b \"c\" $(d)"))
            .expect("substitutes");
        assert_eq!(text.script, "x=`cat <<'EOF'\na'b \"c\" $(d)\nEOF\n`");
    }

    #[test]
    fn a_heredoc_ends_where_bash_ends_it() {
        // The delimiter is the whole quoted word, space included.
        check(
            "cat <<'a b'\nx\na b\necho {n}",
            "cat <<'a b'\nx\na b\necho \"${BATON_P_n}\"",
        );
        check(
            "cat <<E'O'F\n{n}\nEOF\necho {n}",
            "cat <<E'O'F\n42\nEOF\necho \"${BATON_P_n}\"",
        );
        // In `${…}`, `<<` is part of a pattern and `#` no comment.
        check(
            "echo ${x/<<'E'/y}\n{v}\nE",
            "echo ${x/<<'E'/y}\n\"${BATON_P_v}\"\nE",
        );
        check("echo ${x# {n}}", "echo ${x# \"${BATON_P_n}\"}");
        // `<<<` is a here-string: no heredoc follows.
        check("cat <<<'B'\n{n}\nB", "cat <<<'B'\n\"${BATON_P_n}\"\nB");
    }

    #[test]
    fn no_value_is_placed_after_a_heredoc_word_that_is_not_plain() {
        for script in [
            "<<\"\n\"{v}",
            "cat <<$(x)\n{v}\n",
            "cat <<'EOF\n{v}\nEOF'\n",
            "cat <<\\\nEOF\n{v}\nEOF\n",
        ] {
            let error = substitute(script, |name| (name == "v").then_some("x")).expect_err(script);
            assert!(error.contains("not a plain word"), "{error}");
        }
        // Before such a heredoc, values are placed as usual.
        check("echo {n}\ncat <<$X\n", "echo \"${BATON_P_n}\"\ncat <<$X\n");
    }

    #[test]
    fn no_value_is_placed_after_a_heredoc_begun_in_backticks_that_close_first() {
        // Bash reads such a heredoc's body only inside the backticks: the
        // next line is code, not the body it looks like.
        for script in ["`<<''<x`\n{v}\n", "x=`cat <<EOF `\n{v}\nEOF\n"] {
            let error = substitute(script, |name| (name == "v").then_some("x")).expect_err(script);
            assert!(error.contains("begun inside backticks"), "{error}");
        }
        // A heredoc pending before the backticks keeps its body after them.
        check("cat <<'E'; x=`pwd`\n{n}\nE", "cat <<'E'; x=`pwd`\n42\nE");
        // One whose body is inside the backticks is read as before.
        check("x=`cat <<'E'\n{n}\nE\n`", "x=`cat <<'E'\n42\nE\n`");
    }

    #[test]
    fn substring_bounds_are_arithmetic() {
        check("echo ${x:{n}}", "echo ${x:42}");
        check("echo ${x:0:{n}} ${x: {n}}", "echo ${x:0:42} ${x: 42}");
        check(
            "echo ${x:-{n}} ${x:={n}}",
            "echo ${x:-\"${BATON_P_n}\"} ${x:=\"${BATON_P_n}\"}",
        );
        let negative = |name: &str| (name == "n").then_some("-3");
        assert_eq!(
            substitute("echo ${x:{n}}", negative)
                .expect("an integer")
                .script,
            "echo ${x: -3}"
        );
        for script in [
            "echo ${x:{v}}",
            "echo \"${a[1]:0:{v}}\"",
            "echo ${x:\"{v}\"}",
            "echo ${@:{v}}",
        ] {
            let error = substitute(script, |name| (name == "v").then_some("a[$(touch x)]"))
                .expect_err(script);
            assert!(error.contains("arithmetic"), "{error}");
        }
    }

    #[test]
    fn quote_is_posix() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
