//! Typed accessors: strings, lists, booleans and keywords, each failing with
//! a message that names the field and what it accepts.

use super::{Reader, describe};
use crate::diagnostic::{Diagnostic, suggest};
use crate::node::{Node, Span, Value};
use crate::schema::Spanned;

impl Reader<'_> {
    pub(super) fn error(
        &self,
        code: &'static str,
        message: impl Into<String>,
        span: Span,
    ) -> Diagnostic {
        Diagnostic::error(code, message).at(self.file, span)
    }
    pub(super) fn keyword<T>(
        &self,
        node: &Node,
        parse: impl Fn(&str) -> Option<T>,
        names: &[&str],
        message: impl Fn() -> String,
    ) -> Result<T, Diagnostic> {
        let text = node.python_str();
        if let (Some(text), true) = (node.as_str(), true)
            && let Some(value) = parse(text)
        {
            return Ok(value);
        }
        let mut diagnostic = self
            .error(
                "schema::enum",
                format!("{} '{text}' (valid: {})", message(), names.join(", ")),
                node.span,
            )
            .with_label("not one of the accepted values");
        if let Some(near) = suggest(&text, names) {
            diagnostic = diagnostic.with_help(format!("did you mean `{near}`?"));
        }
        Err(diagnostic)
    }
    /// A type error at `node` with `message` unless it is a mapping.
    pub(super) fn mapping(
        &self,
        node: &Node,
        message: impl Into<String>,
    ) -> Result<(), Diagnostic> {
        match node.as_map() {
            Some(_) => Ok(()),
            None => Err(self.error("schema::type", message, node.span)),
        }
    }
    /// The value of `key`, or a missing-key error at `node` with `message`
    /// when it is absent or null.
    pub(super) fn present<'n>(
        &self,
        node: &'n Node,
        key: &str,
        message: impl Into<String>,
    ) -> Result<&'n Node, Diagnostic> {
        node.get(key)
            .filter(|value| !value.is_null())
            .ok_or_else(|| self.error("schema::missing-key", message, node.span))
    }
    pub(super) fn required_string(
        &self,
        node: &Node,
        key: &str,
        what: &str,
        stage: &str,
    ) -> Result<Spanned<String>, Diagnostic> {
        let value = node.get(key).expect("caller checked presence");
        self.string(value, what, stage, key)
    }
    pub(super) fn optional_string(
        &self,
        node: &Node,
        key: &str,
        what: &str,
        stage: &str,
    ) -> Result<Option<Spanned<String>>, Diagnostic> {
        match node.get(key) {
            None => Ok(None),
            Some(value) if value.is_null() => Ok(None),
            Some(value) => self.string(value, what, stage, key).map(Some),
        }
    }
    pub(super) fn string(
        &self,
        value: &Node,
        what: &str,
        stage: &str,
        field: &str,
    ) -> Result<Spanned<String>, Diagnostic> {
        match &value.value {
            Value::Str(text) => Ok(Spanned::new(text.clone(), value.span)),
            other => Err(self
                .error(
                    "schema::type",
                    format!("{what} must be a string, got {}", other.python_type()),
                    value.span,
                )
                .for_field(stage, field)
                .with_label(format!("this is {}", other.kind_name()))
                .with_help("quote the value to make it a string")),
        }
    }
    pub(super) fn list<'n>(
        &self,
        node: &'n Node,
        what: &str,
        stage: &str,
        field: &str,
    ) -> Result<&'n [Node], Diagnostic> {
        node.as_seq().ok_or_else(|| {
            self.error(
                "schema::type",
                format!("{what} must be a list, got {}", node.value.python_type()),
                node.span,
            )
            .for_field(stage, field)
            .with_label(format!("this is {}", node.value.kind_name()))
        })
    }
    /// A list of names or paths. A string is an error, not a list of its
    /// characters as in the reference engine.
    pub(super) fn name_list(
        &self,
        node: &Node,
        key: &str,
        owner: &str,
        stage: &str,
    ) -> Result<Vec<Spanned<String>>, Diagnostic> {
        let Some(value) = node.get(key).filter(|value| !value.is_null()) else {
            return Ok(Vec::new());
        };
        if let Value::Str(text) = &value.value {
            return Err(self
                .error(
                    "schema::type",
                    format!("{owner} '{key}' must be a list, got str"),
                    value.span,
                )
                .for_field(stage, key)
                .with_label("this is a string")
                .with_help(format!("write `{key}: [{text}]`")));
        }
        let items = self.list(value, &format!("{owner} '{key}'"), stage, key)?;
        items
            .iter()
            .map(|item| match item.value {
                Value::Str(_) | Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                    Ok(Spanned::new(item.python_str(), item.span))
                }
                _ => Err(self
                    .error(
                        "schema::type",
                        format!(
                            "{owner} '{key}' items must be strings, got {}",
                            item.value.python_type()
                        ),
                        item.span,
                    )
                    .for_field(stage, key)),
            })
            .collect()
    }
    /// A boolean. Strings such as `"false"` or `"no"` are errors, not truthy.
    pub(super) fn flag(
        &self,
        value: &Node,
        what: &str,
        stage: &str,
        field: &str,
    ) -> Result<bool, Diagnostic> {
        match value.value {
            Value::Bool(flag) => Ok(flag),
            Value::Null => Ok(false),
            _ => {
                let mut diagnostic = self
                    .error(
                        "schema::type",
                        format!("{what} must be true or false, got {}", describe(value)),
                        value.span,
                    )
                    .for_field(stage, field)
                    .with_label("not a boolean");
                let suggestion = match value.as_str().map(str::to_ascii_lowercase).as_deref() {
                    Some("false" | "no" | "off" | "n") => Some("false"),
                    Some("true" | "yes" | "on" | "y") => Some("true"),
                    _ => None,
                };
                if let Some(suggestion) = suggestion {
                    diagnostic = diagnostic
                        .with_help(format!("write `{field}: {suggestion}`: only unquoted true and false are booleans (YAML 1.2 reads yes, no, on and off as text)"));
                }
                Err(diagnostic)
            }
        }
    }
    pub(super) fn unknown_keys(&mut self, node: &Node, known: &[&str], context: &str, stage: &str) {
        let Some(entries) = node.as_map() else { return };
        for (key, _) in entries {
            let name = key.python_str();
            if known.contains(&name.as_str()) {
                continue;
            }
            let mut warning = Diagnostic::warning(
                "schema::unknown-key",
                format!("unknown key '{name}' in {context}"),
            )
            .at(self.file, key.span)
            .for_field(stage, name.clone())
            .with_label("not a key baton knows");
            warning = match suggest(&name, known) {
                Some(near) => warning.with_help(format!("did you mean `{near}`?")),
                None => warning.with_help(format!("known keys: {}", known.join(", "))),
            };
            self.warnings.push(warning);
        }
    }
}
