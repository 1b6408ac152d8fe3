//! The tree a YAML document is read into: [`Node`]s with their [`Span`]s,
//! and what the checks ask of them (lookups, Python's truthiness and
//! `str()`).

use crate::span::Span;

/// A YAML value with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub value: Value,
    /// Where the value was written.
    pub span: Span,
}

/// The value of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `~`, `null` or an empty value.
    Null,
    /// `true` or `false` (YAML 1.2: `yes`/`no` are strings).
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string, quoted or plain.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in source order.
    Map(Vec<(Node, Node)>),
}

impl Value {
    /// The type's name as the reference engine prints it (Python's type names).
    pub fn python_type(&self) -> &'static str {
        match self {
            Value::Null => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Seq(_) => "list",
            Value::Map(_) => "dict",
        }
    }

    /// A human name for the type, used in baton's own messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

impl Node {
    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(text) => Some(text),
            _ => None,
        }
    }

    /// The entries, if this is a mapping.
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The items, if this is a sequence.
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(items) => Some(items),
            _ => None,
        }
    }

    /// Whether this is null.
    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Null)
    }

    /// Looks a key up in a mapping (string keys only).
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, value)| value)
    }

    /// Moves a key's value out of a mapping, leaving null in its place.
    pub fn take(&mut self, key: &str) -> Option<Node> {
        let Value::Map(entries) = &mut self.value else {
            return None;
        };
        let (_, value) = entries
            .iter_mut()
            .find(|(name, _)| name.as_str() == Some(key))?;
        let span = value.span;
        Some(std::mem::replace(
            value,
            Node {
                value: Value::Null,
                span,
            },
        ))
    }

    /// Looks a key up in a mapping and returns the key node too.
    pub fn entry(&self, key: &str) -> Option<(&Node, &Node)> {
        self.as_map()?
            .iter()
            .find(|(name, _)| name.as_str() == Some(key))
            .map(|(name, value)| (name, value))
    }

    /// Python's truthiness, which the reference engine applies to flags.
    pub fn is_truthy(&self) -> bool {
        match &self.value {
            Value::Null => false,
            Value::Bool(flag) => *flag,
            Value::Int(number) => *number != 0,
            Value::Float(number) => *number != 0.0,
            Value::Str(text) => !text.is_empty(),
            Value::Seq(items) => !items.is_empty(),
            Value::Map(entries) => !entries.is_empty(),
        }
    }

    /// The value as Python's `str()` would print it; the reference engine
    /// stringifies parameter values and versions this way.
    pub fn python_str(&self) -> String {
        let mut out = String::new();
        self.write_python(&mut out, false);
        out
    }

    fn write_python(&self, out: &mut String, nested: bool) {
        match &self.value {
            Value::Null => out.push_str("None"),
            Value::Bool(true) => out.push_str("True"),
            Value::Bool(false) => out.push_str("False"),
            Value::Int(number) => out.push_str(&number.to_string()),
            Value::Float(number) => out.push_str(&python_float(*number)),
            Value::Str(text) if nested => out.push_str(&python_repr_str(text)),
            Value::Str(text) => out.push_str(text),
            Value::Seq(items) => {
                out.push('[');
                for (position, item) in items.iter().enumerate() {
                    if position > 0 {
                        out.push_str(", ");
                    }
                    item.write_python(out, true);
                }
                out.push(']');
            }
            Value::Map(entries) => {
                out.push('{');
                for (position, (key, value)) in entries.iter().enumerate() {
                    if position > 0 {
                        out.push_str(", ");
                    }
                    key.write_python(out, true);
                    out.push_str(": ");
                    value.write_python(out, true);
                }
                out.push('}');
            }
        }
    }
}

fn python_float(number: f64) -> String {
    if number.is_nan() {
        "nan".to_owned()
    } else if number.is_infinite() {
        if number > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else if number.fract() == 0.0 && number.abs() < 1e16 {
        format!("{number:.1}")
    } else {
        format!("{number}")
    }
}

fn python_repr_str(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for character in text.chars() {
        match character {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
