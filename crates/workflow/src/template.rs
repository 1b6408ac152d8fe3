//! The `{placeholder}` renderer.
//!
//! One pass over the text: each `{name}` whose name has a value is replaced by
//! it; everything else, including unknown placeholders and the literal
//! `{{ … }}` that real workflows contain, is copied byte for byte.
//! Substituted values are never scanned again, so a value that itself
//! contains `{other}` stays as it is.

use std::borrow::Cow;

/// The longest placeholder name looked up; longer brace groups are text.
const MAX_NAME_LEN: usize = 128;

/// Replaces every `{name}` for which `lookup` has a value.
pub fn render<'t, 'v>(text: &'t str, lookup: impl Fn(&str) -> Option<&'v str>) -> Cow<'t, str> {
    if !text.contains('{') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 32);
    let mut rest = text;
    let mut changed = false;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name_end = after
            .find(['{', '}'])
            .filter(|end| after.as_bytes()[*end] == b'}');
        match name_end
            .filter(|end| *end <= MAX_NAME_LEN)
            .and_then(|end| lookup(&after[..end]).map(|value| (end, value)))
        {
            Some((end, value)) => {
                out.push_str(value);
                rest = &after[end + 1..];
                changed = true;
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// The names of all `{name}` placeholders in `text`, in order of appearance,
/// for which `accept` holds.
pub fn placeholders(text: &str, accept: impl Fn(&str) -> bool) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        if let Some(end) = after
            .find(['{', '}'])
            .filter(|end| after.as_bytes()[*end] == b'}')
        {
            let name = &after[..end];
            if accept(name) {
                names.push(name);
            }
        }
        rest = after;
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: &str) {
        let lookup = |name: &str| match name {
            "a" => Some("1"),
            "b" => Some("{a}"),
            "workspace" => Some("/ws"),
            _ => None,
        };
        assert_eq!(render(text, lookup), expected);
    }

    #[test]
    fn substitutes_known_names_once() {
        check("x {a} y", "x 1 y");
        check("{b}", "{a}");
        check("{a}{a}", "11");
        check("{workspace}/out", "/ws/out");
    }

    #[test]
    fn leaves_everything_else_byte_identical() {
        check("{{ \"type\": \"number\" }}", "{{ \"type\": \"number\" }}");
        check("{{.Ports}}", "{{.Ports}}");
        check("{nope} {a.b} { } {", "{nope} {a.b} { } {");
        check("{{a}}", "{1}");
        check("naïve — {a}", "naïve — 1");
    }

    #[test]
    fn lists_placeholders() {
        assert_eq!(
            placeholders("{a} {{b}} {c.d} {e", |_| true),
            vec!["a", "b", "c.d"]
        );
    }
}
