//! A task's record, `task.json`: what `task new` or a verdict recorded
//! about it, reading and writing it, and the stamps (time, file hash)
//! written into it.

use std::path::Path;

use baton_lifecycle::next::Optional;
use baton_lifecycle::verdict::{FollowUp, FollowUpKind};
use serde::{Deserialize, Serialize};

use super::error::{Error, Result, io};

/// A task's record, beside its artifacts.
pub const RECORD: &str = "task.json";

/// Where a task came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskKind {
    /// Made by `baton task new` (or by hand).
    #[default]
    Task,
    /// `{task}-fix-{issue}`: a finding to fix.
    Fix,
    /// `{task}-review-{issue}`: a remaining issue to review.
    Review,
    /// `{task}-tiebreak-{issue}`: a disagreement to settle, from Research.
    Tiebreak,
    /// One item of a parent's `DECOMPOSITION.md`.
    SubTask,
}

/// A sub-task as its parent records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubRef {
    /// The sub-task's folder name (`{parent}-{short}`).
    pub name: String,
    /// Its short name, used in `{parent}-fix-{short}`.
    pub short: String,
}

/// A verdict already acted on, so a second `task run` creates nothing twice.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Handled {
    /// SHA-256 of the verdicts decided on (the task's and its sub-tasks').
    pub verdicts_sha256: String,
    /// The follow-up tasks planned for them.
    pub follow_ups: Vec<Planned>,
}

/// `task.json`: what `task new` or a verdict recorded about a task.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Record {
    /// The description given to `task new`, or written for a follow-up.
    #[serde(default)]
    pub description: String,
    /// Where the task came from.
    #[serde(default)]
    pub kind: TaskKind,
    /// The task whose verdict created this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The finding, issue or tie-break it follows up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The parent, for a sub-task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// When it was created (UTC).
    #[serde(default)]
    pub created_at: String,
    /// Optional phases asked for.
    #[serde(default)]
    pub decompose: bool,
    /// Run Design.
    #[serde(default)]
    pub design: bool,
    /// Run Test design (after Design).
    #[serde(default)]
    pub test_plan: bool,
    /// For a tie-break: the SHA-256 of the `SPEC.md` copied in; while
    /// `SPEC.md` is still that copy, Research runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_copy_sha256: Option<String>,
    /// The sub-tasks created from `DECOMPOSITION.md`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_tasks: Vec<SubRef>,
    /// The run carrying out the task's phases, while it is not finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The verdict last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled: Option<Handled>,
}

impl Record {
    /// The optional phases asked for.
    pub fn optional(&self) -> Optional {
        Optional {
            decompose: self.decompose,
            design: self.design,
            test_plan: self.test_plan,
        }
    }
}

/// A follow-up task as planned, before or after it was created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    /// Fix, review or tie-break.
    pub kind: TaskKind,
    /// The new task's name.
    pub name: String,
    /// The finding, issue, tie-break or sub-task it follows up.
    pub source: String,
    /// The task whose files are copied in (the task itself, or the failed
    /// sub-task).
    pub copy_from: String,
}

impl Planned {
    /// The plan for one of the lifecycle's follow-ups of `task`. A follow-up
    /// of a sub-task (its source is a sub-task's short name) copies that
    /// sub-task's reports.
    pub fn of(task: &str, follow: &FollowUp, subs: &[SubRef]) -> Planned {
        let kind = match follow.kind {
            FollowUpKind::Fix => TaskKind::Fix,
            FollowUpKind::Review => TaskKind::Review,
            FollowUpKind::TieBreak => TaskKind::Tiebreak,
        };
        let sub = subs.iter().find(|sub| {
            follow.source == sub.short
                && [
                    format!("{task}-fix-{}", sub.short),
                    format!("{task}-tiebreak-{}", sub.short),
                ]
                .iter()
                .any(|base| follow.name.starts_with(base.as_str()))
        });
        Planned {
            kind,
            name: follow.name.clone(),
            source: follow.source.clone(),
            copy_from: sub.map_or_else(|| task.to_owned(), |sub| sub.name.clone()),
        }
    }
}

/// Reads a task's record; a folder without one is a task made by hand.
pub fn read_record(dir: &Path) -> Result<Record> {
    let path = dir.join(RECORD);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|error| Error::Content {
            path,
            message: format!("not a task record: {error}"),
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
        Err(error) => Err(io(&path)(error)),
    }
}

/// Writes a task's record atomically (a temporary file renamed over it).
pub fn write_record(dir: &Path, record: &Record) -> Result<()> {
    let path = dir.join(RECORD);
    let text = serde_json::to_string_pretty(record).expect("plain data") + "\n";
    let temporary = dir.join(".task.json.tmp");
    std::fs::write(&temporary, text).map_err(io(&temporary))?;
    std::fs::rename(&temporary, &path).map_err(io(&path))
}

/// Hex SHA-256 of a file, if it exists.
pub fn file_sha256(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(crate::create::sha256_hex(&bytes))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io(path)(error)),
    }
}

/// The current time as the store writes it.
pub fn now_utc() -> String {
    crate::workspace::utc(crate::clock::now_ms())
}
