//! Human gate decisions and gate output edits.
//!
//! A decision is bound to the gate stage's attempt and to the hash of the
//! artifact decided on; the table's key `(run_id, idx, attempt, sha256)`
//! makes concurrent decisions on one artifact yield exactly one row (the
//! insert does nothing on a conflict and the winner is read back in the same
//! transaction). Neither write needs the run's lease: a decision only adds a
//! row, and an edit of a recorded output is a compare-and-swap on its hash,
//! so a driver that holds the lease is never overwritten blindly.

use serde_json::json;
use sqlx::AssertSqlSafe;

use crate::columns::{Columns, FromColumns};
use crate::gate_outputs::{self, DecidedOutput};
use crate::{Error, Result, Store};

/// A decision to record on a gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewGateDecision {
    /// The run.
    pub run_id: String,
    /// The gate stage's index.
    pub index: i64,
    /// The gate stage's attempt decided on.
    pub attempt: i64,
    /// Hash of the artifact decided on (hex SHA-256).
    pub sha256: String,
    /// `approve` or `reject`.
    pub decision: String,
    /// Who decided.
    pub decided_by: String,
    /// When (ms since the epoch).
    pub decided_at: i64,
    /// Why, if they said.
    pub comment: Option<String>,
    /// The artifact's outputs as they were, kept with the decision.
    pub outputs: Vec<DecidedOutput>,
}

/// A decision as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateDecisionRow {
    /// The gate stage's index.
    pub index: i64,
    /// The attempt decided on.
    pub attempt: i64,
    /// Hash of the artifact decided on.
    pub sha256: String,
    /// `approve` or `reject`.
    pub decision: String,
    /// Who decided.
    pub decided_by: String,
    /// When (ms).
    pub decided_at: i64,
    /// Why.
    pub comment: Option<String>,
}

/// A new version of one recorded output, for [`Store::replace_artifact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactEdit {
    /// The run.
    pub run_id: String,
    /// The stage's index.
    pub index: i64,
    /// Workspace-relative path, as recorded.
    pub path: String,
    /// The hash the caller read; the swap happens only if it is still recorded.
    pub expected_sha256: String,
    /// The new file's hash.
    pub new_sha256: String,
    /// The new file's size.
    pub bytes: i64,
    /// When (ms).
    pub at: i64,
    /// Who edited.
    pub by: String,
}

/// What [`Store::decide_gate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecided {
    /// This decision was recorded.
    Recorded(GateDecisionRow),
    /// Someone decided on this attempt and artifact first; their decision stands.
    AlreadyDecided(GateDecisionRow),
}

impl GateDecided {
    /// The decision that stands, whoever made it.
    pub fn row(&self) -> &GateDecisionRow {
        match self {
            GateDecided::Recorded(row) | GateDecided::AlreadyDecided(row) => row,
        }
    }
}

const DECISION_COLUMNS: &str = "idx, attempt, sha256, decision, decided_by, decided_at, comment";

impl FromColumns for GateDecisionRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(GateDecisionRow {
            index: row.get("idx")?,
            attempt: row.get("attempt")?,
            sha256: row.get("sha256")?,
            decision: row.get("decision")?,
            decided_by: row.get("decided_by")?,
            decided_at: row.get("decided_at")?,
            comment: row.get("comment")?,
        })
    }
}

