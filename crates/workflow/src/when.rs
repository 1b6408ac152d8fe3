//! `when` conditions: `"<left>" contains "<value>"` and
//! `"<left>" does not contain "<value>"`.
//!
//! The expression is trimmed both when it is checked and when it is
//! evaluated, so a condition written as a YAML block scalar works (the
//! reference engine accepts it at compile time and then crashes at run time).

use crate::template;

/// A parsed condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct When {
    /// The left-hand text, placeholders not yet substituted.
    pub left: String,
    /// `does not contain` rather than `contains`.
    pub negated: bool,
    /// The text looked for.
    pub value: String,
}

/// The forms a `when` may take, for error messages.
pub const FORMS: &str =
    "'\"{param}\" contains \"value\"' and '\"{param}\" does not contain \"value\"'";

impl When {
    /// Parses a condition; `None` when it has neither accepted form.
    pub fn parse(expression: &str) -> Option<When> {
        let text = expression.trim();
        let (left, rest) = quoted(text)?;
        let rest = rest.trim_start();
        let (negated, rest) = if let Some(rest) = rest.strip_prefix("does not contain") {
            (true, rest)
        } else {
            (false, rest.strip_prefix("contains")?)
        };
        if !rest.starts_with(char::is_whitespace) {
            return None;
        }
        let (value, rest) = quoted(rest.trim_start())?;
        rest.is_empty().then(|| When {
            left: left.to_owned(),
            negated,
            value: value.to_owned(),
        })
    }

    /// Evaluates the condition with the given parameter values.
    pub fn evaluate<'v>(&self, lookup: impl Fn(&str) -> Option<&'v str>) -> bool {
        let left = template::render(&self.left, lookup);
        left.contains(self.value.as_str()) != self.negated
    }

    /// The placeholders of the left-hand side.
    pub fn placeholders(&self) -> Vec<&str> {
        template::placeholders(&self.left, |_| true)
    }
}

fn quoted(text: &str) -> Option<(&str, &str)> {
    let inner = text.strip_prefix('"')?;
    let end = inner.find('"')?;
    Some((&inner[..end], &inner[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_two_forms_only() {
        let when = When::parse(r#""{mode}" contains "fast""#).unwrap();
        assert_eq!(
            (when.left.as_str(), when.negated, when.value.as_str()),
            ("{mode}", false, "fast")
        );
        assert!(
            When::parse(r#""{mode}" does not contain "fast""#)
                .unwrap()
                .negated
        );
        assert!(When::parse("\"{m}\" contains \"a\"\n").is_some());
        for bad in [
            "only on fridays",
            r#""{x}" == "y""#,
            r#""{x}" contains y"#,
            r#""a" containsx "b""#,
            r#""a" contains "b" extra"#,
        ] {
            assert_eq!(When::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn evaluates_substring_containment() {
        let when = When::parse(r#""{mode}" contains "fa""#).unwrap();
        assert!(when.evaluate(|_| Some("fast")));
        assert!(!when.evaluate(|_| Some("slow")));
        let negated = When::parse(r#""{mode}" does not contain "fa""#).unwrap();
        assert!(negated.evaluate(|_| Some("slow")));
    }
}
