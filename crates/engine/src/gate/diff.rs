//! What changed in a gate's outputs since its last decision: each output
//! now against the copy kept with the decision (see
//! [`super::artifact::snapshot`]), as a unified line diff by `similar`.

use std::time::Duration;

use baton_store::{DecidedOutput, GateDecisionRow};

use super::artifact::{KEPT_PER_OUTPUT, MISSING};

/// Longest a diff is worked on: past it `similar` gives a correct but
/// coarser diff, so hostile outputs cannot hold a page.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);

/// The decision a gate's outputs are compared with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Since {
    /// The gate's latest decision.
    pub decision: GateDecisionRow,
    /// Whether its outputs were kept (decisions recorded by an earlier
    /// baton have none: only "unchanged" or "not kept" can be said).
    pub kept: bool,
}

/// How one output differs from what was decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The same bytes.
    Unchanged,
    /// Different; the diff says how.
    Changed,
    /// Not there when decided on.
    Added,
    /// There when decided on, missing now.
    Removed,
    /// Different, but its text then was not kept.
    NotKept,
}

impl Change {
    /// `unchanged`, `changed`, `added`, `removed` or `not_kept`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Unchanged => "unchanged",
            Change::Changed => "changed",
            Change::Added => "added",
            Change::Removed => "removed",
            Change::NotKept => "not_kept",
        }
    }
}

/// One output's difference from what was decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputDiff {
    /// How it differs.
    pub change: Change,
    /// The unified line diff, decided on → now (`None` when unchanged or
    /// not kept).
    pub unified: Option<String>,
    /// Whether the diff covers only the start of the output (the copy kept
    /// with the decision, or the output now, is longer than what is kept).
    pub truncated: bool,
}

/// `path` now (its hash and text, `None` when missing) against `then`,
/// what the decision kept of it (`None`: not among the outputs decided on).
pub(crate) fn compare(now: (&str, Option<&str>), then: Option<&DecidedOutput>) -> OutputDiff {
    let (sha256, text) = now;
    let then_text = then.and_then(|kept| kept.content.as_deref());
    let existed = then.is_some_and(|kept| kept.sha256 != MISSING);
    let change = match (then, text) {
        (Some(kept), _) if kept.sha256 == sha256 => Change::Unchanged,
        (_, None) if !existed => Change::Unchanged,
        (_, Some(_)) if !existed => Change::Added,
        (Some(_), None) => Change::Removed,
        (Some(kept), Some(_)) if kept.content.is_none() => Change::NotKept,
        (None, _) => Change::Added,
        (Some(_), Some(_)) => Change::Changed,
    };
    let nothing_to_show = change == Change::Removed && then_text.is_none();
    if matches!(change, Change::Unchanged | Change::NotKept) || nothing_to_show {
        return OutputDiff {
            change,
            unified: None,
            truncated: false,
        };
    }
    // Compare like with like: the output now cut where the copy was.
    let limit = match then {
        Some(kept) if kept.truncated => then_text.map_or(0, str::len),
        _ => KEPT_PER_OUTPUT,
    };
    let now_text = text.map_or("", |text| cut(text, limit));
    let truncated =
        then.is_some_and(|kept| kept.truncated) || now_text.len() < text.map_or(0, str::len);
    OutputDiff {
        change,
        unified: Some(unified(then_text.unwrap_or(""), now_text)),
        truncated,
    }
}

/// `text` cut to at most `limit` bytes, at a character's start.
fn cut(text: &str, limit: usize) -> &str {
    &text[..text.floor_char_boundary(limit)]
}

/// The unified diff of two texts, by line, three lines of context.
pub(crate) fn unified(then: &str, now: &str) -> String {
    similar::TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(then, now)
        .unified_diff()
        .context_radius(3)
        .header("decided on", "now")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(sha256: &str, content: Option<&str>, truncated: bool) -> DecidedOutput {
        DecidedOutput {
            path: "outputs/plan.md".to_owned(),
            sha256: sha256.to_owned(),
            content: content.map(str::to_owned),
            truncated,
        }
    }

    #[test]
    fn a_changed_line_is_shown_as_removed_and_added() {
        let then = kept("h1", Some("- one\n- two\n"), false);
        let diff = compare(("h2", Some("- one\n- TWO\n")), Some(&then));
        assert_eq!(diff.change, Change::Changed);
        let unified = diff.unified.unwrap();
        assert!(
            unified.starts_with("--- decided on\n+++ now\n@@"),
            "{unified}"
        );
        assert!(unified.contains("\n-- two\n+- TWO\n"), "{unified}");
        assert!(!diff.truncated);
    }

    #[test]
    fn the_same_hash_is_unchanged_and_what_was_not_kept_says_so() {
        let then = kept("h1", Some("a\n"), false);
        assert_eq!(
            compare(("h1", Some("a\n")), Some(&then)).change,
            Change::Unchanged
        );
        let unkept = kept("h1", None, true);
        let diff = compare(("h2", Some("b\n")), Some(&unkept));
        assert_eq!((diff.change, diff.unified), (Change::NotKept, None));
    }

    #[test]
    fn outputs_that_came_or_went_are_added_or_removed() {
        assert_eq!(compare(("h", Some("new\n")), None).change, Change::Added);
        let missing = kept(MISSING, None, false);
        assert_eq!(
            compare(("h", Some("new\n")), Some(&missing)).change,
            Change::Added
        );
        assert_eq!(
            compare((MISSING, None), Some(&missing)).change,
            Change::Unchanged
        );
        let then = kept("h1", Some("old\n"), false);
        let gone = compare((MISSING, None), Some(&then));
        assert_eq!(gone.change, Change::Removed);
        assert!(gone.unified.unwrap().contains("\n-old\n"));
    }

    #[test]
    fn a_long_output_is_compared_over_the_start_kept() {
        let then = kept("h1", Some("a\nb\n"), true);
        let diff = compare(
            ("h2", Some("a\nc\nmore that was never kept\n")),
            Some(&then),
        );
        assert!(diff.truncated);
        let unified = diff.unified.unwrap();
        assert!(unified.contains("-b\n+c\n"), "{unified}");
        assert!(!unified.contains("never kept"), "{unified}");
        assert_eq!(cut("añb", 2), "a");
    }
}
