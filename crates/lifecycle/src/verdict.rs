//! Reading `VERDICT.md` and naming the follow-up tasks it calls for
//! (docs/tasks.md).
//!
//! Referees write Markdown by hand, so the reader is tolerant: headings may
//! use `#` or `##` or bold, case does not matter, and list items may start
//! with `-`, `*`, `+` or a number.

use std::collections::{HashMap, HashSet};

/// The referee's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The task is complete.
    Pass,
    /// Findings must be fixed.
    Fail,
    /// A person must look at something before the task can close.
    NeedsReview,
}

/// A parsed `VERDICT.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// PASS, FAIL or NEEDS_REVIEW.
    pub kind: Kind,
    /// Items under "Findings".
    pub findings: Vec<String>,
    /// Items under "Remaining Issues".
    pub remaining_issues: Vec<String>,
    /// Items under "Tasks for Review / Tie-Breaks".
    pub tie_breaks: Vec<String>,
}

/// Why a verdict could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No line says PASS, FAIL or NEEDS_REVIEW.
    #[error("read the verdict: no line says PASS, FAIL or NEEDS_REVIEW")]
    Missing,
    /// Two lines say different things.
    #[error(
        "read the verdict: line {first_line} says {first:?} but line {second_line} says {second:?}"
    )]
    Conflicting {
        /// The first verdict found.
        first: Kind,
        /// Its line (1-based).
        first_line: usize,
        /// The contradicting verdict.
        second: Kind,
        /// Its line (1-based).
        second_line: usize,
    },
}

/// The kind of follow-up task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowUpKind {
    /// `{task}-fix-{issue}`: starts at implementation with the bug reports.
    Fix,
    /// `{task}-review-{issue}`: starts at implementation with the bug reports.
    Review,
    /// `{task}-tiebreak-{issue}`: starts at Research.
    TieBreak,
}

/// One follow-up task to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowUp {
    /// Fix, review or tie-break.
    pub kind: FollowUpKind,
    /// The new task's folder name, unique among the taken names.
    pub name: String,
    /// The finding, issue or tie-break it comes from.
    pub source: String,
}

/// The files copied into every follow-up task; an empty `IMPLEMENTATION.md`
/// is created beside them.
pub const COPIED_FILES: &[&str] = &["SPEC.md", "BUG_REPORT.md", "ADVERSARIAL_BUG_REPORT.md"];

/// Parses the text of a `VERDICT.md`.
pub fn parse(text: &str) -> Result<Verdict, Error> {
    let mut found: Option<(Kind, usize)> = None;
    let mut section: Option<Section> = None;
    let mut findings = Vec::new();
    let mut remaining_issues = Vec::new();
    let mut tie_breaks = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = plain(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(item) = list_item(raw) {
            let list = match section {
                Some(Section::Findings) => &mut findings,
                Some(Section::RemainingIssues) => &mut remaining_issues,
                Some(Section::TieBreaks) => &mut tie_breaks,
                None => continue,
            };
            if !is_none(&item) {
                list.push(item);
            }
            continue;
        }
        if let Some(next) = heading(&line) {
            section = Some(next);
            continue;
        }
        if let Some(kind) = verdict_word(&line) {
            match found {
                None => found = Some((kind, index + 1)),
                Some((first, first_line)) if first != kind => {
                    return Err(Error::Conflicting {
                        first,
                        first_line,
                        second: kind,
                        second_line: index + 1,
                    });
                }
                Some(_) => {}
            }
            // A "Verdict" heading opens no list section.
            section = None;
            continue;
        }
        // Other headings end the current section, so their lists are not
        // mistaken for findings.
        if raw.trim_start().starts_with('#') {
            section = None;
        }
    }
    let (kind, _) = found.ok_or(Error::Missing)?;
    Ok(Verdict {
        kind,
        findings,
        remaining_issues,
        tie_breaks,
    })
}

