//! The task phase machine (docs/tasks.md): which phase a task folder is in,
//! decided from the artifacts it holds.

use std::collections::BTreeMap;
use std::time::SystemTime;

/// What the caller knows about one file of a task folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// Whether the file has any content; an empty artifact never counts.
    pub non_empty: bool,
    /// The file's modification time.
    pub modified: SystemTime,
}

/// A task's phase, in the order of docs/tasks.md's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Empty folder.
    New,
    /// `SPEC.md` written.
    Research,
    /// `SPEC.md` and `DECOMPOSITION.md` written.
    Decomposition,
    /// `DESIGN.md` written.
    Design,
    /// `TEST_PLAN.md` written.
    TestDesign,
    /// `IMPLEMENTATION.md` written.
    Implementation,
    /// `BUG_REPORT.md` written.
    BugFind,
    /// `ADVERSARIAL_BUG_REPORT.md` written.
    Adversarial,
    /// `DOC_REVIEW.md` written.
    DocReview,
    /// `VERDICT.md` written.
    Referee,
}

impl Phase {
    /// The phase's name as docs/tasks.md spells it.
    pub fn name(self) -> &'static str {
        row(self).name
    }

    /// The artifact the phase writes (`None` for New).
    pub fn artifact(self) -> Option<&'static str> {
        row(self).artifact
    }

    /// A lowercase name for stage names and the command line.
    pub fn slug(self) -> &'static str {
        match self {
            Phase::New => "new",
            Phase::Research => "research",
            Phase::Decomposition => "decomposition",
            Phase::Design => "design",
            Phase::TestDesign => "test-design",
            Phase::Implementation => "implementation",
            Phase::BugFind => "bug-find",
            Phase::Adversarial => "adversarial",
            Phase::DocReview => "doc-review",
            Phase::Referee => "referee",
        }
    }

    /// The agent role that carries the phase out; `baton.toml` maps roles
    /// to agent profiles (`[agents.<role>]`, else `[agents.default]`).
    pub fn role(self) -> &'static str {
        match self {
            Phase::New => "none",
            Phase::Research => "researcher",
            Phase::Decomposition => "decomposer",
            Phase::Design => "designer",
            Phase::TestDesign => "test-designer",
            Phase::Implementation => "implementer",
            Phase::BugFind => "bug-finder",
            Phase::Adversarial => "adversary",
            Phase::DocReview => "doc-reviewer",
            Phase::Referee => "referee",
        }
    }
}

/// One row of the phase table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The phase this row describes.
    pub phase: Phase,
    /// The phase's name as docs/tasks.md spells it.
    pub name: &'static str,
    /// The artifact whose presence signals the phase (`None` for New).
    pub artifact: Option<&'static str>,
    /// Artifacts that must count for this one to count: no phase is skipped
    /// except the optional ones.
    pub requires: &'static [&'static str],
    /// Artifacts this one must be newer than, when they count (freshness).
    pub after: &'static [&'static str],
    /// What comes next, as docs/tasks.md's table says it.
    pub next: &'static str,
}

/// The phase table of docs/tasks.md, in its order. Design and Test design
/// are optional, so Implementation requires only `SPEC.md` but must be newer
/// than a design or test plan that counts.
pub const TABLE: &[Row] = &[
    Row {
        phase: Phase::New,
        name: "New",
        artifact: None,
        requires: &[],
        after: &[],
        next: "Research → SPEC.md",
    },
    Row {
        phase: Phase::Research,
        name: "Research",
        artifact: Some("SPEC.md"),
        requires: &[],
        after: &[],
        next: "Decomposition (optional) / Design (optional) / Implement",
    },
    Row {
        phase: Phase::Decomposition,
        name: "Decomposition",
        artifact: Some("DECOMPOSITION.md"),
        requires: &["SPEC.md"],
        after: &["SPEC.md"],
        next: "sub-task folders are created",
    },
    Row {
        phase: Phase::Design,
        name: "Design",
        artifact: Some("DESIGN.md"),
        requires: &["SPEC.md"],
        after: &["SPEC.md"],
        next: "Test design (optional) / Implement",
    },
    Row {
        phase: Phase::TestDesign,
        name: "Test design",
        artifact: Some("TEST_PLAN.md"),
        requires: &["SPEC.md", "DESIGN.md"],
        after: &["SPEC.md", "DESIGN.md"],
        next: "Implement",
    },
    Row {
        phase: Phase::Implementation,
        name: "Implementation",
        artifact: Some("IMPLEMENTATION.md"),
        requires: &["SPEC.md"],
        after: &["SPEC.md", "DESIGN.md", "TEST_PLAN.md"],
        next: "Bug find → BUG_REPORT.md",
    },
    Row {
        phase: Phase::BugFind,
        name: "Bug find",
        artifact: Some("BUG_REPORT.md"),
        requires: &["IMPLEMENTATION.md"],
        after: &["IMPLEMENTATION.md"],
        next: "Adversarial bug find → ADVERSARIAL_BUG_REPORT.md",
    },
    Row {
        phase: Phase::Adversarial,
        name: "Adversarial",
        artifact: Some("ADVERSARIAL_BUG_REPORT.md"),
        requires: &["BUG_REPORT.md"],
        after: &["BUG_REPORT.md"],
        next: "Doc review → DOC_REVIEW.md",
    },
    Row {
        phase: Phase::DocReview,
        name: "Doc review",
        artifact: Some("DOC_REVIEW.md"),
        requires: &["ADVERSARIAL_BUG_REPORT.md"],
        after: &["ADVERSARIAL_BUG_REPORT.md"],
        next: "Referee → VERDICT.md",
    },
    Row {
        phase: Phase::Referee,
        name: "Referee",
        artifact: Some("VERDICT.md"),
        requires: &["DOC_REVIEW.md"],
        after: &["DOC_REVIEW.md"],
        next: "complete, or fix/review tasks",
    },
];

