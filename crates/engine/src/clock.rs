//! The wall clock and a little entropy, in one place so tests and the rest of
//! the engine never read them directly.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

/// A duration in whole milliseconds, as the store keeps times (saturating).
pub fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A value that differs between calls and processes, for run-id suffixes.
pub fn entropy() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ (nanos >> 64) as u64;
    // SplitMix64 finaliser: spreads nearby inputs over the whole range.
    let mut value = mixed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    value = (value ^ (value >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    value ^ (value >> 31)
}

/// A timer that ticks every `period`, first one period from now.
///
/// `tokio::time::interval` ticks at once first, and skipping that tick
/// by awaiting it is not free: the timer rounds its deadline up to the
/// next millisecond, a wait at every run's start.
pub(crate) fn every(period: std::time::Duration) -> tokio::time::Interval {
    tokio::time::interval_at(tokio::time::Instant::now() + period, period)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[tokio::test]
    async fn every_waits_a_whole_period_before_its_first_tick() {
        let period = Duration::from_millis(50);
        let started = tokio::time::Instant::now();
        let mut timer = super::every(period);
        timer.tick().await;
        assert!(
            started.elapsed() >= period,
            "ticked after {:?}",
            started.elapsed()
        );
        timer.tick().await;
        assert!(started.elapsed() >= 2 * period);
    }
}