impl Store {
    /// Records a decision on a gate unless one exists for the same attempt
    /// and artifact hash, in which case that one is returned. A recorded
    /// decision keeps its outputs ([`Store::decided_outputs`]) and appends a `gate_approved`, `gate_rejected` or
    /// `gate_pushed_back` event in the same transaction.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchRun`], or the write fails.
    pub async fn decide_gate(&self, decision: &NewGateDecision) -> Result<GateDecided> {
        let kind = match decision.decision.as_str() {
            "approve" => "gate_approved",
            "push_back" => "gate_pushed_back",
            _ => "gate_rejected",
        };
        let detail = json!({
            "stage": decision.index,
            "attempt": decision.attempt,
            "by": decision.decided_by,
            "sha256": decision.sha256,
            "comment": decision.comment,
        })
        .to_string();
        let mut tx = self.begin().await?;
        let run = [(&decision.run_id).into()];
        let exists = "SELECT 1 FROM runs WHERE run_id = $1";
        let found: Option<()> = tx.fetch_optional(exists, &run, "look for the run").await?;
        if found.is_none() {
            return Err(Error::NoSuchRun(decision.run_id.clone()));
        }
        // On PostgreSQL a concurrent insert of the same key waits here for
        // the first to commit, then inserts nothing; the read below (a new
        // snapshot under READ COMMITTED) sees the winner.
        let insert = "INSERT INTO gate_decisions (run_id, idx, attempt, sha256, decision, \
                      decided_by, decided_at, comment) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                      ON CONFLICT (run_id, idx, attempt, sha256) DO NOTHING";
        let key = [
            run[0],
            decision.index.into(),
            decision.attempt.into(),
            (&decision.sha256).into(),
        ];
        let args = [
            key[0],
            key[1],
            key[2],
            key[3],
            (&decision.decision).into(),
            (&decision.decided_by).into(),
            decision.decided_at.into(),
            (&decision.comment).into(),
        ];
        let inserted = tx.execute(insert, &args, "record a gate decision").await? == 1;
        if inserted {
            let key = (
                decision.run_id.as_str(),
                decision.index,
                decision.attempt,
                decision.sha256.as_str(),
            );
            gate_outputs::insert(&mut tx, key, &decision.outputs).await?;
            let log = "INSERT INTO events (run_id, at, kind, detail) VALUES ($1, $2, $3, $4)";
            let args = [
                run[0],
                decision.decided_at.into(),
                kind.into(),
                (&detail).into(),
            ];
            tx.execute(log, &args, "log the gate decision").await?;
        }
        let select = format!(
            "SELECT {DECISION_COLUMNS} FROM gate_decisions \
             WHERE run_id = $1 AND idx = $2 AND attempt = $3 AND sha256 = $4"
        );
        let row = tx.fetch_one(AssertSqlSafe(select), &key, "read the gate decision");
        let row = row.await?;
        tx.commit().await?;
        Ok(if inserted {
            GateDecided::Recorded(row)
        } else {
            GateDecided::AlreadyDecided(row)
        })
    }

    /// A run's gate decisions, by stage, then oldest first.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn gate_decisions(&self, run_id: &str) -> Result<Vec<GateDecisionRow>> {
        let sql = format!(
            "SELECT {DECISION_COLUMNS} FROM gate_decisions WHERE run_id = $1 \
             ORDER BY idx, decided_at, attempt, sha256"
        );
        self.fetch_all(AssertSqlSafe(sql), &[run_id.into()], "list gate decisions")
            .await
    }

    /// Replaces the recorded hash and size of one output of a stage, if the
    /// recorded hash is still `edit.expected_sha256` (compare-and-swap), and
    /// logs a `gate_output_edited` event naming who edited. Returns false, changing nothing,
    /// when the recorded hash is another (someone else edited it meanwhile)
    /// or the output is not recorded.
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn replace_artifact(&self, edit: &ArtifactEdit) -> Result<bool> {
        let detail = json!({
            "stage": edit.index,
            "path": edit.path,
            "from": edit.expected_sha256,
            "sha256": edit.new_sha256,
            "by": edit.by,
        })
        .to_string();
        let mut tx = self.begin().await?;
        let swap = "UPDATE artifacts SET sha256 = $1, bytes = $2 \
                    WHERE run_id = $3 AND idx = $4 AND path = $5 AND sha256 = $6";
        let args = [
            (&edit.new_sha256).into(),
            edit.bytes.into(),
            (&edit.run_id).into(),
            edit.index.into(),
            (&edit.path).into(),
            (&edit.expected_sha256).into(),
        ];
        let swapped = tx.execute(swap, &args, "replace an artifact").await? == 1;
        if swapped {
            let log = "INSERT INTO events (run_id, at, kind, detail) \
                       VALUES ($1, $2, 'gate_output_edited', $3)";
            let args = [(&edit.run_id).into(), edit.at.into(), (&detail).into()];
            tx.execute(log, &args, "log the edit").await?;
        }
        tx.commit().await?;
        Ok(swapped)
    }
}