/// The follow-up tasks of a task's verdict in manual mode: a fix task per
/// finding when it FAILs, a review task per remaining issue and a tie-break
/// task per tie-break. `taken` says whether a task name already exists; the
/// names returned are also unique among themselves.
pub fn follow_ups(task: &str, verdict: &Verdict, taken: impl Fn(&str) -> bool) -> Vec<FollowUp> {
    let mut planned: Vec<(FollowUpKind, &str, &str, usize)> = Vec::new();
    if verdict.kind == Kind::Fail {
        for (n, item) in verdict.findings.iter().enumerate() {
            planned.push((FollowUpKind::Fix, "fix", item, n + 1));
        }
    }
    for (n, item) in verdict.remaining_issues.iter().enumerate() {
        planned.push((FollowUpKind::Review, "review", item, n + 1));
    }
    for (n, item) in verdict.tie_breaks.iter().enumerate() {
        planned.push((FollowUpKind::TieBreak, "tiebreak", item, n + 1));
    }
    let mut names = Names::default();
    planned
        .into_iter()
        .map(|(kind, word, item, n)| FollowUp {
            kind,
            name: names.give(&format!("{task}-{word}-{}", issue_slug(item, n)), &taken),
            source: item.to_owned(),
        })
        .collect()
}

/// The follow-up tasks of a parent whose sub-tasks have verdicts:
/// `{parent}-fix-{sub}` per failed sub-task and `{parent}-tiebreak-{sub}`
/// per sub-task with tie-breaks.
pub fn sub_task_follow_ups(
    parent: &str,
    subs: &[(&str, &Verdict)],
    taken: impl Fn(&str) -> bool,
) -> Vec<FollowUp> {
    let mut names = Names::default();
    let mut out: Vec<FollowUp> = Vec::new();
    for &(sub, verdict) in subs {
        let mut wanted = Vec::new();
        if verdict.kind == Kind::Fail {
            wanted.push((FollowUpKind::Fix, "fix"));
        }
        if !verdict.tie_breaks.is_empty() {
            wanted.push((FollowUpKind::TieBreak, "tiebreak"));
        }
        for (kind, word) in wanted {
            out.push(FollowUp {
                kind,
                name: names.give(&format!("{parent}-{word}-{}", kebab(sub)), &taken),
                source: sub.to_owned(),
            });
        }
    }
    out
}

/// The `{issue}` part of a follow-up name: the text before the first `:`,
/// kebab-cased, or `issue-{n}` when there is no `:` or nothing usable
/// before it.
pub fn issue_slug(text: &str, n: usize) -> String {
    let slug = text.split_once(':').map(|(head, _)| kebab(head));
    match slug {
        Some(slug) if !slug.is_empty() => slug,
        _ => format!("issue-{n}"),
    }
}

/// Lowercase ASCII letters and digits, every other run of characters one
/// `-`, none at either end. Capped at 60 characters so folder names stay
/// readable.
pub fn kebab(text: &str) -> String {
    let mut out = String::new();
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(60);
    out.trim_end_matches('-').to_owned()
}

/// `base`, or the first of `base-2`, `base-3`, … that is not taken.
pub fn unique_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|name| !taken(name))
        .expect("some suffix is free")
}

/// The names given to one verdict's follow-ups: each is the first of
/// `base`, `base-2`, `base-3`, … that is neither taken nor given already,
/// found without trying again the suffixes an earlier name of the same base
/// passed over. Starting from `base` each time asked `taken` (which looks
/// at the disk) about every earlier name of that base: n findings with one
/// slug cost n² questions and n³ comparisons.
#[derive(Default)]
struct Names {
    given: HashSet<String>,
    /// The first suffix not yet tried, per base.
    next_suffix: HashMap<String, u64>,
}

impl Names {
    fn give(&mut self, base: &str, taken: &impl Fn(&str) -> bool) -> String {
        let free = |given: &HashSet<String>, name: &str| !given.contains(name) && !taken(name);
        let name = if free(&self.given, base) {
            base.to_owned()
        } else {
            let start = self.next_suffix.get(base).copied().unwrap_or(2);
            let (suffix, name) = (start..)
                .map(|suffix| (suffix, format!("{base}-{suffix}")))
                .find(|(_, name)| free(&self.given, name))
                .expect("some suffix is free");
            self.next_suffix.insert(base.to_owned(), suffix + 1);
            name
        };
        self.given.insert(name.clone());
        name
    }
}

/// The sections whose items are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Findings,
    RemainingIssues,
    TieBreaks,
}

