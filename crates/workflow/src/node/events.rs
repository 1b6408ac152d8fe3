//! The [`Node`] tree built straight from the YAML parser's events, for the
//! documents that need nothing more.
//!
//! serde-saphyr hands every value to a visitor through serde's layers: a
//! `Spanned` wrapper per node, each key recorded for its duplicate check,
//! every plain scalar tried as a boolean, an integer and a float; building
//! the tree from the events directly takes a large part of that off every
//! `baton run` (bench/README.md), which cannot record a run before its
//! workflow is compiled.
//!
//! This builder takes the plain subset real workflows are written in: block
//! and flow collections, quoted and block scalars, plain scalars that are
//! strings, null, a boolean, or a simple decimal integer or float, and
//! string keys, each once per mapping. It gives up on anything else (an
//! anchor, an alias, a tag, a directive, a merge key, a non-string or
//! repeated key, a number in any other spelling, a syntax error, a budget
//! close to its limit) and [`super::parse`] then reads the document the
//! full way, which yields the same tree or the error. Either way a document
//! reads the same: `same_tree_as_serde_saphyr` in the tests checks it over
//! every workflow the tests and the compat corpus hold.

use std::borrow::Cow;
use std::collections::HashSet;

use granit_parser::{Event, Parser, ScalarStyle, Span as ParserSpan};

use super::limits::{MAX_DEPTH, MAX_EVENTS};
use super::tree::{Node, Value};
use crate::span::Span;

/// A tenth below the full parse's budgets (`super::parse`), so a document
/// near one is left to it and fails or passes there. Events bound nodes
/// too: every node is an event, and the node budget is as large. Half the
/// budget made a 100 000-stage workflow (1.6 million events) be read twice.
const MAX_COUNT: usize = MAX_EVENTS - MAX_EVENTS / 10;
const MAX_SCALAR_BYTES: usize = 32 * 1024 * 1024;

/// A mapping with more keys than this checks repeats with a set.
const LINEAR_KEY_CHECK: usize = 16;

/// A collection being read.
enum Open {
    Seq(Node, Vec<Node>),
    Map(Map),
}

struct Map {
    node: Node,
    entries: Vec<(Node, Node)>,
    key: Option<Node>,
    /// The keys so far, once there are more than [`LINEAR_KEY_CHECK`].
    seen: Option<HashSet<String>>,
}

impl Map {
    /// Takes a key; `None` if it is not a string or was seen before.
    fn key(&mut self, key: Node) -> Option<()> {
        let Value::Str(text) = &key.value else {
            return None;
        };
        if text == "<<" {
            return None;
        }
        let repeated = match &mut self.seen {
            Some(seen) => !seen.insert(text.clone()),
            None => {
                let repeated = self
                    .entries
                    .iter()
                    .any(|(seen, _)| seen.as_str() == Some(text));
                if !repeated && self.entries.len() >= LINEAR_KEY_CHECK {
                    let mut seen: HashSet<String> = self
                        .entries
                        .iter()
                        .filter_map(|(seen, _)| seen.as_str().map(str::to_owned))
                        .collect();
                    seen.insert(text.clone());
                    self.seen = Some(seen);
                }
                repeated
            }
        };
        if repeated {
            return None;
        }
        self.key = Some(key);
        Some(())
    }
}

