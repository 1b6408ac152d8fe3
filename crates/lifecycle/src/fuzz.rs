//! The check the `verdict` fuzz target runs (`fuzz/`), kept here so that
//! the corpus is replayed by an ordinary test on the stable toolchain
//! (`tests/fuzz_corpus.rs`).
//!
//! Beyond "no panic": a conflict names two lines of the text in order; a
//! verdict written back as Markdown reads as the same verdict; and the
//! follow-up tasks it calls for have distinct, free, folder-safe names.

use std::cell::Cell;

use crate::verdict::{self, FollowUp, FollowUpKind, Kind, Verdict};

/// The task the follow-ups are named after, and a name already taken.
const TASK: &str = "task";
const TAKEN: &str = "task-fix-issue-1";

/// Reads the input as a `VERDICT.md` (invalid UTF-8 replaced).
pub fn verdict(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match verdict::parse(&text) {
        Err(verdict::Error::Missing) => {}
        Err(verdict::Error::Conflicting {
            first,
            first_line,
            second,
            second_line,
        }) => {
            assert_ne!(first, second, "a conflict of one kind");
            assert!(
                0 < first_line && first_line < second_line && second_line <= text.lines().count(),
                "conflict at lines {first_line} and {second_line} of {}",
                text.lines().count()
            );
        }
        Ok(parsed) => {
            let written = markdown(&parsed);
            assert_eq!(
                verdict::parse(&written).as_ref(),
                Ok(&parsed),
                "written back as:\n{written}"
            );
            check_follow_ups(&parsed);
        }
    }
}

/// The verdict as a referee following `docs/tasks.md` would write it.
pub fn markdown(parsed: &Verdict) -> String {
    let word = match parsed.kind {
        Kind::Pass => "PASS",
        Kind::Fail => "FAIL",
        Kind::NeedsReview => "NEEDS_REVIEW",
    };
    let mut text = format!("# Verdict: {word}\n");
    for (heading, items) in [
        ("Findings", &parsed.findings),
        ("Remaining Issues", &parsed.remaining_issues),
        ("Tasks for Review / Tie-Breaks", &parsed.tie_breaks),
    ] {
        text.push_str(&format!("\n## {heading}\n\n"));
        for item in items {
            text.push_str(&format!("- {item}\n"));
        }
    }
    text
}

fn check_follow_ups(parsed: &Verdict) {
    let asked = Cell::new(0_usize);
    let taken = |name: &str| {
        asked.set(asked.get() + 1);
        name == TAKEN
    };
    let made = verdict::follow_ups(TASK, parsed, taken);
    let fixes = if parsed.kind == Kind::Fail {
        parsed.findings.len()
    } else {
        0
    };
    assert_eq!(
        made.len(),
        fixes + parsed.remaining_issues.len() + parsed.tie_breaks.len(),
        "one follow-up per finding of a FAIL, issue and tie-break"
    );
    check_names(&made, TASK);
    // `taken` looks at the disk in baton: naming n follow-ups may ask about
    // a few names each, not about every name given before (n² questions,
    // and n³ work, for a verdict listing one slug many times).
    assert!(
        asked.get() <= 2 * made.len() + 1,
        "{} questions for {} names",
        asked.get(),
        made.len()
    );
    let subs = [("Sub Task", parsed), ("sub-task", parsed)];
    let made = verdict::sub_task_follow_ups(TASK, &subs, |name| name == TAKEN);
    check_names(&made, TASK);
}

/// Distinct, not taken, prefixed with the task and the kind's word, and
/// made of lowercase ASCII letters, digits and `-` only.
fn check_names(made: &[FollowUp], task: &str) {
    for (position, follow_up) in made.iter().enumerate() {
        let name = follow_up.name.as_str();
        let word = match follow_up.kind {
            FollowUpKind::Fix => "fix",
            FollowUpKind::Review => "review",
            FollowUpKind::TieBreak => "tiebreak",
        };
        assert!(
            name.starts_with(&format!("{task}-{word}-")),
            "{name} for a {word}"
        );
        assert!(
            name.bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-'),
            "{name:?} is not folder-safe"
        );
        assert_ne!(name, TAKEN, "a taken name was given again");
        assert!(
            made[..position].iter().all(|earlier| earlier.name != name),
            "{name} given twice"
        );
    }
}
