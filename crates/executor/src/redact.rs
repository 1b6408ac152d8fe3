//! Secrets never reach baton's logs, errors or records.
//!
//! Two kinds of text are replaced by `[redacted]` in everything a stage's
//! process prints before it is written to a log (and so before any error,
//! transcript or usage is read from it):
//!
//! * the values of environment variables whose names say they hold a secret
//!   (`…KEY…`, `…TOKEN…`, `…SECRET…`, `…PASSWORD…`, `…CREDENTIAL…`,
//!   `…AUTH…`): baton's own environment, from which agents' pass-through
//!   variables come, and the variables a stage sets;
//! * text shaped like an API key (`sk-…`, `AIza…`, `ghp_…`, `github_pat_…`,
//!   `xox…-`, `AKIA…`, `glpat-…`, and the token after `Bearer`).
//!
//! Output is redacted line by line, so a secret split across two reads of a
//! pipe is still found; a line is held back until it ends (or grows past
//! [`MAX_HELD_BYTES`]).

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

/// What a secret becomes.
pub const REDACTED: &str = "[redacted]";

/// The longest unfinished line held back before it is written anyway.
pub const MAX_HELD_BYTES: usize = 64 * 1024;

/// Values shorter than this are not taken for secrets (`AUTH=1`).
const MIN_SECRET_LEN: usize = 8;

/// Words in a variable's name that say its value is a secret.
const SECRET_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
];

/// The start of every API-key shape, to look for before the pattern runs.
const SHAPE_STARTS: &[&str] = &[
    "sk-",
    "AIza",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "AKIA",
    "glpat-",
    "earer",
];

static SHAPES: LazyLock<regex_lite::Regex> = LazyLock::new(|| {
    regex_lite::Regex::new(concat!(
        r"sk-[A-Za-z0-9_\-]{20,}",
        r"|AIza[0-9A-Za-z_\-]{35}",
        r"|gh[pousr]_[A-Za-z0-9]{30,}",
        r"|github_pat_[A-Za-z0-9_]{22,}",
        r"|xox[abposr]-[A-Za-z0-9\-]{10,}",
        r"|AKIA[0-9A-Z]{16}",
        r"|glpat-[A-Za-z0-9_\-]{20,}",
        r"|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{16,}=*",
    ))
    .expect("the key shapes are a valid pattern")
});

/// The secrets to look for.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    values: Vec<String>,
}

impl Redactor {
    /// The values of baton's own secret variables (read once).
    pub fn global() -> Arc<Redactor> {
        static GLOBAL: LazyLock<Arc<Redactor>> = LazyLock::new(|| {
            Arc::new(
                Redactor::default().with(crate::environment::all().filter_map(|(name, value)| {
                    Some((name.into_string().ok()?, value.into_string().ok()?))
                })),
            )
        });
        Arc::clone(&GLOBAL)
    }

    /// The global redactor, and the secrets among the variables a process
    /// is given.
    pub fn for_variables(variables: &[(String, String)]) -> Arc<Redactor> {
        let global = Redactor::global();
        let pairs = variables
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()));
        if global.misses(pairs) {
            Arc::new(global.as_ref().clone().with(variables.iter().cloned()))
        } else {
            global
        }
    }

    /// This redactor and the secret ones among `variables`.
    #[must_use]
    pub fn with(mut self, variables: impl IntoIterator<Item = (String, String)>) -> Redactor {
        for (name, value) in variables {
            if is_secret(&name, &value) && !self.values.contains(&value) {
                self.values.push(value);
            }
        }
        // Longer values first: one that contains another is replaced whole.
        self.values
            .sort_by_key(|value| std::cmp::Reverse(value.len()));
        self
    }

    /// Whether `variables` hold a secret this redactor does not know.
    pub fn misses<'a>(&self, variables: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        variables
            .into_iter()
            .any(|(name, value)| is_secret(name, value) && !self.values.iter().any(|v| v == value))
    }

    /// `text` with every secret replaced.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match self.redact_bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(bytes) => Cow::Owned(String::from_utf8_lossy(&bytes).into_owned()),
        }
    }

    /// `bytes` with every secret replaced. Key shapes are looked for only
    /// in text that is UTF-8; secret values everywhere.
    pub fn redact_bytes<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        let mut out: Cow<'b, [u8]> = Cow::Borrowed(bytes);
        for value in &self.values {
            if memchr::memmem::find(&out, value.as_bytes()).is_some() {
                out = Cow::Owned(replace_all(&out, value.as_bytes()));
            }
        }
        static STARTS: LazyLock<Vec<memchr::memmem::Finder<'static>>> = LazyLock::new(|| {
            SHAPE_STARTS
                .iter()
                .map(|start| memchr::memmem::Finder::new(start.as_bytes()))
                .collect()
        });
        let shaped = STARTS.iter().any(|start| start.find(&out).is_some());
        if shaped
            && let Ok(text) = std::str::from_utf8(&out)
            && let Cow::Owned(replaced) = SHAPES.replace_all(text, REDACTED)
        {
            return Cow::Owned(replaced.into_bytes());
        }
        out
    }
}

