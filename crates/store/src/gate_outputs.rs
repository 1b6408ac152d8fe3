//! What a gate decision was made on: each output of the artifact with its
//! hash and the start of its text, recorded in the decision's transaction,
//! so a gate waiting again can show what changed since.

use crate::columns::{Columns, FromColumns};
use crate::tx::Tx;
use crate::{Result, Store};

/// One output as it was when a gate was decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecidedOutput {
    /// Workspace-relative path.
    pub path: String,
    /// The file's hash (hex SHA-256), or `missing`.
    pub sha256: String,
    /// Its text (lossy UTF-8) as kept: `None` when the file was missing or
    /// nothing of it was kept.
    pub content: Option<String>,
    /// Whether `content` is only the start of the file.
    pub truncated: bool,
}

impl FromColumns for DecidedOutput {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        let truncated: i64 = row.get("truncated")?;
        Ok(DecidedOutput {
            path: row.get("path")?,
            sha256: row.get("file_sha256")?,
            content: row.get("content")?,
            truncated: truncated != 0,
        })
    }
}

/// Which decision: run, stage index, attempt and artifact hash.
pub(crate) type DecisionKey<'a> = (&'a str, i64, i64, &'a str);

/// Records `outputs` for the decision `key`, inside its transaction.
pub(crate) async fn insert(
    tx: &mut Tx,
    key: DecisionKey<'_>,
    outputs: &[DecidedOutput],
) -> Result<()> {
    let (run_id, index, attempt, sha256) = key;
    let insert = "INSERT INTO gate_outputs (run_id, idx, attempt, sha256, path, file_sha256, \
                  content, truncated) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
    for output in outputs {
        let args = [
            run_id.into(),
            index.into(),
            attempt.into(),
            sha256.into(),
            (&output.path).into(),
            (&output.sha256).into(),
            (&output.content).into(),
            i64::from(output.truncated).into(),
        ];
        tx.execute(insert, &args, "record a decided output").await?;
    }
    Ok(())
}

impl Store {
    /// The outputs a decision was made on (stage `index`, `attempt`,
    /// artifact hash `sha256`), by path; empty for a decision recorded
    /// before they were kept.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn decided_outputs(
        &self,
        run_id: &str,
        index: i64,
        attempt: i64,
        sha256: &str,
    ) -> Result<Vec<DecidedOutput>> {
        let sql = "SELECT path, file_sha256, content, truncated FROM gate_outputs \
                   WHERE run_id = $1 AND idx = $2 AND attempt = $3 AND sha256 = $4 ORDER BY path";
        let args = [run_id.into(), index.into(), attempt.into(), sha256.into()];
        self.fetch_all(sql, &args, "read the decided outputs").await
    }
}
