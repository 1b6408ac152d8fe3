//! The rows the store reads and the transitions it writes.

/// A run to create, with its stages.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// Filesystem-safe id, `[a-z0-9-]+`.
    pub run_id: String,
    /// The workflow's `name`.
    pub workflow: String,
    /// The workflow file as given.
    pub workflow_path: String,
    /// The run's workspace directory (absolute).
    pub workspace: String,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// The compiled plan as JSON (what `resume` re-reads).
    pub plan: String,
    /// Resolved parameters as JSON.
    pub params: String,
    /// Digests of the workflow and every fragment, as JSON.
    pub sources: String,
    /// Run options (max parallel, base directory) as JSON.
    pub options: String,
    /// Stage names in index order.
    pub stages: Vec<String>,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    /// Id.
    pub run_id: String,
    /// Workflow name.
    pub workflow: String,
    /// Workflow file as given.
    pub workflow_path: String,
    /// Workspace directory.
    pub workspace: String,
    /// `pending`, `running`, `success`, `failed`, `awaiting_human`,
    /// `rejected` (at a gate), `cancelled`.
    pub status: String,
    /// Creation time (ms).
    pub created_at: i64,
    /// End time (ms), once terminal.
    pub finished_at: Option<i64>,
    /// Plan JSON.
    pub plan: String,
    /// Params JSON.
    pub params: String,
    /// Source digests JSON.
    pub sources: String,
    /// Options JSON.
    pub options: String,
    /// Why the run failed, if it did.
    pub error: Option<String>,
    /// Lease holder, if any.
    pub lease_owner: Option<String>,
    /// Current fencing epoch.
    pub lease_epoch: i64,
    /// Lease expiry (ms).
    pub lease_until: i64,
}

/// A stage as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageRow {
    /// Index.
    pub index: i64,
    /// Name.
    pub name: String,
    /// `pending`, `running`, `success`, `failed`, `skipped`, `awaiting_human`.
    pub status: String,
    /// Attempts started so far.
    pub attempts: i64,
    /// Start of the latest attempt (ms).
    pub started_at: Option<i64>,
    /// End of the latest attempt (ms).
    pub finished_at: Option<i64>,
    /// Why it failed.
    pub error: Option<String>,
    /// A note (skipped by `when`, rerun because stale, …).
    pub note: Option<String>,
}

impl StageRow {
    /// Duration of the latest attempt in ms, once finished.
    pub fn duration_ms(&self) -> Option<i64> {
        Some(self.finished_at? - self.started_at?)
    }
}

/// One attempt of a stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRow {
    /// Stage index.
    pub index: i64,
    /// Attempt number, from 1.
    pub attempt: i64,
    /// `running`, `success`, `failed`, `interrupted`.
    pub status: String,
    /// Process id.
    pub pid: Option<i64>,
    /// Process group id.
    pub pgid: Option<i64>,
    /// Process start time (`/proc/<pid>/stat` field 22).
    pub proc_start: Option<i64>,
    /// Start (ms).
    pub started_at: i64,
    /// End (ms).
    pub finished_at: Option<i64>,
    /// Exit code.
    pub exit_code: Option<i64>,
    /// Error.
    pub error: Option<String>,
}

/// A recorded output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRow {
    /// Stage index.
    pub index: i64,
    /// Workspace-relative path.
    pub path: String,
    /// Hex SHA-256.
    pub sha256: String,
    /// Size.
    pub bytes: i64,
}

/// One entry of the event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Position in the log.
    pub seq: i64,
    /// Time (ms).
    pub at: i64,
    /// Kind, e.g. `stage_finished`.
    pub kind: String,
    /// Details as JSON.
    pub detail: String,
}

/// The right to drive a run, until `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run_id: String,
    /// Who holds it.
    pub owner: String,
    /// The fencing epoch every write carries.
    pub epoch: i64,
    /// Expiry (ms).
    pub until: i64,
}

/// Who holds a lease, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    /// Owner string (`host:pid:start`).
    pub owner: String,
    /// Expiry (ms).
    pub until: i64,
}

