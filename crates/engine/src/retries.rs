//! Retries of an agent attempt after a reported rate limit or server error
//! (a profile's `[retry]`, run by `stage.rs`): the note the run's progress
//! shows, and the event recorded in the run's log, so that `baton status`
//! can say why a stage waits, or waited, long after the progress is gone.

use std::time::Duration;

use baton_store::{EventRow, Store, Transition};
use serde::{Deserialize, Serialize};

/// The kind of the event a retry is recorded as.
pub const KIND: &str = "agent_retry";

/// One retry of an attempt, as the attempt reports it.
#[derive(Debug, Clone)]
pub(crate) struct Retry {
    /// The stage, with the unit for a fan-out child or a validator.
    pub(crate) label: String,
    pub(crate) index: usize,
    pub(crate) unit: Option<String>,
    pub(crate) attempt: i64,
    /// Which retry this is, from 1, and how many the profile allows.
    pub(crate) retry: u32,
    pub(crate) of: u32,
    pub(crate) wait: Duration,
    /// The attempt's error as the failed try left it.
    pub(crate) reason: String,
}

impl Retry {
    /// What the run's progress shows.
    pub(crate) fn note(&self) -> String {
        format!(
            "{}: {} — retry {} of {} in {:.1}s",
            self.label,
            self.reason,
            self.retry,
            self.of,
            self.wait.as_secs_f64()
        )
    }

    /// The event that records it, at `at` (ms).
    pub(crate) fn transition(&self, at: i64) -> Transition {
        let recorded = Recorded {
            index: i64::try_from(self.index).unwrap_or(i64::MAX),
            unit: self.unit.clone(),
            attempt: self.attempt,
            retry: self.retry,
            of: self.of,
            wait_ms: u64::try_from(self.wait.as_millis()).unwrap_or(u64::MAX),
            reason: self.reason.clone(),
            at,
        };
        Transition::Event {
            at,
            kind: KIND.to_owned(),
            detail: serde_json::to_string(&recorded).unwrap_or_else(|_| "{}".to_owned()),
        }
    }
}

/// A retry as the run's log holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// The stage's index.
    #[serde(rename = "stage")]
    pub index: i64,
    /// The unit (a fan-out child, a validator), if the retry was one's.
    pub unit: Option<String>,
    /// The stage's (or unit's) attempt.
    pub attempt: i64,
    /// Which retry, from 1.
    pub retry: u32,
    /// How many retries the profile allows.
    pub of: u32,
    /// The wait before the retry, in ms.
    pub wait_ms: u64,
    /// Why: the failed try's error, the agent's own words first.
    pub reason: String,
    /// When the retry was decided (ms).
    #[serde(default)]
    pub at: i64,
}

impl Recorded {
    /// When the wait before the retry ends (ms).
    pub fn wait_until(&self) -> i64 {
        self.at
            .saturating_add(i64::try_from(self.wait_ms).unwrap_or(i64::MAX))
    }
}

/// Every retry recorded for a run, oldest first (an event that does not
/// read is left out: it is a record for people, not state).
///
/// # Errors
///
/// The store cannot be read.
pub async fn read(store: &Store, run_id: &str) -> Result<Vec<Recorded>, baton_store::Error> {
    let rows = store.events_of_kind(run_id, KIND).await?;
    Ok(parse(&rows))
}

fn parse(rows: &[EventRow]) -> Vec<Recorded> {
    rows.iter()
        .filter_map(|row| serde_json::from_str(&row.detail).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_retry_reads_back() {
        let retry = Retry {
            label: "review[item:a]".to_owned(),
            index: 3,
            unit: Some("item:a".to_owned()),
            attempt: 1,
            retry: 1,
            of: 2,
            wait: Duration::from_millis(2500),
            reason: "the agent reported: API Error: 429 (exited with code 1)".to_owned(),
        };
        assert_eq!(
            retry.note(),
            "review[item:a]: the agent reported: API Error: 429 (exited with code 1) — retry 1 of 2 in 2.5s"
        );
        let Transition::Event { at, kind, detail } = retry.transition(1_000) else {
            panic!("an event");
        };
        let row = EventRow {
            seq: 1,
            at,
            kind,
            detail,
        };
        let junk = EventRow {
            detail: "not json".to_owned(),
            ..row.clone()
        };
        let read = parse(&[row, junk]);
        assert_eq!(
            read,
            [Recorded {
                index: 3,
                unit: Some("item:a".to_owned()),
                attempt: 1,
                retry: 1,
                of: 2,
                wait_ms: 2500,
                reason: "the agent reported: API Error: 429 (exited with code 1)".to_owned(),
                at: 1_000,
            }]
        );
        assert_eq!(read[0].wait_until(), 3_500);
    }
}
