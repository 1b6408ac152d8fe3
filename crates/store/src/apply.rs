//! Applying a batch of transitions in one transaction, fenced by the
//! run's lease.
//!
//! Attempt transitions and unit starts and ends are gathered into groups
//! (`attempts.rs`, `unit_writes.rs`) that each database writes as a few
//! many-row statements; every other transition is written here, one or two
//! statements each, and the batch's events go in at the end in one
//! statement.

use crate::batch::{INSERT_EVENTS, PLAN_UNITS, Rows};
use crate::columns::Arg;
use crate::events::{self, Events, json_string, log};
use crate::model::{FindingRow, Lease, NewUnit, Transition, UsageRow};
use crate::tx::Tx;
use crate::{Error, Result, Store, attempts, leases, ledger, unit_writes};

impl Store {
    /// Applies transitions in one transaction, fenced by the lease's epoch.
    ///
    /// # Errors
    ///
    /// [`Error::LostLease`] (nothing is written) or a failed write (nothing is written).
    pub async fn apply(&self, lease: &Lease, transitions: &[Transition]) -> Result<()> {
        self.commit(lease, transitions, false).await
    }

    /// [`Store::apply`] for a drive's last transitions, giving the lease up
    /// in the same transaction ([`Store::release`] would be a commit of its
    /// own at the end of every run).
    ///
    /// # Errors
    ///
    /// As [`Store::apply`]; nothing is written, the lease included, when it fails.
    pub async fn apply_and_release(&self, lease: &Lease, transitions: &[Transition]) -> Result<()> {
        self.commit(lease, transitions, true).await
    }

    async fn commit(&self, lease: &Lease, transitions: &[Transition], release: bool) -> Result<()> {
        if transitions.is_empty() && !release {
            return Ok(());
        }
        self.still_there()?;
        let run_id = lease.run_id.as_str();
        let mut tx = self.begin().await?;
        let fence = tx.dialect().fence;
        let args = [run_id.into(), lease.epoch.into()];
        let fenced: Option<()> = tx.fetch_optional(fence, &args, "check the lease").await?;
        if fenced.is_none() {
            return Err(Error::LostLease {
                run_id: run_id.to_owned(),
                epoch: lease.epoch,
            });
        }
        let events = write_transitions(&mut tx, run_id, transitions).await?;
        let events: Rows<'_> = events
            .iter()
            .map(|(at, kind, detail)| [(*at).into(), kind.into(), detail.into()])
            .collect();
        tx.write_rows(run_id, &INSERT_EVENTS, &events).await?;
        if release {
            tx.execute(leases::RELEASE, &args, "release the lease")
                .await?;
        }
        tx.commit().await?;
        if !release {
            self.checkpoint_once().await;
        }
        Ok(())
    }
}

/// Writes `transitions` in the transaction; returns the events they log.
/// Attempt and unit transitions touch different tables, so the two groups
/// may be written in either order; anything else is written after both.
async fn write_transitions(
    tx: &mut Tx,
    run_id: &str,
    transitions: &[Transition],
) -> Result<Events> {
    let mut events = Events::new();
    let mut group = attempts::Group::default();
    let mut units = unit_writes::Group::default();
    for transition in transitions {
        if attempts::Group::kind_of(transition) {
            if !group.fits(transition) {
                flush_attempts(tx, run_id, &mut group).await?;
            }
            group.add(transition);
            events::log_attempt(&mut events, transition);
        } else if unit_writes::Group::kind_of(transition) {
            if !units.fits(transition) {
                flush_units(tx, run_id, &mut units).await?;
            }
            units.add(transition);
            events::log_unit(&mut events, transition);
        } else {
            flush_attempts(tx, run_id, &mut group).await?;
            flush_units(tx, run_id, &mut units).await?;
            write_one(tx, run_id, transition, &mut events).await?;
        }
    }
    flush_attempts(tx, run_id, &mut group).await?;
    flush_units(tx, run_id, &mut units).await?;
    Ok(events)
}

/// Writes a group of attempt transitions and empties it.
async fn flush_attempts(tx: &mut Tx, run_id: &str, group: &mut attempts::Group<'_>) -> Result<()> {
    let nets = group.take();
    for (statement, rows) in attempts::statements(&nets) {
        if !rows.is_empty() {
            tx.write_rows(run_id, statement, &rows).await?;
        }
    }
    Ok(())
}