/// One state change, applied under a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// An event appended to a governance ledger in the same transaction as
    /// the results it describes, numbered as `Store::append_ledger` numbers them.
    LedgerAppended(NewLedgerEvent),
    /// A new attempt of a stage starts.
    AttemptStarted {
        /// Stage index.
        index: i64,
        /// Attempt number.
        attempt: i64,
        /// Time (ms).
        at: i64,
    },
    /// The attempt's process is running.
    ProcessStarted {
        /// Stage index.
        index: i64,
        /// Attempt number.
        attempt: i64,
        /// Pid.
        pid: i64,
        /// Process group.
        pgid: i64,
        /// Process start time.
        proc_start: i64,
    },
    /// An attempt ended; the stage takes its status.
    AttemptFinished {
        /// Stage index.
        index: i64,
        /// Attempt number.
        attempt: i64,
        /// Stage status: `success`, `failed`, `skipped`, `awaiting_human`.
        status: String,
        /// Time (ms).
        at: i64,
        /// Exit code.
        exit_code: Option<i64>,
        /// Error.
        error: Option<String>,
        /// Recorded outputs: (path, sha256, bytes).
        artifacts: Vec<(String, String, i64)>,
    },
    /// An attempt found running after a crash was interrupted; the stage is pending again.
    AttemptInterrupted {
        /// Stage index.
        index: i64,
        /// Attempt number.
        attempt: i64,
        /// Time (ms).
        at: i64,
    },
    /// A stage is set back to pending (rerun, or its outputs changed).
    StageReset {
        /// Stage index.
        index: i64,
        /// Why.
        note: String,
    },
    /// A stage is skipped without running (a false `when`).
    StageSkipped {
        /// Stage index.
        index: i64,
        /// Time (ms).
        at: i64,
        /// Why.
        note: String,
    },
    /// The run's status changes.
    RunStatus {
        /// New status.
        status: String,
        /// Time (ms).
        at: i64,
        /// Error, for a failed run.
        error: Option<String>,
    },
    /// Units of work inside a stage are planned (fan-out children,
    /// validators, a correction); existing keys are left as they are.
    UnitsPlanned {
        /// Stage index.
        index: i64,
        /// The units.
        units: Vec<NewUnit>,
        /// Time (ms).
        at: i64,
    },
    /// A unit's attempt starts.
    UnitStarted {
        /// Stage index.
        index: i64,
        /// Unit key.
        key: String,
        /// Time (ms).
        at: i64,
    },
    /// A unit's attempt ended.
    UnitFinished {
        /// Stage index.
        index: i64,
        /// Unit key.
        key: String,
        /// `success` or `failed`.
        status: String,
        /// Time (ms).
        at: i64,
        /// Exit code.
        exit_code: Option<i64>,
        /// Error.
        error: Option<String>,
        /// Recorded outputs: (path, sha256, bytes).
        artifacts: Vec<(String, String, i64)>,
    },
    /// Units left running by a crash, or failed, are set back to pending
    /// (finished ones keep their result).
    UnitsResumed {
        /// Stage index.
        index: i64,
    },
    /// A stage's units and findings are forgotten (the stage reruns from scratch).
    UnitsCleared {
        /// Stage index.
        index: i64,
    },
    /// The findings of one validation cycle (replacing any recorded before
    /// for that cycle).
    FindingsRecorded {
        /// Stage index.
        index: i64,
        /// Cycle, from 1.
        cycle: i64,
        /// The findings (their `index`, `cycle` and `position` are ignored).
        findings: Vec<FindingRow>,
    },
    /// A stage's recorded outputs are replaced by these (path, sha256,
    /// bytes), its status unchanged: another stage changed its files on
    /// purpose (a validation's correction of the stages it validates), so a
    /// resume must not take them for changed.
    ArtifactsRecorded {
        /// Stage index.
        index: i64,
        /// Time (ms).
        at: i64,
        /// Recorded outputs: (path, sha256, bytes).
        artifacts: Vec<(String, String, i64)>,
    },
    /// What an agent attempt consumed (replacing any row recorded for the
    /// same stage, unit and attempt).
    UsageRecorded(UsageRow),
    /// Something worth logging.
    Event {
        /// Time (ms).
        at: i64,
        /// Kind.
        kind: String,
        /// JSON details.
        detail: String,
    },
}

