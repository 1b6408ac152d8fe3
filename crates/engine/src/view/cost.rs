//! Tokens and cost for `baton status`: the recorded usage of every attempt
//! (failed ones too: their tokens were spent), summed per stage and per run;
//! and the agent sessions attempts continued instead of starting anew.

use serde_json::{Value, json};

/// Micro-dollars, as the store keeps costs, in dollars.
pub(super) fn usd(micro: Option<i64>) -> Option<f64> {
    #[expect(clippy::cast_precision_loss, reason = "micro-dollars of real spending")]
    micro.map(|micro| micro as f64 / 1_000_000.0)
}

/// Sums of usage rows.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Totals {
    input: i64,
    output: i64,
    cache_read: i64,
    cache_write: i64,
    /// `None` when no row reported or priced a cost.
    cost_microusd: Option<i64>,
}

impl Totals {
    fn add(&mut self, row: &baton_store::UsageRow) {
        self.input = self.input.saturating_add(row.input_tokens.unwrap_or(0));
        self.output = self.output.saturating_add(row.output_tokens.unwrap_or(0));
        self.cache_read = self
            .cache_read
            .saturating_add(row.cache_read_tokens.unwrap_or(0));
        self.cache_write = self
            .cache_write
            .saturating_add(row.cache_write_tokens.unwrap_or(0));
        if let Some(cost) = row.cost_microusd {
            self.cost_microusd = Some(self.cost_microusd.unwrap_or(0).saturating_add(cost));
        }
    }

    fn json(&self) -> (Value, Value) {
        (
            json!(usd(self.cost_microusd)),
            json!({
                "input": self.input,
                "output": self.output,
                "cache_read": self.cache_read,
                "cache_write": self.cache_write,
            }),
        )
    }

    fn tokens_text(&self) -> String {
        let mut text = format!("{} in, {} out", self.input, self.output);
        if self.cache_read > 0 {
            text.push_str(&format!(", {} cache read", self.cache_read));
        }
        if self.cache_write > 0 {
            text.push_str(&format!(", {} cache write", self.cache_write));
        }
        text
    }
}

/// A run's usage, read once, with its sub-runs' usage rolled up into the
/// stages that ran them.
#[derive(Debug, Default)]
pub struct Costs {
    /// The run's own attempts.
    rows: Vec<baton_store::UsageRow>,
    /// The attempts of its sub-runs (and theirs), each re-indexed to the
    /// parent's `kind: sub-workflow` stage: they count in totals only.
    rolled_up: Vec<baton_store::UsageRow>,
}

impl Costs {
    /// The run's usage rows and those of its sub-runs (the run's `stages`,
    /// `subruns` as the caller read them); a failed read shows none (usage
    /// is detail).
    pub async fn read(
        store: &baton_store::Store,
        run_id: &str,
        stages: &[baton_store::StageRow],
        subruns: &super::subruns::SubRuns,
    ) -> Costs {
        let mut rolled_up = Vec::new();
        for stage in stages {
            let mut pending: Vec<String> = subruns
                .child(run_id, &stage.name)
                .map(|child| child.run_id.clone())
                .into_iter()
                .collect();
            // Depth is bounded by the compiler's nesting limit; the count
            // keeps a corrupted store from looping.
            let mut visited = 0;
            while let Some(child) = pending.pop().filter(|_| visited < 1_000) {
                visited += 1;
                for mut row in store.usage(&child).await.unwrap_or_default() {
                    row.index = stage.index;
                    rolled_up.push(row);
                }
                pending.extend(subruns.children_of(&child).map(|run| run.run_id.clone()));
            }
        }
        Costs {
            rows: store.usage(run_id).await.unwrap_or_default(),
            rolled_up,
        }
    }

    fn totals(&self, index: Option<i64>) -> Option<Totals> {
        let mut rows = self
            .rows
            .iter()
            .chain(&self.rolled_up)
            .filter(|row| index.is_none_or(|index| row.index == index))
            .peekable();
        rows.peek()?;
        let mut totals = Totals::default();
        rows.for_each(|row| totals.add(row));
        Some(totals)
    }

    /// Sets `cost_usd` and `tokens` on a stage's (or, with `None`, the
    /// run's) JSON: null when nothing was recorded. A stage whose attempts
    /// continued agent sessions lists them as `sessions_continued`.
    pub fn describe_json(&self, index: Option<i64>, entry: &mut Value) {
        let (cost, tokens) = self
            .totals(index)
            .map_or((Value::Null, Value::Null), |totals| totals.json());
        entry["cost_usd"] = cost;
        entry["tokens"] = tokens;
        let Some(index) = index else { return };
        let continued: Vec<Value> = self
            .continued(index)
            .map(|(row, session)| {
                json!({
                    "unit": (!row.unit.is_empty()).then_some(&row.unit),
                    "attempt": row.attempt,
                    "session": session,
                })
            })
            .collect();
        if !continued.is_empty() {
            entry["sessions_continued"] = json!(continued);
        }
    }

    /// The rows of a stage's attempts that continued an agent session, with
    /// the session.
    fn continued(&self, index: i64) -> impl Iterator<Item = (&baton_store::UsageRow, &str)> {
        self.rows
            .iter()
            .filter(move |row| row.index == index)
            .filter_map(|row| row.resumed_session.as_deref().map(|session| (row, session)))
    }

    /// `c1:correct continued session 8d1f…`, one per attempt that did, for
    /// the table's detail cell.
    pub fn continued_cells(&self, index: i64) -> Vec<String> {
        self.continued(index)
            .map(|(row, session)| {
                let who = if row.unit.is_empty() {
                    format!("attempt {}", row.attempt)
                } else {
                    row.unit.clone()
                };
                format!("{who} continued session {session}")
            })
            .collect()
    }

    /// The table's `cost` cell of a stage.
    pub fn cost_cell(&self, index: i64) -> String {
        self.totals(Some(index))
            .and_then(|totals| usd(totals.cost_microusd))
            .map(dollars)
            .unwrap_or_default()
    }

    /// The table's `tokens` cell of a stage.
    pub fn tokens_cell(&self, index: i64) -> String {
        self.totals(Some(index))
            .map(|totals| totals.tokens_text())
            .unwrap_or_default()
    }

    /// `total: $0.0165; tokens: …`, or nothing when no agent reported usage.
    pub fn total_line(&self) -> Option<String> {
        let totals = self.totals(None)?;
        let cost = usd(totals.cost_microusd).map_or("unknown".to_owned(), dollars);
        Some(format!(
            "total cost: {cost}; tokens: {}\n",
            totals.tokens_text()
        ))
    }
}

/// `$0.0165`: a cost in dollars to four places.
pub fn dollars(cost: f64) -> String {
    format!("${cost:.4}")
}