/// The document's tree, or `None` when it needs the full parse.
pub(super) fn parse(text: &str) -> Option<Node> {
    let options = granit_parser::options! {
        // As serde-saphyr sets them from the budget `super::parse` gives.
        simple_key_max_lookahead: 1024,
        flow_nesting_limit: MAX_DEPTH,
        block_nesting_limit: granit_parser::Options::default()
            .block_nesting_limit
            .max(MAX_DEPTH + 1),
        emit_comments: false,
    };
    let mut events = Parser::new_from_str_with_options(text, options);
    let mut next = || events.next_event().and_then(Result::ok);
    if !matches!(next()?.0, Event::StreamStart) {
        return None;
    }
    if !matches!(next()?.0, Event::DocumentStart(_, None)) {
        return None;
    }
    let mut open: Vec<Open> = Vec::new();
    let mut root = None;
    let (mut count, mut scalar_bytes) = (2_usize, 0_usize);
    while root.is_none() {
        let (event, place) = next()?;
        count += 1;
        if count > MAX_COUNT {
            return None;
        }
        let done = match event {
            Event::Scalar(value, style, 0, None) => {
                scalar_bytes += value.len();
                if scalar_bytes > MAX_SCALAR_BYTES {
                    return None;
                }
                Node {
                    value: scalar(value, style)?,
                    span: span(&place)?,
                }
            }
            Event::SequenceStart(_, 0, None) | Event::MappingStart(_, 0, None)
                if open.len() >= MAX_DEPTH - 1 =>
            {
                return None;
            }
            Event::SequenceStart(_, 0, None) => {
                let node = container(&place)?;
                open.push(Open::Seq(node, Vec::new()));
                continue;
            }
            Event::MappingStart(_, 0, None) => {
                open.push(Open::Map(Map {
                    node: container(&place)?,
                    entries: Vec::new(),
                    key: None,
                    seen: None,
                }));
                continue;
            }
            // Collections are shrunk as they close: what doubling left
            // spare in a large workflow's many small mappings adds up.
            Event::SequenceEnd => match open.pop()? {
                Open::Seq(mut node, mut items) => {
                    items.shrink_to_fit();
                    node.value = Value::Seq(items);
                    node
                }
                Open::Map(_) => return None,
            },
            Event::MappingEnd => match open.pop()? {
                Open::Map(Map {
                    mut node,
                    mut entries,
                    key: None,
                    ..
                }) => {
                    entries.shrink_to_fit();
                    node.value = Value::Map(entries);
                    node
                }
                _ => return None,
            },
            // Anchors, aliases, tags and anything newer.
            _ => return None,
        };
        match open.last_mut() {
            None => root = Some(done),
            Some(Open::Seq(_, items)) => items.push(done),
            Some(Open::Map(map)) => match map.key.take() {
                Some(key) => map.entries.push((key, done)),
                None => map.key(done)?,
            },
        }
    }
    // One document, and nothing after it.
    if !matches!(next()?.0, Event::DocumentEnd) || !matches!(next()?.0, Event::StreamEnd) {
        return None;
    }
    root
}

/// Where an event sits, as [`Node::span`] gives it.
fn span(place: &ParserSpan) -> Option<Span> {
    let start = place.start.byte_offset()?;
    let end = place.end.byte_offset()?;
    Some(Span {
        offset: start,
        len: end.checked_sub(start)?,
        line: u32::try_from(place.start.line()).ok()?,
        column: u32::try_from(place.start.col() + 1).ok()?,
    })
}

/// An empty collection at `place`, filled in when it closes.
fn container(place: &ParserSpan) -> Option<Node> {
    Some(Node {
        value: Value::Null,
        span: span(place)?,
    })
}

/// A scalar's value, resolved as serde-saphyr resolves it with YAML 1.2
/// booleans (`super::parse`), or `None` for a spelling left to it.
fn scalar(text: Cow<'_, str>, style: ScalarStyle) -> Option<Value> {
    if !matches!(style, ScalarStyle::Plain) {
        return Some(Value::Str(text.into_owned()));
    }
    Some(match &*text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        plain => match plain.as_bytes() {
            // A sign, or a number in some spelling.
            [b'+' | b'-', ..] => return None,
            [b'0'..=b'9', ..] => number(plain)?,
            // `.5`, `.inf`, `.NaN` and the like; `./run.sh` is a string.
            [b'.'] | [b'.', b'0'..=b'9', ..] => return None,
            [b'.', ..] if is_non_finite(plain) => return None,
            _ => Value::Str(text.into_owned()),
        },
    })
}

/// Whether `.inf`/`.nan` in any case starts `plain`.
fn is_non_finite(plain: &str) -> bool {
    plain.get(..4).is_some_and(|start| {
        start.eq_ignore_ascii_case(".inf") || start.eq_ignore_ascii_case(".nan")
    })
}