/// The decision for one task folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The current phase.
    pub phase: Phase,
    /// The artifacts that signal it (empty for New).
    pub signal: Vec<&'static str>,
    /// What comes next, from the table.
    pub next_phase: &'static str,
    /// Why: the phase's evidence and every artifact that was present but did
    /// not count.
    pub why: String,
    /// Every artifact that counts, in table order (a decomposed task keeps
    /// its `DECOMPOSITION.md` counted after it moves on).
    pub counted: Vec<&'static str>,
}

/// Decides the phase of a task folder from its files (name → info).
/// Files outside the table are ignored.
pub fn detect(files: &BTreeMap<String, FileInfo>) -> Status {
    let mut counted: BTreeMap<&'static str, SystemTime> = BTreeMap::new();
    let mut ignored = Vec::new();
    // The table is in dependency order, so every artifact's dependencies are
    // decided before it is.
    for row in TABLE {
        let Some(name) = row.artifact else { continue };
        let Some(info) = files.get(name) else {
            continue;
        };
        if let Err(reason) = counts(row, info, &counted) {
            ignored.push(format!("{name} does not count: {reason}"));
        } else {
            counted.insert(name, info.modified);
        }
    }
    let current = TABLE
        .iter()
        .rev()
        .find(|row| row.artifact.is_none_or(|name| counted.contains_key(name)))
        .expect("the New row always matches");
    let mut signal: Vec<&'static str> = current.requires.to_vec();
    signal.extend(current.artifact);
    signal.retain(|name| counted.contains_key(name));
    // Decomposition's signal is the pair the table names; other rows show
    // only their own artifact.
    if current.phase != Phase::Decomposition {
        signal.retain(|name| Some(*name) == current.artifact);
    }
    let mut why = match current.artifact {
        None => "no artifact counts yet".to_owned(),
        Some(name) => format!("{name} is present, non-empty and fresh"),
    };
    for line in &ignored {
        why.push_str("; ");
        why.push_str(line);
    }
    Status {
        phase: current.phase,
        signal,
        next_phase: current.next,
        why,
        counted: TABLE
            .iter()
            .filter_map(|row| row.artifact)
            .filter(|name| counted.contains_key(name))
            .collect(),
    }
}

/// The row of a phase.
fn row(phase: Phase) -> &'static Row {
    TABLE
        .iter()
        .find(|row| row.phase == phase)
        .expect("every phase has a row")
}

