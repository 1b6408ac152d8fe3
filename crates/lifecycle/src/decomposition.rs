//! Reading `DECOMPOSITION.md`: the sub-tasks a task is split into.
//!
//! The format: every list item that is not indented (a line starting with
//! `-`, `*`, `+`, `1.` or `1)`) is one sub-task. Its name is the text before
//! the first `:` (kebab-cased; the whole item when there is no `:`), and the
//! whole item is its description. Indented lines and other text are notes
//! and are ignored, so a sub-task may carry details below its line.

use crate::verdict::{kebab, unique_name};

/// Sub-tasks beyond this many are an error: a decomposition is for a few
/// pieces a person can follow.
pub const MAX_SUB_TASKS: usize = 50;

/// One sub-task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTask {
    /// Its short name, unique in the list (the folder is `{parent}-{name}`).
    pub name: String,
    /// The item's text.
    pub description: String,
}

/// Why a decomposition cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No list item.
    #[error(
        "read the decomposition: it lists no sub-tasks (one unindented `- name: what` line each)"
    )]
    Empty,
    /// Too many items.
    #[error("read the decomposition: {count} sub-tasks, more than the {MAX_SUB_TASKS} allowed")]
    TooMany {
        /// How many were listed.
        count: usize,
    },
}

/// Parses the text of a `DECOMPOSITION.md`.
pub fn parse(text: &str) -> Result<Vec<SubTask>, Error> {
    let items: Vec<String> = text.lines().filter_map(top_item).collect();
    if items.is_empty() {
        return Err(Error::Empty);
    }
    if items.len() > MAX_SUB_TASKS {
        return Err(Error::TooMany { count: items.len() });
    }
    let mut out: Vec<SubTask> = Vec::new();
    for (n, item) in items.into_iter().enumerate() {
        let head = item.split_once(':').map_or(item.as_str(), |(head, _)| head);
        let mut base = kebab(head);
        if base.is_empty() {
            base = format!("sub-{}", n + 1);
        }
        // Short names keep `{parent}-{name}` folders readable.
        base.truncate(40);
        let base = base.trim_end_matches('-').to_owned();
        let name = unique_name(&base, |name| out.iter().any(|sub| sub.name == name));
        out.push(SubTask {
            name,
            description: item,
        });
    }
    Ok(out)
}

/// The text of an unindented list item (same item syntax as a verdict's
/// lists).
fn top_item(line: &str) -> Option<String> {
    if line.starts_with([' ', '\t']) {
        return None;
    }
    crate::verdict::list_item(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        parse(text)
            .expect("parses")
            .into_iter()
            .map(|sub| sub.name)
            .collect()
    }

    #[test]
    fn items_become_sub_tasks() {
        let text = "\
# Decomposition

Split by layer.

- Login form: the page and its validation
  - detail, not a sub-task
* **Token store**: refresh and expiry
1. session cleanup
2) Login form: a second one
";
        assert_eq!(
            names(text),
            [
                "login-form",
                "token-store",
                "session-cleanup",
                "login-form-2"
            ]
        );
        let subs = parse(text).expect("parses");
        assert_eq!(subs[1].description, "Token store: refresh and expiry");
    }

    #[test]
    fn errors_and_fallbacks() {
        assert_eq!(parse("# nothing\n\n  - indented\n"), Err(Error::Empty));
        let many: String = (0..=MAX_SUB_TASKS).map(|n| format!("- s{n}\n")).collect();
        assert_eq!(
            parse(&many),
            Err(Error::TooMany {
                count: MAX_SUB_TASKS + 1
            })
        );
        assert_eq!(names("- !!!: odd\n"), ["sub-1"]);
        assert_eq!(names(&format!("- {}\n", "a".repeat(90)))[0].len(), 40);
    }
}