/// Writes a group of unit starts and ends and empties it.
async fn flush_units(tx: &mut Tx, run_id: &str, group: &mut unit_writes::Group<'_>) -> Result<()> {
    if group.is_empty() {
        return Ok(());
    }
    for (statement, rows) in group.statements() {
        if !rows.is_empty() {
            tx.write_rows(run_id, statement, &rows).await?;
        }
    }
    group.clear();
    Ok(())
}

/// Writes one transition that belongs to neither group.
async fn write_one(
    tx: &mut Tx,
    run_id: &str,
    transition: &Transition,
    events: &mut Events,
) -> Result<()> {
    match transition {
        Transition::AttemptStarted { .. }
        | Transition::ProcessStarted { .. }
        | Transition::AttemptFinished { .. }
        | Transition::UnitStarted { .. }
        | Transition::UnitFinished { .. } => {}
        Transition::AttemptInterrupted { index, attempt, at } => {
            let sql = "UPDATE attempts SET status = 'interrupted', finished_at = $1 \
                       WHERE run_id = $2 AND idx = $3 AND attempt = $4";
            let args = [
                (*at).into(),
                run_id.into(),
                (*index).into(),
                (*attempt).into(),
            ];
            tx.execute(sql, &args, "interrupt an attempt").await?;
            let sql = "UPDATE stages SET status = 'pending' WHERE run_id = $1 AND idx = $2";
            tx.execute(sql, &[run_id.into(), (*index).into()], "reset a stage")
                .await?;
            let detail = format!("{{\"stage\":{index},\"attempt\":{attempt}}}");
            log(events, *at, "attempt_interrupted", detail);
        }
        Transition::StageReset { index, note } => {
            let sql = "UPDATE stages SET status = 'pending', started_at = NULL, finished_at = NULL, \
                       error = NULL, note = $1 WHERE run_id = $2 AND idx = $3";
            let args = [note.into(), run_id.into(), (*index).into()];
            tx.execute(sql, &args, "reset a stage").await?;
            let sql = "DELETE FROM artifacts WHERE run_id = $1 AND idx = $2";
            tx.execute(sql, &[run_id.into(), (*index).into()], "forget artifacts")
                .await?;
        }
        Transition::StageSkipped { index, at, note } => {
            let sql = "UPDATE stages SET status = 'skipped', started_at = $1, finished_at = $1, \
                       note = $2 WHERE run_id = $3 AND idx = $4";
            let args = [(*at).into(), note.into(), run_id.into(), (*index).into()];
            tx.execute(sql, &args, "skip a stage").await?;
        }
        Transition::RunStatus { status, at, error } => {
            let terminal = matches!(
                status.as_str(),
                "success" | "failed" | "cancelled" | "rejected"
            );
            let sql = "UPDATE runs SET status = $1, error = $2, finished_at = $3 WHERE run_id = $4";
            let finished = terminal.then_some(*at);
            let args = [status.into(), error.into(), finished.into(), run_id.into()];
            tx.execute(sql, &args, "set the run status").await?;
            let detail = format!("{{\"status\":{}}}", json_string(status));
            log(events, *at, "run_status", detail);
        }
        Transition::UnitsPlanned { index, units, at } => {
            let rows: Rows<'_> = units.iter().map(|unit| unit_row(*index, unit)).collect();
            tx.write_rows(run_id, &PLAN_UNITS, &rows).await?;
            let detail = format!("{{\"stage\":{index},\"units\":{}}}", units.len());
            log(events, *at, "units_planned", detail);
        }
        Transition::UnitsResumed { index } => {
            let sql = "UPDATE units SET status = 'pending' \
                       WHERE run_id = $1 AND idx = $2 AND status IN ('running', 'failed')";
            tx.execute(sql, &[run_id.into(), (*index).into()], "resume units")
                .await?;
        }
        Transition::UnitsCleared { index } => {
            let args = [run_id.into(), (*index).into()];
            let sql = "DELETE FROM units WHERE run_id = $1 AND idx = $2";
            tx.execute(sql, &args, "clear units").await?;
            let sql = "DELETE FROM findings WHERE run_id = $1 AND idx = $2";
            tx.execute(sql, &args, "clear findings").await?;
        }
        Transition::FindingsRecorded {
            index,
            cycle,
            findings,
        } => record_findings(tx, run_id, (*index, *cycle), findings).await?,
        Transition::ArtifactsRecorded {
            index,
            at,
            artifacts,
        } => {
            record_artifacts(tx, run_id, *index, artifacts).await?;
            let detail = format!("{{\"stage\":{index},\"artifacts\":{}}}", artifacts.len());
            log(events, *at, "artifacts_recorded", detail);
        }
        Transition::UsageRecorded(usage) => record_usage(tx, run_id, usage).await?,
        Transition::Event { at, kind, detail } => log(events, *at, kind, detail.clone()),
        Transition::LedgerAppended(event) => {
            ledger::append(tx, event, None).await?;
        }
    }
    Ok(())
}