/// Whether an artifact counts, or why not.
fn counts(
    row: &Row,
    info: &FileInfo,
    counted: &BTreeMap<&'static str, SystemTime>,
) -> Result<(), String> {
    if !info.non_empty {
        return Err("it is empty".to_owned());
    }
    if let Some(missing) = row.requires.iter().find(|dep| !counted.contains_key(*dep)) {
        return Err(format!("{missing} does not count"));
    }
    for dep in row.after {
        // Strictly newer: an artifact written in the same instant as its
        // input cannot be shown to have read it.
        if let Some(&dep_time) = counted.get(dep)
            && info.modified <= dep_time
        {
            return Err(format!("it is not newer than {dep}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Builds a folder from (name, seconds, non-empty) and checks its phase
    /// and signal.
    fn check(files: &[(&str, u64, bool)], phase: Phase, signal: &[&str]) -> Status {
        let files = files
            .iter()
            .map(|&(name, secs, non_empty)| {
                let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
                (
                    name.to_owned(),
                    FileInfo {
                        non_empty,
                        modified,
                    },
                )
            })
            .collect();
        let status = detect(&files);
        assert_eq!(status.phase, phase, "{status:?}");
        assert_eq!(status.signal, signal, "{status:?}");
        assert_eq!(status.next_phase, row(phase).next);
        status
    }

    #[test]
    fn every_row_of_the_table() {
        check(&[], Phase::New, &[]);
        check(&[("SPEC.md", 1, true)], Phase::Research, &["SPEC.md"]);
        check(
            &[("SPEC.md", 1, true), ("DECOMPOSITION.md", 2, true)],
            Phase::Decomposition,
            &["SPEC.md", "DECOMPOSITION.md"],
        );
        check(
            &[("SPEC.md", 1, true), ("DESIGN.md", 2, true)],
            Phase::Design,
            &["DESIGN.md"],
        );
        check(
            &[
                ("SPEC.md", 1, true),
                ("DESIGN.md", 2, true),
                ("TEST_PLAN.md", 3, true),
            ],
            Phase::TestDesign,
            &["TEST_PLAN.md"],
        );
        let chain = [
            ("SPEC.md", 1, true),
            ("IMPLEMENTATION.md", 2, true),
            ("BUG_REPORT.md", 3, true),
            ("ADVERSARIAL_BUG_REPORT.md", 4, true),
            ("DOC_REVIEW.md", 5, true),
            ("VERDICT.md", 6, true),
        ];
        let phases = [
            Phase::Research,
            Phase::Implementation,
            Phase::BugFind,
            Phase::Adversarial,
            Phase::DocReview,
            Phase::Referee,
        ];
        for (n, phase) in phases.into_iter().enumerate() {
            check(&chain[..=n], phase, &[chain[n].0]);
        }
    }

    #[test]
    fn optional_phases_may_be_skipped_but_not_others() {
        check(
            &[
                ("SPEC.md", 1, true),
                ("DESIGN.md", 2, true),
                ("TEST_PLAN.md", 3, true),
                ("IMPLEMENTATION.md", 4, true),
            ],
            Phase::Implementation,
            &["IMPLEMENTATION.md"],
        );
        // A bug report without an implementation skips a phase.
        let status = check(
            &[("SPEC.md", 1, true), ("BUG_REPORT.md", 3, true)],
            Phase::Research,
            &["SPEC.md"],
        );
        assert!(status.why.contains("BUG_REPORT.md does not count"));
        // A test plan needs a design.
        check(
            &[("SPEC.md", 1, true), ("TEST_PLAN.md", 2, true)],
            Phase::Research,
            &["SPEC.md"],
        );
    }

    #[test]
    fn empty_artifacts_do_not_count() {
        let status = check(&[("SPEC.md", 1, false)], Phase::New, &[]);
        assert!(status.why.contains("SPEC.md does not count: it is empty"));
        // A fix task's freshly created empty IMPLEMENTATION.md, with copied
        // reports, leaves the task before implementation.
        check(
            &[
                ("SPEC.md", 1, true),
                ("BUG_REPORT.md", 2, true),
                ("ADVERSARIAL_BUG_REPORT.md", 3, true),
                ("IMPLEMENTATION.md", 4, false),
            ],
            Phase::Research,
            &["SPEC.md"],
        );
    }

    #[test]
    fn a_stale_bug_report_does_not_advance() {
        let status = check(
            &[
                ("SPEC.md", 1, true),
                ("BUG_REPORT.md", 2, true),
                ("IMPLEMENTATION.md", 3, true),
            ],
            Phase::Implementation,
            &["IMPLEMENTATION.md"],
        );
        assert!(
            status
                .why
                .contains("BUG_REPORT.md does not count: it is not newer than IMPLEMENTATION.md"),
            "{}",
            status.why
        );
        // Equal times are not newer.
        check(
            &[("SPEC.md", 1, true), ("IMPLEMENTATION.md", 1, true)],
            Phase::Research,
            &["SPEC.md"],
        );
    }

    #[test]
    fn staleness_propagates_down_the_chain() {
        // A new implementation makes every later report stale, even ones
        // newer than the stale bug report.
        check(
            &[
                ("SPEC.md", 1, true),
                ("BUG_REPORT.md", 2, true),
                ("ADVERSARIAL_BUG_REPORT.md", 5, true),
                ("IMPLEMENTATION.md", 4, true),
                ("DOC_REVIEW.md", 6, true),
                ("VERDICT.md", 7, true),
            ],
            Phase::Implementation,
            &["IMPLEMENTATION.md"],
        );
        // An implementation older than a redesign is stale.
        check(
            &[
                ("SPEC.md", 1, true),
                ("IMPLEMENTATION.md", 2, true),
                ("DESIGN.md", 3, true),
            ],
            Phase::Design,
            &["DESIGN.md"],
        );
    }

    #[test]
    fn unknown_files_are_ignored() {
        let status = check(
            &[("notes.txt", 9, true), ("SPEC.md", 1, true)],
            Phase::Research,
            &["SPEC.md"],
        );
        assert_eq!(status.why, "SPEC.md is present, non-empty and fresh");
        assert_eq!(Phase::TestDesign.name(), "Test design");
    }
}
