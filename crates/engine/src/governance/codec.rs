//! Ledger rows ⇄ governance events. The row's `kind` column is the event's
//! name and `payload` its evidence as JSON; the pure crate's `Event` knows
//! nothing of either, so the mapping lives here and nowhere else.

use baton_lifecycle::governance::{Closure, Event, Identity};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a ledger row says: a governance event, or a note the state machine
/// does not fold (a waiver of a rule, written where the rule was waived).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Entry {
    /// The request was clarified.
    Clarified {
        /// What was settled, if said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// A file was inspected.
    Inspected {
        /// The file.
        path: String,
    },
    /// A plan with its validation intent.
    Planned {
        /// How the work will be validated.
        validation_intent: String,
        /// Whether it claims validation at all (a workflow with none does
        /// not); absent in rows that always claimed it.
        #[serde(default = "claimed", skip_serializing_if = "is_claimed")]
        validation_claimed: bool,
    },
    /// A file was edited.
    Edited {
        /// The file.
        path: String,
        /// Its content hash after the edit.
        hash: String,
    },
    /// A validation command ran.
    Validated {
        /// The command.
        command: String,
        /// Its exit code.
        exit_code: i32,
        /// The paths it covers; empty covers every path.
        #[serde(default)]
        covered: Vec<String>,
    },
    /// A review with its findings.
    Reviewed {
        /// The reviewer.
        reviewer: Who,
        /// The findings.
        #[serde(default)]
        findings: Vec<String>,
    },
    /// A finding was repaired.
    Repaired {
        /// The finding's number.
        finding: usize,
    },
    /// A re-review of a repaired finding.
    ReReviewed {
        /// The reviewer.
        reviewer: Who,
        /// The finding's number.
        finding: usize,
        /// Whether the repair resolves it.
        resolved: bool,
    },
    /// New evidence about a path.
    NewEvidence {
        /// The path.
        path: String,
        /// What is new.
        note: String,
    },
    /// The work was released.
    Released {},
    /// The work was handed off.
    HandedOff {
        /// The next owner.
        next_owner: String,
    },
    /// The work was closed.
    Closed {
        /// What is proven.
        proven: String,
        /// What is not.
        not_proven: String,
        /// The residual risk.
        residual_risk: String,
        /// The next owner.
        next_owner: String,
    },
    /// An agent's progress inside a stage (through `baton mcp`): a note,
    /// not folded.
    Progress {
        /// The stage.
        stage: String,
        /// What the agent said.
        message: String,
    },
    /// Evidence an agent recorded inside a stage: a command it ran and
    /// how it ended, or a file with its hash. A note, not folded: evidence
    /// is not a verdict.
    Evidence {
        /// The stage.
        stage: String,
        /// The command, for a command.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        /// Its exit code, for a command.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// The file, for a file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// The file's SHA-256 when recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        /// What it shows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// A rule was waived by configuration (`[governance] self_review =
    /// "allow"`): recorded so the waiver is visible, not folded.
    Waived {
        /// The rule.
        rule: String,
        /// Why, and by which setting.
        reason: String,
    },
}

/// An identity as the ledger stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Who {
    /// The agent profile.
    pub profile: String,
    /// The model, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The session.
    #[serde(default)]
    pub session: String,
}

impl From<&Who> for Identity {
    fn from(who: &Who) -> Self {
        Identity {
            profile: who.profile.clone(),
            model: who.model.clone(),
            session: who.session.clone(),
        }
    }
}

impl From<&Identity> for Who {
    fn from(id: &Identity) -> Self {
        Who {
            profile: id.profile.clone(),
            model: id.model.clone(),
            session: id.session.clone(),
        }
    }
}

