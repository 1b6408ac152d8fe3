//! The shapes of the events the store logs: their kinds and JSON details.
//!
//! A batch of transitions queues its events in [`Events`] as it is
//! applied; each database's module then writes them all with one statement.

use crate::model::{Lease, Transition};

/// A batch's events, in order: (time, kind, detail).
pub(crate) type Events = Vec<(i64, String, String)>;

/// Queues an event of the batch being applied.
pub(crate) fn log(events: &mut Events, at: i64, kind: &str, detail: String) {
    events.push((at, kind.to_owned(), detail));
}

/// Queues the event an attempt transition logs, in batch order.
pub(crate) fn log_attempt(events: &mut Events, transition: &Transition) {
    match transition {
        Transition::AttemptStarted { index, attempt, at } => log(
            events,
            *at,
            "attempt_started",
            format!("{{\"stage\":{index},\"attempt\":{attempt}}}"),
        ),
        Transition::AttemptFinished {
            index,
            attempt,
            status,
            at,
            ..
        } => log(
            events,
            *at,
            "attempt_finished",
            format!(
                "{{\"stage\":{index},\"attempt\":{attempt},\"status\":{}}}",
                json_string(status)
            ),
        ),
        _ => {}
    }
}

/// Queues the event a unit transition logs (only a failed end logs one),
/// in batch order.
pub(crate) fn log_unit(events: &mut Events, transition: &Transition) {
    if let Transition::UnitFinished {
        index,
        key,
        status,
        at,
        ..
    } = transition
        && status != "success"
    {
        log(
            events,
            *at,
            "unit_failed",
            format!("{{\"stage\":{index},\"unit\":{}}}", json_string(key)),
        );
    }
}

/// The detail of a run's `lease_acquired` event.
pub(crate) fn lease_acquired(owner: &str, epoch: i64) -> String {
    format!("{{\"owner\":{},\"epoch\":{epoch}}}", json_string(owner))
}

/// The `lease_acquired` detail of a lease just given.
pub(crate) fn lease_detail(lease: &Lease) -> String {
    lease_acquired(&lease.owner, lease.epoch)
}

/// A JSON string literal.
pub(crate) fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::json_string;

    #[test]
    fn json_string_escapes() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
    }
}
