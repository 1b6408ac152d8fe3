//! Folding a scope's ledger through the governance state machine into a
//! report: the current stage and what may follow, every rule the ledger
//! broke, freshness, findings, repairs awaiting re-review, blocked paths,
//! waivers and the closure.

use baton_lifecycle::governance::{
    Action, Closure, FindingStatus, Identity, RefusalKind, Stage, State, Visibility, next_stages,
    observe,
};
use baton_store::LedgerEventRow;

use super::codec::Entry;

/// One decoded ledger row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Position in the scope.
    pub seq: i64,
    /// What it says.
    pub entry: Entry,
    /// Who acted.
    pub identity: Identity,
    /// When (ms); informational, never used for order.
    pub recorded_at: i64,
}

/// A rule the ledger broke, at the event that broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The event's position.
    pub seq: i64,
    /// The rule, as a stable name (`self_review`, `stale_validation`, …).
    pub rule: &'static str,
    /// Why.
    pub reason: String,
}

/// Whether validation supports the current edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freshness {
    /// Whether any path was edited.
    pub edits: bool,
    /// Whether the scope claims validation (its plan may say it has none).
    pub claimed: bool,
    /// `None` when fresh (or nothing was edited, or nothing is claimed),
    /// else why not.
    pub stale: Option<String>,
}

impl Freshness {
    /// Freshness in a word: `fresh`, `stale`, `nothing edited` or
    /// `not claimed`.
    pub fn word(&self) -> &'static str {
        match (self.claimed, self.edits, &self.stale) {
            (false, _, _) => "not claimed",
            (_, _, Some(_)) => "stale",
            (_, false, None) => "nothing edited",
            (_, true, None) => "fresh",
        }
    }
}

/// A scope's ledger, folded.
#[derive(Debug, Clone)]
pub struct Report {
    /// The decoded rows, in order.
    pub entries: Vec<Recorded>,
    /// The state after the last event.
    pub state: State,
    /// Rules broken along the way.
    pub violations: Vec<Violation>,
    /// Validation freshness now.
    pub freshness: Freshness,
    /// Every action the fold produced, with the event's position.
    pub actions: Vec<(i64, Action)>,
    /// Waivers recorded (rule, reason, seq).
    pub waivers: Vec<(String, String, i64)>,
    /// The closure, if the work was closed.
    pub closure: Option<Closure>,
}

/// A rule's stable name.
pub fn rule_name(kind: RefusalKind) -> &'static str {
    match kind {
        RefusalKind::IllegalTransition => "illegal_transition",
        RefusalKind::MissingEvidence => "missing_evidence",
        RefusalKind::SelfReview => "self_review",
        RefusalKind::StaleValidation => "stale_validation",
        RefusalKind::OpenFindings => "open_findings",
        RefusalKind::UnknownFinding => "unknown_finding",
        RefusalKind::ThirdAttempt => "third_attempt",
    }
}

/// Decodes rows; a row that cannot be read is an error naming it.
pub fn decode(rows: &[LedgerEventRow]) -> Result<Vec<Recorded>, String> {
    rows.iter()
        .map(|row| {
            let entry = Entry::decode(&row.kind, &row.payload)
                .map_err(|why| format!("ledger event {} cannot be read: {why}", row.seq))?;
            Ok(Recorded {
                seq: row.seq,
                entry,
                identity: Identity {
                    profile: row.profile.clone(),
                    model: row.model.clone(),
                    session: row.session.clone(),
                },
                recorded_at: row.recorded_at,
            })
        })
        .collect()
}

/// The owner of a scope: whoever recorded its first event, else `fallback`.
/// An agent's progress or evidence inside a run makes no one its owner.
pub fn owner(entries: &[Recorded], fallback: &Identity) -> Identity {
    entries
        .iter()
        .find(|recorded| recorded.entry.stage().is_none())
        .map_or_else(|| fallback.clone(), |first| first.identity.clone())
}

/// Folds `entries` in order as facts, judged by the rules that apply to
/// what their writer can see.
pub fn fold(entries: Vec<Recorded>, owner: Identity, visibility: Visibility) -> Report {
    let mut state = State::seen_as(owner, visibility);
    let mut violations = Vec::new();
    let mut all_actions = Vec::new();
    let mut waivers = Vec::new();
    let mut closure = None;
    for recorded in &entries {
        let Some(event) = recorded.entry.event() else {
            if let Entry::Waived { rule, reason } = &recorded.entry {
                waivers.push((rule.clone(), reason.clone(), recorded.seq));
            }
            continue;
        };
        let outcome = observe(&state, &event);
        if let Some(refusal) = outcome.violation {
            violations.push(Violation {
                seq: recorded.seq,
                rule: rule_name(refusal.kind),
                reason: refusal.reason,
            });
        }
        for action in outcome.actions {
            if let Action::Closed(c) = &action {
                closure = Some(c.clone());
            }
            all_actions.push((recorded.seq, action));
        }
        state = outcome.state;
    }
    let edits = !state.last_edits().is_empty();
    let freshness = Freshness {
        edits,
        claimed: state.validation_claimed(),
        stale: if edits {
            state.validation_fresh().err()
        } else {
            None
        },
    };
    Report {
        entries,
        state,
        violations,
        freshness,
        actions: all_actions,
        waivers,
        closure,
    }
}

impl Report {
    /// The current stage.
    pub fn stage(&self) -> Stage {
        self.state.stage()
    }

    /// The stages that may follow.
    pub fn next_stages(&self) -> &'static [Stage] {
        next_stages(self.state.stage())
    }

    /// Findings not resolved: (number, text, status).
    pub fn unresolved(&self) -> Vec<(usize, String, FindingStatus)> {
        self.state
            .findings()
            .iter()
            .enumerate()
            .filter(|(_, (_, status))| *status != FindingStatus::Resolved)
            .map(|(n, (text, status))| (n, text.clone(), *status))
            .collect()
    }

    /// What blocks a "done" claim (a Stop hook): stale validation after an
    /// edit, findings open or awaiting re-review.
    pub fn stop_blockers(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(why) = &self.freshness.stale {
            out.push(format!("validation is stale: {why}"));
        }
        for (n, text, status) in self.unresolved() {
            out.push(match status {
                FindingStatus::Repaired => {
                    format!("finding {n} ({text}) was repaired but not re-reviewed")
                }
                _ => format!("finding {n} ({text}) is open"),
            });
        }
        out
    }

    /// Every violated rule `baton state check` lists: the rules the ledger
    /// broke, then what blocks a "done" claim now.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .violations
            .iter()
            .map(|v| (v.rule.to_owned(), format!("event {}: {}", v.seq, v.reason)))
            .collect();
        if let Some(why) = &self.freshness.stale {
            out.push(("stale_validation".to_owned(), why.clone()));
        }
        for (n, text, status) in self.unresolved() {
            let (rule, what) = match status {
                FindingStatus::Repaired => ("repair_without_rereview", "awaits a re-review"),
                _ => ("open_findings", "is open"),
            };
            out.push((rule.to_owned(), format!("finding {n} ({text}) {what}")));
        }
        out
    }
}
