//! The state of one piece of work, folded from its ledger: its stage, the
//! evidence so far and its findings, and read access for reports.

use std::collections::{BTreeMap, BTreeSet};

use super::events::Identity;
use super::stages::{Stage, legal};

/// What the writer of a ledger can see, which decides the rules that ask
/// for evidence: a rule applies only to what could have been recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Everything is recorded on purpose (a task, a workflow run): every
    /// rule applies.
    Everything,
    /// The tool calls of an agent session (Claude Code hooks): reads, edits
    /// and test commands are seen, clarifying and planning never are. No
    /// rule asks for them, and the test commands stand for the plan's
    /// validation.
    ToolCalls,
}

/// A finding's life: open, repaired and awaiting re-review, or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingStatus {
    /// Not repaired yet (or a re-review rejected the repair).
    Open,
    /// Repaired, awaiting a re-review.
    Repaired,
    /// A re-review accepted the repair.
    Resolved,
}

/// The state of one piece of work, folded from its ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub(super) stage: Stage,
    pub(super) owner: Identity,
    pub(super) visibility: Visibility,
    /// Position in the ledger; "after" means a larger number.
    pub(super) seq: u64,
    pub(super) clarified: bool,
    pub(super) inspected: BTreeSet<String>,
    pub(super) validation_intent: Option<String>,
    /// Whether the freshness rule applies: true until a plan says that
    /// nothing is validated.
    pub(super) validation_claimed: bool,
    /// Each path's last edit.
    pub(super) last_edit: BTreeMap<String, u64>,
    /// Paths edited since the last validation: the current attempt.
    pub(super) attempt: BTreeSet<String>,
    pub(super) validations: Vec<Validation>,
    /// (path, command, exit code) → how often an attempt on the path failed
    /// that way.
    pub(super) failures: BTreeMap<(String, String, i32), u32>,
    /// (command, exit code) → how often the command failed that way since
    /// it last passed or new evidence was recorded.
    pub(super) command_failures: BTreeMap<(String, i32), u32>,
    pub(super) independent_review: bool,
    pub(super) findings: Vec<(String, FindingStatus)>,
}

impl State {
    /// A new piece of work owned by `owner`, at Clarify, where everything
    /// is recorded on purpose.
    pub fn new(owner: Identity) -> Self {
        Self::seen_as(owner, Visibility::Everything)
    }

    /// A new piece of work owned by `owner` whose ledger sees `visibility`.
    pub fn seen_as(owner: Identity, visibility: Visibility) -> Self {
        Self {
            stage: Stage::Clarify,
            owner,
            visibility,
            seq: 0,
            clarified: false,
            inspected: BTreeSet::new(),
            validation_intent: None,
            validation_claimed: true,
            last_edit: BTreeMap::new(),
            attempt: BTreeSet::new(),
            validations: Vec::new(),
            failures: BTreeMap::new(),
            command_failures: BTreeMap::new(),
            independent_review: false,
            findings: Vec::new(),
        }
    }

    /// The current stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The findings so far, with their status.
    pub fn findings(&self) -> &[(String, FindingStatus)] {
        &self.findings
    }

    /// `Ok` when every edited path's latest validation since its last edit
    /// covers it and passed, and at least one validation passed — or when
    /// the plan claims no validation; otherwise the reason.
    pub fn validation_fresh(&self) -> Result<(), String> {
        if !self.validation_claimed {
            return Ok(());
        }
        // Per path first: the reason names the file and the failing command.
        for (path, &edited) in &self.last_edit {
            let latest = self
                .validations
                .iter()
                .rev()
                .find(|v| v.seq > edited && v.covers(path));
            match latest {
                None => return Err(format!("{path} was edited after its last validation")),
                Some(v) if v.exit_code != 0 => {
                    return Err(format!(
                        "the latest validation of {path} (`{}`) failed with exit code {}",
                        v.command, v.exit_code
                    ));
                }
                Some(_) => {}
            }
        }
        if !self.validations.iter().any(|v| v.exit_code == 0) {
            return Err("no validation has passed".to_owned());
        }
        Ok(())
    }
}

impl State {
    /// Whether an event moving to `to` may follow the current stage. Where
    /// clarifying and planning cannot be seen (tool calls), the stages
    /// before planning count as planned: what may follow a plan may follow
    /// them.
    pub(super) fn may_follow(&self, to: Stage) -> bool {
        legal(self.stage, to)
            || (self.visibility == Visibility::ToolCalls
                && matches!(self.stage, Stage::Clarify | Stage::Read)
                && legal(Stage::Plan, to))
    }

    /// New evidence about `path`: the path's failures no longer block it,
    /// and the route changed, so no failing command counts as retried.
    pub(super) fn new_evidence(&mut self, path: &str) {
        self.failures.retain(|(failed, _, _), _| failed != path);
        self.command_failures.clear();
    }
}

/// One recorded validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    /// Its position in the ledger.
    pub seq: u64,
    /// The command.
    pub command: String,
    /// Its exit code.
    pub exit_code: i32,
    /// The paths it covers; empty covers every path.
    pub covered: Vec<String>,
}

impl Validation {
    /// Whether it covers `path` (a file, or a directory prefix).
    pub fn covers(&self, path: &str) -> bool {
        self.covered.is_empty()
            || self.covered.iter().any(|c| {
                let c = c.trim_end_matches('/');
                c == "." || c.is_empty() || path == c || path.starts_with(&format!("{c}/"))
            })
    }
}

/// Read access for reports (`baton state`).
impl State {
    /// The owner of the work.
    pub fn owner(&self) -> &Identity {
        &self.owner
    }

    /// How many events have been folded.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether the request was clarified.
    pub fn clarified(&self) -> bool {
        self.clarified
    }

    /// The files inspected.
    pub fn inspected(&self) -> &BTreeSet<String> {
        &self.inspected
    }

    /// The plan's validation intent.
    pub fn validation_intent(&self) -> Option<&str> {
        self.validation_intent.as_deref()
    }

    /// Each edited path and the position of its last edit.
    pub fn last_edits(&self) -> &BTreeMap<String, u64> {
        &self.last_edit
    }

    /// Every validation, in order.
    pub fn validations(&self) -> &[Validation] {
        &self.validations
    }

    /// Whether someone independent of the owner has reviewed.
    pub fn independently_reviewed(&self) -> bool {
        self.independent_review
    }

    /// Whether the plan claims validation (the freshness rule applies).
    pub fn validation_claimed(&self) -> bool {
        self.validation_claimed
    }

    /// What the ledger's writer can see.
    pub fn visibility(&self) -> Visibility {
        self.visibility
    }

    /// The commands that failed the same way twice: a third failing run is
    /// blocked until new evidence is recorded.
    pub fn blocked_commands(&self) -> Vec<(String, i32)> {
        self.command_failures
            .iter()
            .filter(|(_, count)| **count >= 2)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// The paths that failed the same way twice and are blocked until new
    /// evidence is recorded, with the command and exit code.
    pub fn blocked_paths(&self) -> Vec<(String, String, i32)> {
        self.failures
            .iter()
            .filter(|(_, count)| **count >= 2)
            .map(|(key, _)| key.clone())
            .collect()
    }
}
