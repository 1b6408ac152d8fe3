//! A job as `baton queue` prints it and `GET /api/queue` answers: times
//! in UTC, its payload and result as JSON when they are.

use baton_store::JobRow;
use serde_json::{Value, json};

fn utc(ms: Option<i64>) -> Option<String> {
    ms.filter(|ms| *ms > 0).map(crate::workspace::utc)
}

/// The statuses a job goes through, in that order.
pub const STATUSES: [&str; 5] = ["available", "running", "failed", "succeeded", "error"];

/// A job as `queue` commands print it.
pub fn job_json(job: &JobRow) -> Value {
    let parse = |text: &Option<String>| {
        text.as_ref()
            .map(|text| serde_json::from_str::<Value>(text).unwrap_or(Value::String(text.clone())))
    };
    json!({
        "id": job.id,
        "queue": job.queue,
        "kind": job.kind,
        "status": job.status,
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "deferrals": job.deferrals,
        "not_before": utc(Some(job.not_before)),
        "lease_owner": job.lease_owner,
        "lease_epoch": job.lease_epoch,
        "lease_until": utc(Some(job.lease_until)),
        "idempotency_key": job.idempotency_key,
        "created_at": utc(Some(job.created_at)),
        "started_at": utc(job.started_at),
        "finished_at": utc(job.finished_at),
        "payload": parse(&Some(job.payload.clone())),
        "result": parse(&job.result),
        "error": job.error,
    })
}
