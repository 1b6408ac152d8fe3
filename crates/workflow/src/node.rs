//! A YAML document as a tree of nodes that remember where they came from.
//!
//! The workflow format is checked by hand rather than by serde derives: the
//! reference engine's check order and messages are part of the interface, and
//! a hand-written pass can point every problem at the exact key or value.
//! serde-saphyr does the YAML work (syntax, duplicate keys, alias limits) and
//! hands each value over wrapped in [`serde_saphyr::Spanned`].

use std::fmt;

mod events;
mod limits;
mod tree;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{Budget, Options, Spanned};

use crate::diagnostic::{MAX_SNIPPET_CHARS, line_column};

pub use crate::span::Span;
pub use limits::{MAX_DEPTH, MAX_EVENTS, MAX_REPLAYED_EVENTS};
pub use tree::{Node, Value};

/// Why a document could not be read as YAML.
#[derive(Debug)]
pub struct SyntaxError {
    /// The parser's message, without location or snippet.
    pub message: String,
    /// Where the parser stopped, when it knows.
    pub span: Option<Span>,
}

/// Parses one YAML document into a [`Node`] tree.
///
/// Duplicate keys are rejected and aliases, nodes and depth are bounded so
/// that a hostile document fails quickly instead of exhausting memory.
///
/// # Errors
///
/// Returns the parser's message and location for any syntax error, duplicate
/// key or exceeded limit.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    if let Some(span) = too_deep(text) {
        return Err(SyntaxError {
            message: format!("nesting exceeds the depth budget of {MAX_DEPTH} levels"),
            span: Some(span),
        });
    }
    match events::parse(text) {
        Some(node) => Ok(node),
        None => parse_fully(text),
    }
}

/// [`parse`] through serde-saphyr, for every document: its checks, limits
/// and messages.
fn parse_fully(text: &str) -> Result<Node, SyntaxError> {
    let mut budget = Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.flow_nesting_limit = MAX_DEPTH;
    budget.max_aliases = 1_000;
    budget.max_anchors = 10_000;
    budget.max_nodes = MAX_EVENTS;
    budget.max_total_scalar_bytes = 64 * 1024 * 1024;
    budget.max_events = MAX_EVENTS;
    let mut options = Options::default();
    options.budget = Some(budget);
    // Anchors and aliases are rare in workflows (the corpus has none); a
    // small replay budget makes an alias bomb fail at once instead of after
    // a million replayed events.
    options.alias_limits.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    options.strict_booleans = true;
    serde_saphyr::from_str_with_options::<Node>(text, options).map_err(|error| {
        let span = error.location().map(|location| {
            let span = Span::from_location(location);
            if span.line == 0 {
                return span;
            }
            // Parser errors carry line and column but not always a byte
            // offset: the snippet goes to the line and column (to the end
            // of that line when the column is past it), and the place
            // reported is the one the snippet shows.
            let offset = offset_of(text, span.line, span.column);
            let (line, column) = line_column(text, offset);
            Span {
                offset,
                len: if offset == span.offset { span.len } else { 0 },
                line,
                column,
            }
        });
        SyntaxError {
            message: clean_message(&error.without_snippet().to_string()),
            span,
        }
    })
}

/// Finds a line that opens more nested sequences (`- - - …`) than the depth
/// budget allows. The YAML scanner handles such a line recursively before the
/// budget sees any event, so thousands of dashes would exhaust a small thread
/// stack (2 MiB for a test or async worker thread) instead of failing cleanly.
fn too_deep(text: &str) -> Option<Span> {
    too_many_compact_sequences(text).or_else(|| too_many_open_brackets(text))
}

/// The most `[` and `{` that may be open at once. Brackets in plain text
/// (descriptions with `{{ … }}`) are counted too, so the bound is well above
/// [`MAX_DEPTH`]; it exists because the scanner, like for `- - -`, recurses on
/// flow collections before the budget applies.
const MAX_OPEN_BRACKETS: usize = 256;