fn claimed() -> bool {
    true
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's signature")]
fn is_claimed(claimed: &bool) -> bool {
    *claimed
}

impl Entry {
    /// The row's `kind` and `payload`.
    pub fn encode(&self) -> (String, String) {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        let kind = value
            .as_object_mut()
            .and_then(|map| map.shift_remove("kind"))
            .and_then(|kind| kind.as_str().map(str::to_owned))
            .unwrap_or_default();
        (kind, value.to_string())
    }

    /// Reads a row back; the error says what is wrong with it.
    pub fn decode(kind: &str, payload: &str) -> Result<Self, String> {
        let mut value: Value =
            serde_json::from_str(payload).map_err(|error| format!("payload: {error}"))?;
        let Some(map) = value.as_object_mut() else {
            return Err("payload is not a JSON object".to_owned());
        };
        map.insert("kind".to_owned(), Value::String(kind.to_owned()));
        serde_json::from_value(value).map_err(|error| format!("{kind}: {error}"))
    }

    /// The stage an agent's note is about, for notes that name one.
    pub fn stage(&self) -> Option<&str> {
        match self {
            Entry::Progress { stage, .. } | Entry::Evidence { stage, .. } => Some(stage),
            _ => None,
        }
    }

    /// The governance event, or `None` for a note the machine does not fold.
    pub fn event(&self) -> Option<Event> {
        Some(match self {
            Entry::Clarified { .. } => Event::Clarified,
            Entry::Inspected { path } => Event::Inspected { path: path.clone() },
            Entry::Planned {
                validation_intent,
                validation_claimed,
            } => Event::Planned {
                validation_intent: validation_intent.clone(),
                validation_claimed: *validation_claimed,
            },
            Entry::Edited { path, hash } => Event::Edited {
                path: path.clone(),
                hash: hash.clone(),
            },
            Entry::Validated {
                command,
                exit_code,
                covered,
            } => Event::Validated {
                command: command.clone(),
                exit_code: *exit_code,
                covered: covered.clone(),
            },
            Entry::Reviewed { reviewer, findings } => Event::Reviewed {
                reviewer: reviewer.into(),
                findings: findings.clone(),
            },
            Entry::Repaired { finding } => Event::Repaired { finding: *finding },
            Entry::ReReviewed {
                reviewer,
                finding,
                resolved,
            } => Event::ReReviewed {
                reviewer: reviewer.into(),
                finding: *finding,
                resolved: *resolved,
            },
            Entry::NewEvidence { path, note } => Event::NewEvidence {
                path: path.clone(),
                note: note.clone(),
            },
            Entry::Released {} => Event::Released,
            Entry::HandedOff { next_owner } => Event::HandedOff {
                next_owner: next_owner.clone(),
            },
            Entry::Closed {
                proven,
                not_proven,
                residual_risk,
                next_owner,
            } => Event::Closed(Closure {
                proven: proven.clone(),
                not_proven: not_proven.clone(),
                residual_risk: residual_risk.clone(),
                next_owner: next_owner.clone(),
            }),
            Entry::Waived { .. } | Entry::Progress { .. } | Entry::Evidence { .. } => {
                return None;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_rows() {
        let entries = [
            Entry::Clarified { note: None },
            Entry::Planned {
                validation_intent: "none".into(),
                validation_claimed: false,
            },
            Entry::Edited {
                path: "src/a.rs".into(),
                hash: "ab".into(),
            },
            Entry::Validated {
                command: "cargo test".into(),
                exit_code: 101,
                covered: vec!["src".into()],
            },
            Entry::Reviewed {
                reviewer: Who {
                    profile: "codex".into(),
                    model: Some("gpt".into()),
                    session: "s".into(),
                },
                findings: vec!["leak".into()],
            },
            Entry::Released {},
            Entry::Progress {
                stage: "draft".into(),
                message: "half way".into(),
            },
            Entry::Evidence {
                stage: "draft".into(),
                command: Some("cargo test".into()),
                exit_code: Some(0),
                path: None,
                sha256: None,
                note: None,
            },
            Entry::Waived {
                rule: "self_review".into(),
                reason: "allowed".into(),
            },
        ];
        for entry in entries {
            let (kind, payload) = entry.encode();
            assert!(!payload.contains("\"kind\""), "{payload}");
            assert_eq!(Entry::decode(&kind, &payload), Ok(entry));
        }
        assert!(Entry::decode("edited", "[]").is_err());
        assert!(Entry::decode("edited", r#"{"path":"a"}"#).is_err());
        assert!(Entry::decode("bogus", "{}").is_err());
        // A plan recorded before plans could disclaim validation claims it.
        assert_eq!(
            Entry::decode("planned", r#"{"validation_intent":"cargo test"}"#),
            Ok(Entry::Planned {
                validation_intent: "cargo test".into(),
                validation_claimed: true,
            })
        );
    }
}