fn is_secret(name: &str, value: &str) -> bool {
    let name = name.to_ascii_uppercase();
    value.len() >= MIN_SECRET_LEN
        && !value.starts_with('/')
        && !value.bytes().all(|byte| byte.is_ascii_digit())
        && SECRET_WORDS.iter().any(|word| name.contains(word))
}

fn replace_all(haystack: &[u8], needle: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = memchr::memmem::find(rest, needle) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(REDACTED.as_bytes());
        rest = &rest[at + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Redacts a stream line by line: what [`Lines::feed`] returns is ready to
/// be written.
#[derive(Debug)]
pub struct Lines {
    redactor: Arc<Redactor>,
    held: Vec<u8>,
}

impl Lines {
    /// A stream redacted by `redactor`.
    pub fn new(redactor: Arc<Redactor>) -> Lines {
        Lines {
            redactor,
            held: Vec::new(),
        }
    }

    /// The redacted text of every line `chunk` completes (a line ends at
    /// `\n` or `\r`); the rest is held for the next call.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        let Some(last_end) = memchr::memrchr2(b'\n', b'\r', chunk) else {
            self.held.extend_from_slice(chunk);
            if self.held.len() > MAX_HELD_BYTES {
                return self.finish();
            }
            return Vec::new();
        };
        let (complete, rest) = chunk.split_at(last_end + 1);
        let ready = if self.held.is_empty() {
            self.redactor.redact_bytes(complete).into_owned()
        } else {
            self.held.extend_from_slice(complete);
            let ready = self.redactor.redact_bytes(&self.held).into_owned();
            self.held.clear();
            ready
        };
        self.held.extend_from_slice(rest);
        ready
    }

    /// The redacted text of what is held (the stream's last, unfinished
    /// line).
    pub fn finish(&mut self) -> Vec<u8> {
        let ready = self.redactor.redact_bytes(&self.held).into_owned();
        self.held.clear();
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor() -> Redactor {
        Redactor::default().with([
            ("MY_API_KEY".to_owned(), "hunter2-very-secret".to_owned()),
            ("GITHUB_TOKEN".to_owned(), "tok-12345678".to_owned()),
            ("SSH_AUTH_SOCK".to_owned(), "/tmp/agent.sock".to_owned()),
            ("AUTH".to_owned(), "1".to_owned()),
            ("HOME".to_owned(), "not-a-secret-at-all".to_owned()),
        ])
    }

    #[test]
    fn secret_values_and_key_shapes_are_replaced_and_the_rest_kept() {
        let redactor = redactor();
        let text = "key=hunter2-very-secret tok-12345678 home=not-a-secret-at-all sock=/tmp/agent.sock\n\
                    openai sk-proj-abcdefghijklmnopqrstuv1234 google AIzaSyA1234567890abcdefghijklmnopqrstuv \
                    gh ghp_abcdefghijklmnopqrstuvwxyz0123456789 aws AKIAABCDEFGHIJKLMNOP \
                    Authorization: Bearer abcdef0123456789abcdef.x\n";
        let redacted = redactor.redact(text);
        for secret in [
            "hunter2",
            "tok-12345678",
            "sk-proj",
            "AIzaSy",
            "ghp_",
            "AKIAAB",
            "abcdef0123456789",
        ] {
            assert!(!redacted.contains(secret), "{secret} in {redacted}");
        }
        for kept in [
            "not-a-secret-at-all",
            "/tmp/agent.sock",
            "openai",
            "Authorization:",
        ] {
            assert!(redacted.contains(kept), "{kept} lost from {redacted}");
        }
        assert_eq!(redactor.redact("nothing here"), "nothing here");
        assert!(matches!(redactor.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_split_across_reads_is_still_found() {
        let mut lines = Lines::new(Arc::new(redactor()));
        let mut out = lines.feed(b"first line\nthe key is hunter2-ve");
        assert_eq!(out, b"first line\n");
        out.extend(lines.feed(b"ry-secret, and\nlast without end sk-"));
        out.extend(lines.feed(b"abcdefghijklmnopqrstuvwxyz"));
        out.extend(lines.finish());
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(
            text,
            "first line\nthe key is [redacted], and\nlast without end [redacted]"
        );
    }

    #[test]
    fn a_line_that_never_ends_is_written_once_it_is_long() {
        let mut lines = Lines::new(Arc::new(Redactor::default()));
        let mut out = Vec::new();
        for _ in 0..100 {
            out.extend(lines.feed(&[b'x'; 1024]));
        }
        assert!(out.len() >= MAX_HELD_BYTES, "{}", out.len());
        out.extend(lines.finish());
        assert_eq!(out.len(), 100 * 1024);
    }

    #[test]
    fn bytes_that_are_not_utf_8_keep_their_bytes() {
        let redactor = redactor();
        let bytes = b"\xff\xfe hunter2-very-secret \xff";
        assert_eq!(
            redactor.redact_bytes(bytes).as_ref(),
            b"\xff\xfe [redacted] \xff"
        );
        assert_eq!(redactor.redact_bytes(b"\xff plain").as_ref(), b"\xff plain");
    }
}