fn too_many_open_brackets(text: &str) -> Option<Span> {
    let mut open = 0_usize;
    for (offset, byte) in text.bytes().enumerate() {
        match byte {
            b'[' | b'{' => {
                open += 1;
                if open > MAX_OPEN_BRACKETS {
                    let (line, column) = line_column(text, offset);
                    return Some(Span {
                        offset,
                        len: 1,
                        line,
                        column,
                    });
                }
            }
            b']' | b'}' => open = open.saturating_sub(1),
            _ => {}
        }
    }
    None
}

fn too_many_compact_sequences(text: &str) -> Option<Span> {
    let mut offset = 0;
    // A `\r` alone ends a line for the parser too.
    for line in text.split_inclusive(['\n', '\r']) {
        let mut rest = line.trim_start_matches(' ');
        let mut depth = 0;
        while let Some(after) = rest.strip_prefix('-') {
            if !after.starts_with([' ', '\t']) {
                break;
            }
            depth += 1;
            rest = after.trim_start_matches([' ', '\t']);
        }
        if depth > MAX_DEPTH {
            let (line, column) = line_column(text, offset);
            return Some(Span {
                offset,
                len: 0,
                line,
                column,
            });
        }
        offset += line.len();
    }
    None
}

/// The parser's message without the position (the snippet shows it) and
/// without advice about its own options.
fn clean_message(message: &str) -> String {
    let message = message.split(" at line ").next().unwrap_or(message);
    if message.starts_with("multiple YAML documents detected") {
        return "a second YAML document starts here; a workflow file holds one document (remove the `---` or `...` line, or split the file and use `include`)".to_owned();
    }
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest
            .split(", set DuplicateKeyPolicy")
            .next()
            .unwrap_or(rest);
        let key = bounded(key);
        return format!("duplicate key '{key}' (each key may appear once per mapping)");
    }
    if let Some(breach) = message.strip_prefix("budget breached: ") {
        let kind = breach.split([' ', '{']).next().unwrap_or(breach);
        return match kind {
            "Depth" => format!("nesting exceeds the depth budget of {MAX_DEPTH} levels"),
            "Events" => format!(
                "the document exceeds the budget of {MAX_EVENTS} YAML events (each use of an alias counts again)"
            ),
            "Aliases" | "Anchors" => {
                format!(
                    "the document exceeds the parser's budget for {}",
                    kind.to_ascii_lowercase()
                )
            }
            _ => format!(
                "the document exceeds a parser budget ({})",
                breach.replace(['{', '}'], "").trim()
            ),
        };
    }
    bounded(message)
}