/// Replaces the findings of one validation cycle.
async fn record_findings(
    tx: &mut Tx,
    run_id: &str,
    (index, cycle): (i64, i64),
    findings: &[FindingRow],
) -> Result<()> {
    let sql = "DELETE FROM findings WHERE run_id = $1 AND idx = $2 AND cycle = $3";
    let args = [run_id.into(), index.into(), cycle.into()];
    tx.execute(sql, &args, "replace findings").await?;
    let sql = "INSERT INTO findings (run_id, idx, cycle, position, finding_id, status, severity, \
               category, claim, expected, actual, source, fix) \
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";
    for (position, finding) in (0_i64..).zip(findings) {
        let args = [
            run_id.into(),
            index.into(),
            cycle.into(),
            position.into(),
            (&finding.id).into(),
            (&finding.status).into(),
            (&finding.severity).into(),
            (&finding.category).into(),
            (&finding.claim).into(),
            (&finding.expected).into(),
            (&finding.actual).into(),
            (&finding.source).into(),
            (&finding.fix).into(),
        ];
        tx.execute(sql, &args, "record a finding").await?;
    }
    Ok(())
}

/// Replaces a stage's recorded outputs, its status unchanged.
async fn record_artifacts(
    tx: &mut Tx,
    run_id: &str,
    index: i64,
    artifacts: &[(String, String, i64)],
) -> Result<()> {
    let sql = "DELETE FROM artifacts WHERE run_id = $1 AND idx = $2";
    tx.execute(sql, &[run_id.into(), index.into()], "replace artifacts")
        .await?;
    let sql =
        "INSERT INTO artifacts (run_id, idx, path, sha256, bytes) VALUES ($1, $2, $3, $4, $5)";
    for (path, sha256, bytes) in artifacts {
        let args = [
            run_id.into(),
            index.into(),
            path.into(),
            sha256.into(),
            (*bytes).into(),
        ];
        tx.execute(sql, &args, "record an artifact").await?;
    }
    Ok(())
}

/// Replaces the usage row of one attempt.
async fn record_usage(tx: &mut Tx, run_id: &str, usage: &UsageRow) -> Result<()> {
    let sql = "DELETE FROM usage WHERE run_id = $1 AND idx = $2 AND unit_key = $3 AND attempt = $4";
    let key = [
        run_id.into(),
        usage.index.into(),
        (&usage.unit).into(),
        usage.attempt.into(),
    ];
    tx.execute(sql, &key, "replace usage").await?;
    let sql = "INSERT INTO usage (run_id, idx, unit_key, attempt, input_tokens, output_tokens, \
               cache_read_tokens, cache_write_tokens, cost_microusd, turns, session_id, model, \
               resumed_session) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";
    let args = [
        key[0],
        key[1],
        key[2],
        key[3],
        usage.input_tokens.into(),
        usage.output_tokens.into(),
        usage.cache_read_tokens.into(),
        usage.cache_write_tokens.into(),
        usage.cost_microusd.into(),
        usage.turns.into(),
        (&usage.session_id).into(),
        (&usage.model).into(),
        (&usage.resumed_session).into(),
    ];
    tx.execute(sql, &args, "record usage").await?;
    Ok(())
}

/// A row of [`PLAN_UNITS`].
fn unit_row(index: i64, unit: &NewUnit) -> [Arg<'_>; 7] {
    [
        index.into(),
        (&unit.key).into(),
        unit.ordinal.into(),
        (&unit.kind).into(),
        unit.cycle.into(),
        (&unit.label).into(),
        (&unit.spec).into(),
    ]
}