/// `0`, `12`, `1.5`: decimal digits with no leading zero, few enough to be
/// exact; any other number is left to the full parse.
fn number(plain: &str) -> Option<Value> {
    let (whole, fraction) = match plain.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (plain, None),
    };
    let digits = |part: &str, most: usize| {
        !part.is_empty() && part.len() <= most && part.bytes().all(|byte| byte.is_ascii_digit())
    };
    if !digits(whole, 15) || (whole.len() > 1 && whole.starts_with('0')) {
        return None;
    }
    match fraction {
        None => plain.parse().ok().map(Value::Int),
        Some(fraction) if digits(fraction, 15) => plain.parse().ok().map(Value::Float),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::parse_fully;
    use super::parse;

    /// Both ways of reading `text`: this builder's tree, if it took the
    /// document, must be the one serde-saphyr builds.
    fn same_tree(text: &str) -> bool {
        let Some(fast) = parse(text) else {
            return false;
        };
        let full = parse_fully(text)
            .unwrap_or_else(|error| panic!("only the builder accepts {text:?}: {}", error.message));
        assert_eq!(fast, full, "the trees differ for {text:?}");
        true
    }

    #[test]
    fn a_document_well_within_the_event_budget_is_read_once() {
        let text = "- x\n".repeat(super::MAX_COUNT - 10);
        assert!(parse(&text).is_some(), "left to serde-saphyr");
    }

    #[test]
    fn collections_hold_no_spare_room() {
        use super::super::Value;
        let root = parse("a: [1, 2, 3]\nb: 1\nc: 2\n").expect("a plain document");
        let Value::Map(entries) = &root.value else {
            panic!("a mapping at the root");
        };
        assert_eq!((entries.len(), entries.capacity()), (3, 3));
        let Value::Seq(items) = &entries[0].1.value else {
            panic!("a sequence under a");
        };
        assert_eq!((items.len(), items.capacity()), (3, 3));
    }

    #[test]
    fn plain_documents_build_the_tree_serde_saphyr_builds() {
        for text in [
            "a: 1\nb: 1.5\nc: 0\nd: 0.25\ne: x y\n",
            "a: true\nb: False\nc: TRUE\nd: yes\ne: no\nf: on\n",
            "a:\nb: ~\nc: null\nd: NULL\ne: ''\nf: \"null\"\n",
            "a: 'quoted: 1'\nb: \"esc\\ttab\"\nc: |\n  line\n  two\nd: >\n  folded\n  text\n",
            "a: [1, 2.5, x, {b: c}]\nd: {e: [], f: {}}\n",
            "- a\n- - b\n  - c\n- {d: e}\n",
            "---\na: ./run.sh\nb: ._x\nd: 'x'\n...\n",
            "name: w\nstages:\n  - name: s0\n    script: |\n      echo \"{workspace}\" > out.txt\n",
            "plain scalar at the root",
            "k: \u{e9}t\u{e9} \u{1f600}\n\u{e9}: 2\n",
        ] {
            assert!(same_tree(text), "the builder left {text:?} to serde-saphyr");
        }
    }

    #[test]
    fn other_spellings_are_left_to_serde_saphyr() {
        for text in [
            "a: 007\n",
            "a: 1e3\n",
            "a: 0x1F\n",
            "a: 1_000\n",
            "a: -1\n",
            "a: +1\n",
            "a: -\n",
            "a: .5\n",
            "a: .inf\n",
            "a: .NaN\n",
            "a: 1.2.3\n",
            "a: 12:30\n",
            "a: 1234567890123456789012\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "<<: {a: 1}\nb: 2\n",
            "? [a]\n: b\n",
            "1: a\n",
            "true: a\n",
            "~: a\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n---\nb: 2\n",
            "",
        ] {
            assert!(!same_tree(text), "the builder took {text:?}");
        }
    }

    #[test]
    fn errors_and_repeated_keys_come_from_serde_saphyr() {
        let mut many = String::new();
        for key in 0..40 {
            many.push_str(&format!("k{key}: {key}\n"));
        }
        for text in [
            "a: 1\na: 2\n".to_owned(),
            "{a: 1, a: 2}\n".to_owned(),
            format!("{many}k7: again\n"),
            "a: b: c\n".to_owned(),
            "a: [1, 2\n".to_owned(),
            "a:\n  - x\n - y\n".to_owned(),
        ] {
            assert!(parse(&text).is_none(), "the builder took {text:?}");
            assert!(parse_fully(&text).is_err(), "{text:?} is not an error");
        }
        assert!(same_tree(&many), "the builder left 40 distinct keys");
    }

    fn yaml_files(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                yaml_files(&path, found);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "yaml" || extension == "yml")
            {
                found.push(path);
            }
        }
    }

    /// Every workflow, fragment and case in the tests, the examples and
    /// the compat corpus reads the same both ways.
    #[test]
    fn same_tree_as_serde_saphyr() {
        let root = baton_test_support::workspace_root();
        let mut files = Vec::new();
        yaml_files(&root.join("crates"), &mut files);
        yaml_files(&root.join("examples"), &mut files);
        if let Some(compat) = baton_test_support::compat_dir() {
            yaml_files(&compat, &mut files);
        }
        files.retain(|path| !path.components().any(|part| part.as_os_str() == "target"));
        let mut built = 0;
        for path in &files {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            if same_tree(&text) {
                built += 1;
            }
        }
        assert!(
            built * 10 >= files.len() * 9,
            "the builder took only {built} of {} documents",
            files.len()
        );
        assert!(same_tree(
            &std::fs::read_to_string(root.join("examples/quickstart/workflow.yaml")).unwrap()
        ));
    }
}
