//! Retries for `baton status`: an agent attempt run again after its agent
//! reported a rate limit or a server error (a profile's `[retry]`). While
//! the stage runs, its detail says it is retrying and why; afterwards, how
//! often and after what.

use serde_json::{Value, json};

use baton_engine::retries::Recorded;

/// A run's recorded retries, read once.
#[derive(Debug, Default)]
pub(crate) struct Retries {
    recorded: Vec<Recorded>,
}

impl Retries {
    /// The run's retries; a failed read shows none (they are detail).
    pub(crate) async fn read(store: &baton_store::Store, run_id: &str) -> Retries {
        Retries {
            recorded: baton_engine::retries::read(store, run_id)
                .await
                .unwrap_or_default(),
        }
    }

    /// The retries that tell of the stage as it is now: those of its
    /// latest attempt, and those of its units (fan-out children,
    /// validators), oldest first.
    fn current<'a>(
        &'a self,
        stage: &'a baton_store::StageRow,
    ) -> impl Iterator<Item = &'a Recorded> {
        self.recorded.iter().filter(move |retry| {
            retry.index == stage.index && (retry.unit.is_some() || retry.attempt == stage.attempts)
        })
    }

    /// `retrying (1 of 2): …` while the stage runs, `retried 1× after: …`
    /// once it ran; `None` when it was never retried.
    pub(crate) fn detail(&self, stage: &baton_store::StageRow) -> Option<String> {
        let retries: Vec<&Recorded> = self.current(stage).collect();
        let last = retries.last()?;
        let unit = last
            .unit
            .as_deref()
            .map_or_else(String::new, |unit| format!("[{unit}] "));
        Some(if stage.status == "running" {
            format!(
                "{unit}retrying ({} of {}): {}",
                last.retry, last.of, last.reason
            )
        } else {
            format!("retried {}× after: {unit}{}", retries.len(), last.reason)
        })
    }

    /// Adds `retries` (every recorded retry of the stage, all attempts) and
    /// `retrying` (the retry under way while the stage runs, else `null`).
    pub(crate) fn describe_json(&self, stage: &baton_store::StageRow, entry: &mut Value) {
        let all: Vec<Value> = self
            .recorded
            .iter()
            .filter(|retry| retry.index == stage.index)
            .map(|retry| {
                json!({
                    "unit": retry.unit,
                    "attempt": retry.attempt,
                    "retry": retry.retry,
                    "of": retry.of,
                    "at": baton_engine::workspace::utc(retry.at),
                    "wait_ms": retry.wait_ms,
                    "reason": retry.reason,
                })
            })
            .collect();
        entry["retries"] = json!(all);
        entry["retrying"] = match self.current(stage).last() {
            Some(last) if stage.status == "running" => json!({
                "unit": last.unit,
                "retry": last.retry,
                "of": last.of,
                "until": baton_engine::workspace::utc(last.wait_until()),
                "reason": last.reason,
            }),
            _ => Value::Null,
        };
    }
}
