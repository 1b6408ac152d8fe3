//! `validation/<stage>-summary.md`: the validation of a stage, cycle by
//! cycle, for a person — each cycle's verdict, its findings counted by
//! severity and listed by title, the corrections used of the budget, and
//! what happens next.
//!
//! Each cycle's section is written once its findings are decided, to
//! `validation/<stage>/cycle-<c>/summary.md`; the summary file is rebuilt
//! from the sections of cycles 1 to the latest. Rebuilding rather than
//! appending keeps it right when a crash makes a cycle be decided twice,
//! and after `baton rerun` (cycles start at 1 again) it holds no stale
//! cycle.

use std::fmt::Write as _;
use std::path::Path;

use baton_workflow::schema::Validation;

use super::findings::Finding;
use crate::workspace::write_atomic;

/// The most findings a cycle's section lists; the findings file has all.
const LISTED: usize = 50;
/// The longest title shown for a finding, in characters.
const TITLE_CHARS: usize = 200;

/// What follows a cycle's findings.
pub(super) enum Next {
    /// No critical finding: the stage's validation is done.
    Done,
    /// A correction unit (its key) fixes the critical findings, then the
    /// next cycle validates again.
    Correct(String),
    /// The corrections are spent: the stage fails.
    Exhausted,
}

/// One decided cycle.
pub(super) struct Cycle<'a> {
    pub(super) stage: &'a str,
    pub(super) validation: &'a Validation,
    pub(super) cycle: i64,
    pub(super) findings: &'a [Finding],
    pub(super) next: Next,
}

/// The summary file of `stage`.
pub(super) fn path(stage: &str) -> String {
    format!("validation/{stage}-summary.md")
}

fn section_path(stage: &str, cycle: i64) -> String {
    format!("validation/{stage}/cycle-{cycle}/summary.md")
}

/// Writes the cycle's section, then the summary file from every cycle's
/// section so far.
pub(super) fn write(workspace: &Path, decided: &Cycle<'_>) -> Result<(), String> {
    let stage = decided.stage;
    let section = section_path(stage, decided.cycle);
    write_atomic(&workspace.join(&section), section_text(decided).as_bytes())
        .map_err(|error| format!("cannot write {section}: {error}"))?;
    let mut text = header(decided);
    for cycle in 1..=decided.cycle {
        // A cycle decided before baton wrote summaries has no section.
        if let Ok(part) = std::fs::read_to_string(workspace.join(section_path(stage, cycle))) {
            text.push('\n');
            text.push_str(&part);
        }
    }
    let summary = path(stage);
    write_atomic(&workspace.join(&summary), text.as_bytes())
        .map_err(|error| format!("cannot write {summary}: {error}"))
}

fn verdict(findings: &[Finding]) -> &'static str {
    if findings.iter().any(Finding::is_critical) {
        "FAIL"
    } else {
        "PASS"
    }
}

fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        format!("{count} {word}")
    } else {
        format!("{count} {word}s")
    }
}

fn header(decided: &Cycle<'_>) -> String {
    let stage = decided.stage;
    let budget = decided.validation.max_revisions;
    format!(
        "# Validation of `{stage}`\n\nStrategy `{}`, at most {} (`max_revisions: {budget}`).\nLatest: cycle {}, {}. Its findings are in `validation/{stage}-findings.json`; every cycle's files are under `validation/{stage}/`.\n",
        decided.validation.strategy.as_str(),
        plural(
            usize::try_from(budget).unwrap_or(usize::MAX),
            "correction cycle"
        ),
        decided.cycle,
        verdict(decided.findings),
    )
}

fn section_text(decided: &Cycle<'_>) -> String {
    let findings = decided.findings;
    let critical: Vec<&Finding> = findings.iter().filter(|f| f.is_critical()).collect();
    let mut text = format!("## Cycle {}: {}\n\n", decided.cycle, verdict(findings));
    if findings.is_empty() {
        text.push_str("No findings.\n");
    } else {
        let by_severity = ["critical", "minor", "info"]
            .map(|severity| {
                let count = findings.iter().filter(|f| f.severity == severity).count();
                format!("{count} {severity}")
            })
            .join(", ");
        let _ = writeln!(
            text,
            "{} ({by_severity}); {} critical (status FAIL, severity critical).",
            plural(findings.len(), "finding"),
            if critical.is_empty() {
                "none is".to_owned()
            } else if critical.len() == 1 {
                "1 is".to_owned()
            } else {
                format!("{} are", critical.len())
            },
        );
    }
    let used = decided.cycle - 1;
    let _ = writeln!(
        text,
        "Corrections used: {used} of {}.",
        decided.validation.max_revisions
    );
    if !findings.is_empty() {
        text.push('\n');
        for finding in findings.iter().take(LISTED) {
            let _ = writeln!(
                text,
                "- {} [{}, {}]: {}",
                finding.id,
                finding.status,
                finding.severity,
                one_line(finding.title())
            );
        }
        if findings.len() > LISTED {
            let _ = writeln!(
                text,
                "- and {} more, in `validation/{}-findings.json`",
                findings.len() - LISTED,
                decided.stage
            );
        }
    }
    text.push('\n');
    text.push_str(&next_text(decided, &critical));
    text
}

fn next_text(decided: &Cycle<'_>, critical: &[&Finding]) -> String {
    let stage = decided.stage;
    let ids = critical
        .iter()
        .take(LISTED)
        .map(|finding| finding.id.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let count = plural(critical.len(), "critical finding");
    match &decided.next {
        Next::Done => "Next: nothing; no critical finding remains, so the validation is done and the stage succeeds.\n".to_owned(),
        Next::Correct(key) => format!(
            "Next: the correction `{stage}[{key}]` fixes the {count} ({ids}), then cycle {} validates again.\n",
            decided.cycle + 1
        ),
        Next::Exhausted => format!(
            "Next: the stage fails with {count} unresolved ({ids}): max_revisions ({}) allows no further correction, and a required stage halts the run. Fix the work, then `baton rerun RUN {stage}` starts the stage again.\n",
            decided.validation.max_revisions
        ),
    }
}

/// Text on one line (a list item), clipped.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= TITLE_CHARS {
        return joined;
    }
    let clipped: String = joined.chars().take(TITLE_CHARS).collect();
    format!("{clipped}…")
}
