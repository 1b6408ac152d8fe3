//! `baton state show|check|record|summary|list`: a thin adapter over
//! `baton_engine::governance`.

use baton_engine::governance::{self, FindingStatus, Report, Scope, stage_name};
use serde_json::{Value, json};

use super::errors::governance_error;
use super::runtime::{block_on_exit, open_store};
use crate::args::Format;
use crate::args::state::{ScopeArgs, StateCommand};
use crate::{exit_code, output};

mod record;
mod scope;

use scope::{person, run_exists, scope};

/// Runs a `baton state` subcommand.
pub(crate) fn run(command: &StateCommand) -> u8 {
    block_on_exit(async {
        match command {
            StateCommand::Show(args) => {
                with_report(&args.scope, |scope, report| {
                    show(scope, report, args.format.format())
                })
                .await
            }
            StateCommand::Check(args) => {
                with_report(&args.scope, |_, report| check(report, args.format.format())).await
            }
            StateCommand::Summary(args) => {
                with_report(&args.scope, |scope, report| {
                    summary(scope, report, args.format.format())
                })
                .await
            }
            StateCommand::Record(args) => record::record(args).await,
            StateCommand::List(format) => list(format.format()).await,
        }
    })
}

async fn with_report(args: &ScopeArgs, then: impl FnOnce(&Scope, &Report) -> u8) -> Result<u8, u8> {
    let mut scope = scope(args);
    let store = open_store().await?;
    run_exists(&store, &mut scope).await?;
    let report = governance::load(&store, &scope, &person(&scope).await)
        .await
        .map_err(|error| governance_error(&error))?;
    Ok(then(&scope, &report))
}

fn show(scope: &Scope, report: &Report, format: Format) -> u8 {
    let findings: Vec<Value> = report
        .state
        .findings()
        .iter()
        .enumerate()
        .map(|(n, (text, status))| json!({"finding": n, "text": text, "status": format!("{status:?}").to_lowercase()}))
        .collect();
    let events: Vec<Value> = report
        .entries
        .iter()
        .map(|r| {
            let (kind, payload) = r.entry.encode();
            json!({
                "seq": r.seq, "kind": kind,
                "payload": serde_json::from_str::<Value>(&payload).unwrap_or(Value::Null),
                "profile": r.identity.profile, "model": r.identity.model,
                "session": r.identity.session, "recorded_at": r.recorded_at,
            })
        })
        .collect();
    let value = json!({
        "scope": {"kind": scope.kind.as_str(), "key": scope.key},
        "stage": stage_name(report.stage()),
        "next_stages": report.next_stages().iter().map(|s| stage_name(*s)).collect::<Vec<_>>(),
        "validation": report.freshness.word(),
        "validation_fresh": report.freshness.stale.is_none(),
        "stale_reason": report.freshness.stale,
        "findings": findings,
        "violations": report.violations.iter().map(|v| json!({"seq": v.seq, "rule": v.rule, "reason": v.reason})).collect::<Vec<_>>(),
        "waivers": report.waivers.iter().map(|(rule, reason, seq)| json!({"seq": seq, "rule": rule, "reason": reason})).collect::<Vec<_>>(),
        "blocked_paths": report.state.blocked_paths().into_iter().map(|(p, c, e)| json!({"path": p, "command": c, "exit_code": e})).collect::<Vec<_>>(),
        "blocked_commands": report.state.blocked_commands().into_iter().map(|(c, e)| json!({"command": c, "exit_code": e})).collect::<Vec<_>>(),
        "events": events,
    });
    output::print(format, &value, || show_text(scope, report, &value, &events));
    exit_code::SUCCESS
}

/// `state show` for people: the stage, freshness, findings, rules broken
/// and waived, and the ledger's events.
fn show_text(scope: &Scope, report: &Report, value: &Value, events: &[Value]) -> String {
    let mut text = format!(
        "{} {}: stage {} (next: {})\n",
        scope.kind.as_str(),
        scope.key,
        stage_name(report.stage()),
        value["next_stages"]
            .as_array()
            .map(|s| s
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "none, closed".to_owned())
    );
    text.push_str(&match &report.freshness.stale {
        Some(why) => format!("validation: stale — {why}\n"),
        None if !report.freshness.claimed => {
            "validation: not claimed (the plan declares none)\n".to_owned()
        }
        None => format!("validation: {}\n", report.freshness.word()),
    });
    for (n, (finding, status)) in report.state.findings().iter().enumerate() {
        let status = match status {
            FindingStatus::Open => "open",
            FindingStatus::Repaired => "repaired, awaiting re-review",
            FindingStatus::Resolved => "resolved",
        };
        text.push_str(&format!("finding {n}: {finding} ({status})\n"));
    }
    for (rule, reason, seq) in &report.waivers {
        text.push_str(&format!("waived at event {seq}: {rule} — {reason}\n"));
    }
    for v in &report.violations {
        text.push_str(&format!(
            "broken at event {}: {} — {}\n",
            v.seq, v.rule, v.reason
        ));
    }
    let header = ["SEQ", "EVENT", "BY", "EVIDENCE"];
    text.push_str(&output::table_of(&header, events, |e| {
        vec![
            e["seq"].to_string(),
            e["kind"].as_str().unwrap_or_default().to_owned(),
            e["profile"].as_str().unwrap_or_default().to_owned(),
            e["payload"].to_string(),
        ]
    }));
    text
}

fn check(report: &Report, format: Format) -> u8 {
    let violated = report.check();
    let value = json!({
        "ok": violated.is_empty(),
        "violations": violated.iter().map(|(rule, why)| json!({"rule": rule, "reason": why})).collect::<Vec<_>>(),
    });
    output::print(format, &value, || {
        if violated.is_empty() {
            return "ok: no rule violated\n".to_owned();
        }
        // Rules violated are errors, for stderr.
        for (rule, why) in &violated {
            output::stderr_line(&format!("violated: {rule}: {why}"));
        }
        String::new()
    });
    if violated.is_empty() {
        exit_code::SUCCESS
    } else {
        exit_code::REFUSED
    }
}

fn summary(scope: &Scope, report: &Report, format: Format) -> u8 {
    let value = governance::summary(scope, report);
    output::print(format, &value, || {
        // One line per field: the object is for scripts, this for a glance.
        let mut text = String::new();
        if let Some(map) = value.as_object() {
            for (key, field) in map {
                text.push_str(&format!("{key}: {field}\n"));
            }
        }
        text
    });
    exit_code::SUCCESS
}

async fn list(format: Format) -> Result<u8, u8> {
    let store = open_store().await?;
    let scopes = store
        .ledger_scopes()
        .await
        .map_err(|error| governance_error(&error.into()))?;
    let value: Vec<Value> = scopes
        .iter()
        .map(|s| json!({"kind": s.kind, "key": s.key, "events": s.events, "created_at": s.created_at, "updated_at": s.updated_at}))
        .collect();
    output::print(format, &value, || {
        output::table_of(&["KIND", "KEY", "EVENTS"], &scopes, |s| {
            vec![s.kind.clone(), s.key.clone(), s.events.to_string()]
        })
    });
    Ok(exit_code::SUCCESS)
}