/// A unit of work to record inside a stage: a fan-out child, a validator, a
/// correction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUnit {
    /// Unique within the stage (`item:<key>`, `v1:unit:3`, …).
    pub key: String,
    /// Order within the stage.
    pub ordinal: i64,
    /// `item`, `validator`, `challenger`, `evidence`, `correction`, …
    pub kind: String,
    /// Validation cycle (0 outside validation).
    pub cycle: i64,
    /// What to show: `stage[key]`.
    pub label: String,
    /// What the unit works on, as JSON (the item, the validated unit).
    pub spec: String,
}

/// A unit as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitRow {
    /// Stage index.
    pub index: i64,
    /// Key, unique within the stage.
    pub key: String,
    /// Order within the stage.
    pub ordinal: i64,
    /// Kind.
    pub kind: String,
    /// Validation cycle.
    pub cycle: i64,
    /// Label.
    pub label: String,
    /// Spec JSON.
    pub spec: String,
    /// `pending`, `running`, `success`, `failed`.
    pub status: String,
    /// Attempts started.
    pub attempts: i64,
    /// Start of the latest attempt (ms).
    pub started_at: Option<i64>,
    /// End of the latest attempt (ms).
    pub finished_at: Option<i64>,
    /// Exit code of the latest attempt.
    pub exit_code: Option<i64>,
    /// Why it failed.
    pub error: Option<String>,
    /// Outputs it recorded: JSON `[[path, sha256, bytes], …]`.
    pub artifacts: String,
}

/// One validation finding (the reference's format).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FindingRow {
    /// Stage index.
    pub index: i64,
    /// Validation cycle (from 1).
    pub cycle: i64,
    /// Position within the cycle's findings.
    pub position: i64,
    /// The finding's `id`.
    pub id: String,
    /// `PASS`, `FAIL`, `WARN`.
    pub status: String,
    /// `critical`, `minor`, `info`.
    pub severity: String,
    /// Category.
    pub category: String,
    /// What was claimed.
    pub claim: String,
    /// What was expected.
    pub expected: String,
    /// What was found.
    pub actual: String,
    /// Where (file, line, command).
    pub source: String,
    /// How to fix it.
    pub fix: String,
}

/// An event to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLedgerEvent {
    /// `run`, `task` or `session`.
    pub scope_kind: String,
    /// The run id, task name or session id.
    pub scope_key: String,
    /// The event's kind (`edited`, `validated`, …).
    pub kind: String,
    /// The evidence, as JSON text.
    pub payload: String,
    /// Who acted: the agent profile.
    pub profile: String,
    /// Who acted: the model, when configured.
    pub model: Option<String>,
    /// Who acted: the session.
    pub session: String,
    /// When it was recorded (ms since the epoch); informational only.
    pub recorded_at: i64,
}

/// The usage of one attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageRow {
    /// Stage index.
    pub index: i64,
    /// The unit's key, or empty for the stage's own attempt.
    pub unit: String,
    /// Attempt number.
    pub attempt: i64,
    /// Input tokens not read from a cache.
    pub input_tokens: Option<i64>,
    /// Output tokens.
    pub output_tokens: Option<i64>,
    /// Input tokens read from the provider's cache.
    pub cache_read_tokens: Option<i64>,
    /// Input tokens written to the provider's cache.
    pub cache_write_tokens: Option<i64>,
    /// Cost in millionths of a USD (integers stay exact on both backends).
    pub cost_microusd: Option<i64>,
    /// Agent turns.
    pub turns: Option<i64>,
    /// The agent's session id.
    pub session_id: Option<String>,
    /// The model baton priced the tokens for, when it did.
    pub model: Option<String>,
    /// The agent session the attempt continued instead of starting a new
    /// one, if it did.
    pub resumed_session: Option<String>,
}