/// A line without Markdown emphasis, heading marks or surrounding blanks.
fn plain(line: &str) -> String {
    line.trim()
        .trim_start_matches('#')
        .replace(['*', '_', '`'], "")
        .trim()
        .to_owned()
}

/// The text of a list item (`-`, `*`, `+`, `1.`, `1)`), emphasis removed.
pub(crate) fn list_item(raw: &str) -> Option<String> {
    let line = raw.trim_start();
    let rest = if let Some(rest) = line
        .strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .or_else(|| line.strip_prefix("+ "))
    {
        rest
    } else {
        let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return None;
        }
        line[digits..]
            .strip_prefix(". ")
            .or_else(|| line[digits..].strip_prefix(") "))?
    };
    // Backticks first: removing them can join stars into a `**`.
    let text = rest.replace('`', "").replace("**", "");
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The section a heading line opens, if it is one of ours.
fn heading(line: &str) -> Option<Section> {
    let key: String = line
        .trim_end_matches(':')
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    match key.as_str() {
        "findings" => Some(Section::Findings),
        "remainingissues" => Some(Section::RemainingIssues),
        "tasksforreviewtiebreaks" | "tasksforreview" | "tiebreaks" => Some(Section::TieBreaks),
        _ => None,
    }
}

/// The verdict a line states: the word alone, or after `Verdict` (with an
/// optional `:` or `-`).
fn verdict_word(line: &str) -> Option<Kind> {
    let upper = line.to_ascii_uppercase();
    let rest = upper
        .strip_prefix("VERDICT")
        .map(|rest| rest.trim_start_matches([':', '-', ' ']))
        .unwrap_or(&upper)
        .trim();
    let taken: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '-' | ' '))
        .collect();
    // Emphasis stripping may have eaten the underscore of NEEDS_REVIEW, so
    // separators are ignored when comparing.
    let word = taken.replace(['-', ' ', '_'], "");
    let kind = match word.as_str() {
        "PASS" | "PASSED" => Kind::Pass,
        "FAIL" | "FAILED" => Kind::Fail,
        "NEEDSREVIEW" => Kind::NeedsReview,
        _ => return None,
    };
    // Only punctuation may follow, as in "PASS." — "Pass rate is low" is
    // prose, not a verdict (its words were taken above and match nothing).
    let after = &rest[taken.len()..];
    after
        .chars()
        .all(|c| !c.is_ascii_alphanumeric())
        .then_some(kind)
}

/// Whether a list item only says that there is nothing.
fn is_none(item: &str) -> bool {
    let key = item.trim_end_matches('.').trim().to_ascii_lowercase();
    matches!(key.as_str(), "none" | "n/a" | "nothing")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, kind: Kind, findings: &[&str], issues: &[&str], ties: &[&str]) {
        let verdict = parse(text).expect("the verdict parses");
        assert_eq!(verdict.kind, kind);
        assert_eq!(verdict.findings, findings);
        assert_eq!(verdict.remaining_issues, issues);
        assert_eq!(verdict.tie_breaks, ties);
    }

    #[test]
    fn every_kind_in_plain_form() {
        check("# Verdict\nPASS\n", Kind::Pass, &[], &[], &[]);
        check(
            "FAIL\n## Findings\n- a: b\n",
            Kind::Fail,
            &["a: b"],
            &[],
            &[],
        );
        check("NEEDS_REVIEW\n", Kind::NeedsReview, &[], &[], &[]);
        check("Verdict: needs review\n", Kind::NeedsReview, &[], &[], &[]);
    }

    #[test]
    fn tolerant_of_formatting() {
        let text = "\
# VERDICT: **Fail**

**Findings**
* **Null deref**: crashes on empty input
1. Off by one: last row lost
2) plain finding without colon

#### remaining issues:
- docs: README outdated
- None

## Tasks for Review / Tie-Breaks
+ Naming: reviewers disagree

