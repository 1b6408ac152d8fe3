//! The summary every run ends with: how many stages succeeded, failed or
//! were skipped, how long the run took, what it cost and where its outputs
//! are.

use std::time::Duration;

use serde_json::{Value, json};

use baton_engine::view::cost::Costs;

/// What a run came to, read from the store once it stopped.
pub(crate) struct Summary {
    /// Stage counts by status, in a fixed order; statuses with no stage are left out.
    counts: Vec<(String, usize)>,
    /// The failed stages and their errors.
    failed: Vec<(String, String)>,
    duration: Option<Duration>,
    costs: Costs,
    workspace: String,
}

/// The order counts are shown in; other statuses follow, by name.
const ORDER: &[&str] = &[
    "success",
    "failed",
    "skipped",
    "cancelled",
    "awaiting_human",
    "running",
    "pending",
];

impl Summary {
    /// Reads the run's stages and usage; `None` when the run cannot be
    /// read (the outcome line still says how it ended).
    pub(crate) async fn read(store: &baton_store::Store, run_id: &str) -> Option<Summary> {
        let (run, stages) = tokio::try_join!(store.run(run_id), store.stages(run_id)).ok()?;
        let mut counts: Vec<(String, usize)> = Vec::new();
        for stage in &stages {
            match counts
                .iter_mut()
                .find(|(status, _)| *status == stage.status)
            {
                Some((_, count)) => *count += 1,
                None => counts.push((stage.status.clone(), 1)),
            }
        }
        counts.sort_by_key(|(status, _)| {
            (
                ORDER
                    .iter()
                    .position(|known| known == status)
                    .unwrap_or(ORDER.len()),
                status.clone(),
            )
        });
        let end = run.finished_at.unwrap_or_else(baton_engine::clock::now_ms);
        let failed = stages
            .iter()
            .filter(|stage| stage.status == "failed")
            .map(|stage| (stage.name.clone(), stage.error.clone().unwrap_or_default()))
            .collect();
        Some(Summary {
            counts,
            failed,
            duration: u64::try_from(end - run.created_at)
                .ok()
                .map(Duration::from_millis),
            costs: Costs::read(
                store,
                run_id,
                &stages,
                &baton_engine::view::subruns::SubRuns::read(store).await,
            )
            .await,
            workspace: run.workspace,
        })
    }

    /// The failed stages whose error says `words`.
    pub(crate) fn failed_where(&self, words: &str) -> Vec<&str> {
        self.failed
            .iter()
            .filter(|(_, error)| error.contains(words))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The error of a failed stage.
    pub(crate) fn error_of(&self, stage: &str) -> Option<&str> {
        self.failed
            .iter()
            .find(|(name, _)| name == stage)
            .map(|(_, error)| error.as_str())
    }

    /// `5 succeeded, 1 skipped in 4.2s; total cost: $0.0123; outputs in DIR`.
    pub(crate) fn line(&self) -> String {
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(status, count)| format!("{count} {}", word(status)))
            .collect();
        let mut line = if counts.is_empty() {
            "no stages".to_owned()
        } else {
            counts.join(", ")
        };
        if let Some(duration) = self.duration {
            line.push_str(&format!(" in {}", crate::progress::human(duration)));
        }
        if let Some(total) = self.costs.total_line() {
            line.push_str(&format!("; {}", total.trim_end()));
        }
        line.push_str(&format!("; outputs in {}", self.workspace));
        line
    }

    /// The same, for `--json`: `{stages: {status: count}, duration_ms, cost_usd, tokens, workspace}`.
    pub(crate) fn json(&self) -> Value {
        let stages: serde_json::Map<String, Value> = self
            .counts
            .iter()
            .map(|(status, count)| (status.clone(), json!(count)))
            .collect();
        let mut value = json!({
            "stages": stages,
            "duration_ms": self.duration.map(|duration| duration.as_millis()),
            "workspace": self.workspace,
        });
        self.costs.describe_json(None, &mut value);
        value
    }
}

/// A stage status as the summary says it.
fn word(status: &str) -> &str {
    match status {
        "success" => "succeeded",
        "awaiting_human" => "waiting at a gate",
        other => other,
    }
}
