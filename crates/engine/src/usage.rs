//! What an agent attempt consumed: read from its output after it ends,
//! priced when the agent reports no dollars, and turned into a store row.
//!
//! Usage is bookkeeping: output that cannot be read records nothing and
//! never changes an attempt's result.

use std::path::Path;
use std::sync::Arc;

use baton_executor::profile::{Config, Profile, Usage, parse_usage};
use baton_store::UsageRow;

/// How to read one attempt's usage once it is over.
#[derive(Debug, Clone)]
pub(crate) struct Meter {
    /// The profile, for its `[output]` rules.
    pub(crate) profile: Profile,
    /// The model asked for, to price tokens by.
    pub(crate) model: Option<String>,
    /// `[pricing]` lives in the agent settings.
    pub(crate) agents: Arc<Config>,
}

/// The most of a log read for usage (the log itself is capped too).
const MAX_LOG_BYTES: u64 = 32 * 1024 * 1024;

impl Meter {
    /// The usage in `log` (the attempt's stdout), priced if need be.
    pub(crate) fn read(&self, log: &Path) -> Option<Usage> {
        let text = read_head(log, MAX_LOG_BYTES)?;
        let mut usage = parse_usage(self.profile.output.as_ref(), &text)?;
        usage.price(self.model.as_deref(), &self.agents.pricing);
        Some(usage)
    }
}

impl Meter {
    /// What the agent said went wrong, from `log` (the attempt's stdout).
    pub(crate) fn reported_error(&self, log: &Path) -> Option<String> {
        let text = read_head(log, MAX_LOG_BYTES)?;
        baton_executor::profile::parse_error(self.profile.output.as_ref(), &text)
    }
}

/// The session id in `log` (an attempt's stdout), by `profile`'s output
/// rules.
pub(crate) fn session(profile: &Profile, log: &Path) -> Option<String> {
    parse_usage(profile.output.as_ref(), &read_head(log, MAX_LOG_BYTES)?)?.session_id
}

/// The first `limit` bytes of the file at `path`, as text.
pub(crate) fn read_head(path: &Path, limit: u64) -> Option<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(limit)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The store row of one attempt's usage; `resumed` is the agent session
/// the attempt continued, if it did.
pub(crate) fn row(
    index: i64,
    unit: Option<&str>,
    attempt: i64,
    usage: &Usage,
    resumed: Option<&str>,
) -> UsageRow {
    let count = |value: Option<u64>| value.map(|value| i64::try_from(value).unwrap_or(i64::MAX));
    UsageRow {
        index,
        unit: unit.unwrap_or_default().to_owned(),
        attempt,
        input_tokens: count(usage.input_tokens),
        output_tokens: count(usage.output_tokens),
        cache_read_tokens: count(usage.cache_read_tokens),
        cache_write_tokens: count(usage.cache_write_tokens),
        cost_microusd: usage.cost_usd.map(micro_usd),
        turns: count(usage.turns),
        session_id: usage.session_id.clone(),
        model: usage.model.clone(),
        resumed_session: resumed.map(str::to_owned),
    }
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "a cost in USD times a million is far below i64::MAX"
)]
fn micro_usd(cost: f64) -> i64 {
    (cost * 1_000_000.0).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_become_exact_micro_dollars() {
        let usage = Usage {
            input_tokens: Some(1200),
            cost_usd: Some(0.0123),
            ..Usage::default()
        };
        let row = row(2, Some("item:a"), 1, &usage, None);
        assert_eq!(row.cost_microusd, Some(12_300));
        assert_eq!(row.input_tokens, Some(1200));
        assert_eq!(row.output_tokens, None);
        assert_eq!(row.unit, "item:a");
    }
}
