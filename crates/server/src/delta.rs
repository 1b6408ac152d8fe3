//! What changed between two reads of a run's status object, for the event
//! stream: a follower that has the previous object gets only the stages
//! whose entries changed (and the small fields around them), not all of
//! them again. A run of thousands of stages changes a few at a time.

use serde_json::Value;

/// A status object that changed: all of it, and what changed since the
/// read before it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Change {
    /// The whole object's JSON text.
    pub(crate) whole: String,
    /// The object with `stages` holding only the entries that changed;
    /// `None` when the list of stages itself changed (a fan-out added
    /// children), since applying it needs the same list on both sides.
    pub(crate) delta: Option<String>,
}

/// The last status read, as the JSON text of its parts.
#[derive(Debug, Default)]
pub(crate) struct Previous {
    /// Nothing read yet: the first change has no delta.
    read: bool,
    /// The object without `stages`.
    rest: String,
    /// Each stage's name and entry, in order.
    stages: Vec<(String, String)>,
}

impl Previous {
    /// Takes the next status object read; `None` when it is the same as
    /// the last one.
    pub(crate) fn next(&mut self, mut status: Value) -> Option<Change> {
        let stages = match status
            .as_object_mut()
            .and_then(|fields| fields.remove("stages"))
        {
            Some(Value::Array(stages)) => stages,
            _ => Vec::new(),
        };
        let stages: Vec<(String, String)> = stages
            .iter()
            .map(|stage| {
                let name = stage["stage"].as_str().unwrap_or_default().to_owned();
                (name, stage.to_string())
            })
            .collect();
        let rest = status.to_string();
        if self.read && rest == self.rest && stages == self.stages {
            return None;
        }
        let same_list = self.read
            && self.stages.len() == stages.len()
            && self.stages.iter().zip(&stages).all(|(a, b)| a.0 == b.0);
        let delta = same_list.then(|| {
            let changed = self.stages.iter().zip(&stages).filter(|(a, b)| a.1 != b.1);
            with_stages(&rest, changed.map(|(_, now)| now.1.as_str()))
        });
        let whole = with_stages(&rest, stages.iter().map(|stage| stage.1.as_str()));
        *self = Previous {
            read: true,
            rest,
            stages,
        };
        Some(Change { whole, delta })
    }
}

/// `rest` (an object's text) with a `stages` array of `entries` added.
fn with_stages<'a>(rest: &str, entries: impl Iterator<Item = &'a str>) -> String {
    let mut text = String::with_capacity(rest.len() + 64);
    // An object's text ends with its `}`; anything else (never the case
    // for a status object) gets a fresh object.
    match rest.strip_suffix('}') {
        Some(open) if open.len() > 1 => {
            text.push_str(open);
            text.push(',');
        }
        _ => text.push('{'),
    }
    text.push_str("\"stages\":[");
    for (at, entry) in entries.enumerate() {
        if at > 0 {
            text.push(',');
        }
        text.push_str(entry);
    }
    text.push_str("]}");
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn status(run: &str, stages: &[(&str, &str)]) -> Value {
        json!({
            "run_id": "r1",
            "status": run,
            "stages": stages
                .iter()
                .map(|(name, status)| json!({"stage": name, "status": status}))
                .collect::<Vec<_>>(),
        })
    }

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("JSON")
    }

    #[test]
    fn the_first_read_is_whole_and_the_next_carries_only_the_stages_that_changed() {
        let mut previous = Previous::default();
        let first = status("running", &[("a", "running"), ("b", "pending")]);
        let change = previous.next(first.clone()).expect("a first change");
        assert_eq!(parse(&change.whole), first);
        assert_eq!(change.delta, None);

        let second = status("running", &[("a", "success"), ("b", "pending")]);
        let change = previous.next(second.clone()).expect("a change");
        assert_eq!(parse(&change.whole), second);
        let delta = parse(&change.delta.expect("a delta"));
        assert_eq!(
            delta,
            json!({"run_id": "r1", "status": "running",
                   "stages": [{"stage": "a", "status": "success"}]})
        );
        assert_eq!(previous.next(second), None, "nothing changed");
    }

    #[test]
    fn a_change_of_the_run_alone_has_an_empty_stage_list() {
        let mut previous = Previous::default();
        previous.next(status("running", &[("a", "success")]));
        let change = previous
            .next(status("success", &[("a", "success")]))
            .expect("a change");
        assert_eq!(
            parse(&change.delta.expect("a delta")),
            json!({"run_id": "r1", "status": "success", "stages": []})
        );
    }

    #[test]
    fn a_new_list_of_stages_sends_the_whole_object_only() {
        let mut previous = Previous::default();
        previous.next(status("running", &[("fan", "running")]));
        let grown = status("running", &[("fan", "running"), ("fan[x]", "pending")]);
        let change = previous.next(grown.clone()).expect("a change");
        assert_eq!(change.delta, None);
        assert_eq!(parse(&change.whole), grown);
    }

    #[test]
    fn an_object_without_stages_still_reads_back() {
        let mut previous = Previous::default();
        let change = previous.next(json!({})).expect("a first change");
        assert_eq!(parse(&change.whole), json!({"stages": []}));
        let change = previous.next(json!(null)).expect("a change");
        assert_eq!(parse(&change.whole), json!({"stages": []}));
    }
}