# Notes
- not a finding
";
        check(
            text,
            Kind::Fail,
            &[
                "Null deref: crashes on empty input",
                "Off by one: last row lost",
                "plain finding without colon",
            ],
            &["docs: README outdated"],
            &["Naming: reviewers disagree"],
        );
    }

    #[test]
    fn emphasis_split_by_a_backtick_is_removed_too() {
        assert_eq!(list_item("* *`*Null**: x").as_deref(), Some("Null: x"));
    }

    #[test]
    fn errors() {
        assert_eq!(parse(""), Err(Error::Missing));
        assert_eq!(parse("Pass rate is low\n"), Err(Error::Missing));
        assert_eq!(
            parse("PASS\n\nFAIL\n"),
            Err(Error::Conflicting {
                first: Kind::Pass,
                first_line: 1,
                second: Kind::Fail,
                second_line: 3,
            })
        );
        assert_eq!(
            Error::Missing.to_string(),
            "read the verdict: no line says PASS, FAIL or NEEDS_REVIEW"
        );
        // Repeating the same verdict is fine, and list items never count.
        check("PASS\n**PASS**\n- FAIL\n", Kind::Pass, &[], &[], &[]);
    }

    #[test]
    fn naming() {
        assert_eq!(
            issue_slug("Null Deref in `parse()`: boom", 1),
            "null-deref-in-parse"
        );
        assert_eq!(issue_slug("no colon here", 3), "issue-3");
        assert_eq!(issue_slug(":: leading", 2), "issue-2");
        assert_eq!(kebab("  Add user Auth!  "), "add-user-auth");
        assert_eq!(kebab(&"x".repeat(80)).len(), 60);
        assert_eq!(unique_name("a", |_| false), "a");
        assert_eq!(unique_name("a", |n| n == "a" || n == "a-2"), "a-3");
    }

    #[test]
    fn follow_ups_in_manual_mode() {
        let verdict = parse(
            "FAIL\n## Findings\n- Crash: x\n- Crash: y\n- odd\n## Remaining Issues\n- Docs: z\n## Tie-Breaks\n- API shape: ?\n",
        )
        .expect("parses");
        let names: Vec<(FollowUpKind, String)> =
            follow_ups("auth", &verdict, |n| n == "auth-fix-issue-3")
                .into_iter()
                .map(|f| (f.kind, f.name))
                .collect();
        assert_eq!(
            names,
            [
                (FollowUpKind::Fix, "auth-fix-crash".to_owned()),
                (FollowUpKind::Fix, "auth-fix-crash-2".to_owned()),
                (FollowUpKind::Fix, "auth-fix-issue-3-2".to_owned()),
                (FollowUpKind::Review, "auth-review-docs".to_owned()),
                (FollowUpKind::TieBreak, "auth-tiebreak-api-shape".to_owned()),
            ]
        );
        // A PASS never creates fix tasks, even with findings listed.
        let pass = parse("PASS\n## Findings\n- minor: x\n").expect("parses");
        assert!(follow_ups("auth", &pass, |_| false).is_empty());
    }

    #[test]
    fn many_findings_of_one_slug_are_named_asking_about_each_name_once() {
        let mut text = String::from("FAIL\n## Findings\n");
        for _ in 0..500 {
            text.push_str("- Crash: x\n");
        }
        let verdict = parse(&text).expect("parses");
        let asked = std::cell::Cell::new(0);
        let made = follow_ups("t", &verdict, |name| {
            asked.set(asked.get() + 1);
            name == "t-fix-crash-7"
        });
        let names: Vec<&str> = made.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names[..3],
            ["t-fix-crash", "t-fix-crash-2", "t-fix-crash-3"]
        );
        assert_eq!(names[5..7], ["t-fix-crash-6", "t-fix-crash-8"]);
        assert_eq!(names[499], "t-fix-crash-501");
        assert!(
            asked.get() <= 501,
            "{} questions for 500 names",
            asked.get()
        );
    }

    #[test]
    fn sub_task_follow_ups_name_the_sub_task() {
        let fail = parse("FAIL\n## Findings\n- a: b\n").expect("parses");
        let tie = parse("NEEDS_REVIEW\n## Tie-Breaks\n- c: d\n").expect("parses");
        let pass = parse("PASS\n").expect("parses");
        let names: Vec<String> = sub_task_follow_ups(
            "auth",
            &[("login", &fail), ("tokens", &tie), ("ui", &pass)],
            |_| false,
        )
        .into_iter()
        .map(|f| f.name)
        .collect();
        assert_eq!(names, ["auth-fix-login", "auth-tiebreak-tokens"]);
    }
}
