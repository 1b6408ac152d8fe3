//! What a refused transition says: not the stage table's arithmetic ("Release
//! cannot follow Test") but what is missing and how to record it ("release
//! needs an independent review first: record `reviewed …`"). The missing
//! steps are the stages on the shortest legal way from the current stage
//! to the one asked for.

use std::collections::{BTreeMap, VecDeque};

use super::stages::{Stage, legal, next_stages};
use super::state::{State, Visibility};

/// The sentence refusing an event that moves to `to` from `state`.
pub(super) fn missing(state: &State, to: Stage) -> String {
    let from = state.stage;
    let Some(between) = shortest_way(state, to) else {
        return match from {
            Stage::Closed => {
                "the work is closed: nothing may follow it; new work needs a new scope.".to_owned()
            }
            Stage::Release => {
                "the work is released: only a handoff (`handed-off --next-owner NAME`) or closure (`closed …`) may follow.".to_owned()
            }
            Stage::Handoff => {
                "the work is handed off: only closure (`closed …`) may follow.".to_owned()
            }
            _ => format!("{} cannot follow {}.", attempt(to), attempt(from)),
        };
    };
    // A new ledger starts at Clarify without anything clarified yet.
    let mut steps = Vec::new();
    if from == Stage::Clarify && !state.clarified && state.visibility == Visibility::Everything {
        steps.push(Stage::Clarify);
    }
    steps.extend(between);
    let needs: Vec<&str> = steps.iter().map(|s| step(*s).0).collect();
    let records: Vec<&str> = steps.iter().map(|s| step(*s).1).collect();
    format!(
        "{} needs {} first: record {}.",
        capitalised(attempt(to)),
        listed(&needs),
        records.join(", then ")
    )
}

/// The stages strictly between the current stage and `to` on a shortest
/// legal way, or `None` when `to` cannot be reached.
fn shortest_way(state: &State, to: Stage) -> Option<Vec<Stage>> {
    let from = state.stage;
    let follows = |stage: Stage| -> Vec<Stage> {
        let mut next = next_stages(stage).to_vec();
        // Where planning cannot be seen, what follows a plan follows the
        // stages before it (see `State::may_follow`).
        if state.visibility == Visibility::ToolCalls
            && matches!(stage, Stage::Clarify | Stage::Read)
        {
            next.extend(next_stages(Stage::Plan));
        }
        next
    };
    let mut came_from: BTreeMap<Stage, Stage> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(stage) = queue.pop_front() {
        for next in follows(stage) {
            if next == from || came_from.contains_key(&next) {
                continue;
            }
            came_from.insert(next, stage);
            if next == to {
                let mut way = Vec::new();
                let mut at = stage;
                while at != from {
                    way.push(at);
                    at = came_from[&at];
                }
                way.reverse();
                return Some(way);
            }
            queue.push_back(next);
        }
    }
    debug_assert!(!legal(from, to), "a legal transition is not refused");
    None
}

/// What an event moving to `stage` is, as the subject of a sentence.
fn attempt(stage: Stage) -> &'static str {
    match stage {
        Stage::Clarify => "clarifying",
        Stage::Read => "reading",
        Stage::Plan => "a plan",
        Stage::Edit => "an edit",
        Stage::Test => "a validation",
        Stage::Review => "a review",
        Stage::Repair => "a repair",
        Stage::ReReview => "a re-review",
        Stage::Release => "release",
        Stage::Handoff => "a handoff",
        Stage::Closed => "closure",
    }
}

/// What reaching `stage` provides, and the event that records it.
fn step(stage: Stage) -> (&'static str, &'static str) {
    match stage {
        Stage::Clarify => ("a clarified request", "`clarified`"),
        Stage::Read => ("inspected context", "`inspected PATH`"),
        Stage::Plan => (
            "a plan that says how the work will be validated",
            "`planned --intent TEXT`",
        ),
        Stage::Edit => ("an edit", "`edited PATH`"),
        Stage::Test => ("a validation", "`validated --command CMD --exit-code N`"),
        Stage::Review => (
            "an independent review",
            "`reviewed --reviewer PROFILE` by someone other than the owner",
        ),
        Stage::Repair => ("a repair of a finding", "`repaired N`"),
        Stage::ReReview => (
            "a re-review of the repair",
            "`re-reviewed N --reviewer PROFILE`",
        ),
        Stage::Release => ("a release", "`released`"),
        Stage::Handoff => ("a handoff", "`handed-off --next-owner NAME`"),
        Stage::Closed => ("closure", "`closed …`"),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn listed(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