/// At most [`MAX_SNIPPET_CHARS`] characters of a message that may quote
/// the file, like a snippet.
fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_SNIPPET_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The byte offset of a one-based line and (character) column.
fn offset_of(text: &str, line: u32, column: u32) -> usize {
    // Lines end as the parser ends them: `\n`, `\r\n` or `\r`.
    let line_start = match (line as usize).checked_sub(2) {
        None => 0,
        Some(breaks_before) => text
            .match_indices(['\n', '\r'])
            .filter(|(at, found)| *found == "\n" || text.as_bytes().get(at + 1) != Some(&b'\n'))
            .nth(breaks_before)
            .map_or(text.len(), |(at, _)| at + 1),
    };
    let line_end = text[line_start..]
        .find(['\n', '\r'])
        .map_or(text.len(), |at| line_start + at);
    let rest = &text[line_start..line_end];
    let within = rest
        .char_indices()
        .nth(column.saturating_sub(1) as usize)
        .map_or(rest.len(), |(offset, _)| offset);
    line_start + within
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(deserializer)?;
        Ok(Node {
            value: spanned.value,
            span: Span::from_location(spanned.referenced),
        })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Value, E> {
        Ok(Value::Bool(flag))
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Value, E> {
        Ok(Value::Int(number))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Value, E> {
        Ok(i64::try_from(number).map_or_else(|_| Value::Str(number.to_string()), Value::Int))
    }

    fn visit_i128<E: de::Error>(self, number: i128) -> Result<Value, E> {
        Ok(i64::try_from(number).map_or_else(|_| Value::Str(number.to_string()), Value::Int))
    }

    fn visit_u128<E: de::Error>(self, number: u128) -> Result<Value, E> {
        Ok(i64::try_from(number).map_or_else(|_| Value::Str(number.to_string()), Value::Int))
    }

    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Value, E> {
        Ok(Value::Float(number))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Value, E> {
        Ok(Value::Str(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Value, E> {
        Ok(Value::Str(text))
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Value, E> {
        Ok(Value::Str(String::from_utf8_lossy(bytes).into_owned()))
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(access.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = access.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(1024));
        while let Some(key) = access.next_key::<Node>()? {
            let value = access.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(Value::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_moves_a_value_out_and_leaves_null() {
        let mut node = parse("a: [1]\nb: x\n").unwrap();
        let taken = node.take("a").unwrap();
        assert_eq!(taken.as_seq().map(<[Node]>::len), Some(1));
        assert!(node.get("a").unwrap().is_null());
        assert_eq!(node.get("a").unwrap().span, taken.span);
        assert_eq!(node.get("b").unwrap().as_str(), Some("x"));
        assert!(node.take("c").is_none());
    }

    #[test]
    fn scalars_keep_their_types_and_places() {
        let node = parse("a: true\nb: 'true'\nc: 1.0\nd: no\ne:\nf: [x, 2]\n").unwrap();
        assert_eq!(node.get("a").unwrap().value, Value::Bool(true));
        assert_eq!(node.get("b").unwrap().value, Value::Str("true".into()));
        assert_eq!(node.get("c").unwrap().python_str(), "1.0");
        assert_eq!(node.get("d").unwrap().value, Value::Str("no".into()));
        assert!(node.get("e").unwrap().is_null());
        let f = node.get("f").unwrap();
        assert_eq!(f.python_str(), "['x', 2]");
        assert_eq!((f.span.line, f.span.column), (6, 4));
        let (key, _) = node.entry("b").unwrap();
        assert_eq!((key.span.line, key.span.column, key.span.offset), (2, 1, 8));
    }

    /// Every place a parse error reports is at the line and column of its
    /// offset, lines ending at `\n`, `\r\n` and a `\r` alone as in YAML.
    #[test]
    fn syntax_errors_are_placed_at_their_offset() {
        let brackets = format!("a: 1\nb: {}", "[".repeat(300));
        for text in [
            "name: crlfual}\r\r\ndescripti  - namo",
            "a: 1\rb: [\r\n",
            brackets.as_str(),
        ] {
            let error = parse(text).expect_err(text);
            let span = error.span.expect("a place");
            assert_eq!(
                (span.line, span.column),
                line_column(text, span.offset),
                "{text:?}: {span:?}"
            );
        }
        // Too many `- ` on a line that starts after a `\r`: the line is
        // found, as after a `\n`.
        // A place on the first line, given without a byte offset.
        let text = "na0Bme: crl\0\0\ton: \"1\"\r\ndescrirtion: d\r\n";
        let span = parse(text).expect_err("a NUL").span.expect("a place");
        assert_eq!((span.offset, span.line, span.column), (11, 1, 12));
        let dashes = format!("a: 1\r{}x", "- ".repeat(40));
        let span = parse(&dashes).expect_err("too deep").span.expect("a place");
        assert_eq!((span.offset, span.line, span.column), (5, 2, 1));
    }

    #[test]
    fn duplicate_keys_are_errors_with_a_place() {
        let error = parse("a: 1\nb:\n  x: 1\n  x: 2\n").unwrap_err();
        assert!(error.message.contains("duplicate"), "{}", error.message);
        let span = error.span.unwrap();
        assert_eq!(span.line, 4);
    }

    #[test]
    fn a_second_document_is_named_in_baton_s_words_at_its_place() {
        for (text, line) in [
            ("a: 1\n---\nb: 2\n", 3),
            ("---\n---\n", 2),
            ("a: 1\n...\nfoo\n", 3),
        ] {
            let error = parse(text).unwrap_err();
            assert!(
                error
                    .message
                    .starts_with("a second YAML document starts here")
                    && !error.message.contains("from_str"),
                "{text:?}: {}",
                error.message
            );
            assert_eq!(error.span.map(|span| span.line), Some(line), "{text:?}");
        }
    }
}
