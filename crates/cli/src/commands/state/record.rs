//! `baton state record`: an event from the command line, checked against
//! the scope's folded ledger and appended only if the rules allow it.

use baton_engine::governance::{self, Entry, Recording, Who};
use serde_json::json;

use super::scope::{person, run_exists, scope};
use crate::args::Format;
use crate::args::state::{RecordArgs, RecordEvent, ReviewerArgs};
use crate::commands::errors::governance_error;
use crate::commands::runtime::open_store;
use crate::{exit_code, output};

fn reviewer(args: &ReviewerArgs) -> Who {
    Who {
        profile: args.reviewer.clone(),
        model: args.reviewer_model.clone(),
        session: args.reviewer_session.clone(),
    }
}

/// The entry `record` appends, or an error message (a file to hash).
fn entry(event: &RecordEvent) -> Result<Entry, String> {
    Ok(match event {
        RecordEvent::Clarified { note } => Entry::Clarified { note: note.clone() },
        RecordEvent::Inspected { path } => Entry::Inspected { path: path.clone() },
        RecordEvent::Planned { intent } => Entry::Planned {
            validation_intent: intent.clone(),
            validation_claimed: true,
        },
        RecordEvent::Edited { path, hash } => Entry::Edited {
            path: path.clone(),
            hash: match hash {
                Some(hash) => hash.clone(),
                None => std::fs::read(path)
                    .map(|bytes| baton_engine::create::sha256_hex(&bytes))
                    .map_err(|error| {
                        format!("cannot hash {path}: {error}\nhint: pass --hash HASH for a file that is gone")
                    })?,
            },
        },
        RecordEvent::Validated {
            command,
            exit_code,
            covered,
        } => Entry::Validated {
            command: command.clone(),
            exit_code: *exit_code,
            covered: covered.clone(),
        },
        RecordEvent::Reviewed { reviewer: who, findings } => Entry::Reviewed {
            reviewer: reviewer(who),
            findings: findings.clone(),
        },
        RecordEvent::Repaired { finding } => Entry::Repaired { finding: *finding },
        RecordEvent::ReReviewed {
            finding,
            reviewer: who,
            resolved,
            ..
        } => Entry::ReReviewed {
            reviewer: reviewer(who),
            finding: *finding,
            resolved: *resolved,
        },
        RecordEvent::NewEvidence { path, note } => Entry::NewEvidence {
            path: path.clone(),
            note: note.clone(),
        },
        RecordEvent::Released => Entry::Released {},
        RecordEvent::HandedOff { next_owner } => Entry::HandedOff {
            next_owner: next_owner.clone(),
        },
        RecordEvent::Closed {
            proven,
            not_proven,
            residual_risk,
            next_owner,
        } => Entry::Closed {
            proven: proven.clone(),
            not_proven: not_proven.clone(),
            residual_risk: residual_risk.clone(),
            next_owner: next_owner.clone(),
        },
    })
}

pub(super) async fn record(args: &RecordArgs) -> Result<u8, u8> {
    let mut scope = scope(&args.scope);
    let entry = crate::commands::or_usage(entry(&args.event))?;
    let mut identity = person(&scope).await;
    if let Some(profile) = &args.as_profile {
        identity.profile = profile.clone();
    }
    identity.model = args.model.clone();
    if let Some(session) = &args.actor_session {
        identity.session = session.clone();
    }
    let store = open_store().await?;
    run_exists(&store, &mut scope).await?;
    let now = baton_engine::clock::now_ms();
    let json = args.format.format() != Format::Table;
    let recording = governance::record(&store, &scope, &entry, &identity, now)
        .await
        .map_err(|error| governance_error(&error))?;
    Ok(match recording {
        Recording::Appended(seq) => {
            let (kind, _) = entry.encode();
            if json {
                output::write_json(&json!({"recorded": true, "seq": seq, "kind": kind}));
            } else {
                output::stdout(&format!(
                    "recorded {kind} as event {seq} of {} {}\n",
                    scope.kind.as_str(),
                    scope.key
                ));
            }
            exit_code::SUCCESS
        }
        Recording::Refused(refusal) => {
            let rule = governance::rule_name(refusal.kind);
            if json {
                output::write_json(
                    &json!({"recorded": false, "rule": rule, "reason": refusal.reason}),
                );
            }
            output::stderr_line(&format!("refused ({rule}): {}", refusal.reason));
            output::stderr_line(
                "nothing was recorded; `baton state show` shows the current stage and what may follow",
            );
            exit_code::REFUSED
        }
    })
}
