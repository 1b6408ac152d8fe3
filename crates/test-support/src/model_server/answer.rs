//! What a protocol module answers with, and what every answer carries
//! alike: the same usage, fresh ids, the time.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::http;

/// The usage every answer reports.
pub(super) const INPUT_TOKENS: u64 = 1234;
pub(super) const OUTPUT_TOKENS: u64 = 56;
pub(super) const CACHED_TOKENS: u64 = 100;

/// What a protocol module answers with.
#[derive(Debug)]
pub(super) enum Answer {
    Json(Value),
    Stream(http::Sse),
}

/// A fresh id with the protocol's prefix (`toolu_`, `call_`, …).
pub(super) fn new_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}fake{:08}", NEXT.fetch_add(1, Ordering::Relaxed))
}

pub(super) fn unix_time() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map(|elapsed| elapsed.as_secs()).unwrap_or(0)
}
