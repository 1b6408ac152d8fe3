//! Gate decisions (exactly one per attempt and artifact, even when many
//! people decide at once) and the compare-and-swap of an edited output.

use std::sync::Arc;

use baton_store::{
    ArtifactEdit, DecidedOutput, Error, GateDecided, GateDecisionRow, NewGateDecision, Store,
    Transition,
};
use tokio::sync::Barrier;

use crate::harness::{Fresh, event_kinds, new_run};

const GATE: i64 = 1;

/// A run whose stage 1 (the gate) succeeded with one recorded output.
async fn gated_run(fresh: &Fresh) -> Store {
    let store = fresh.open().await;
    store
        .create_run(&new_run("r1", 1000, &["a", "gate", "b"]))
        .await
        .unwrap();
    let lease = store
        .acquire("r1", "owner", 1000, 60_000, None)
        .await
        .unwrap();
    store
        .apply(
            &lease,
            &[
                Transition::AttemptStarted {
                    index: GATE,
                    attempt: 1,
                    at: 2000,
                },
                Transition::AttemptFinished {
                    index: GATE,
                    attempt: 1,
                    status: "success".to_owned(),
                    at: 3000,
                    exit_code: Some(0),
                    error: None,
                    artifacts: vec![("outputs/plan.json".to_owned(), sha('a'), 10)],
                },
            ],
        )
        .await
        .unwrap();
    store.release(&lease).await.unwrap();
    store
}

fn sha(fill: char) -> String {
    std::iter::repeat_n(fill, 64).collect()
}

fn decision(attempt: i64, hash: &str, what: &str, by: &str, at: i64) -> NewGateDecision {
    NewGateDecision {
        run_id: "r1".to_owned(),
        index: GATE,
        attempt,
        sha256: hash.to_owned(),
        decision: what.to_owned(),
        decided_by: by.to_owned(),
        decided_at: at,
        comment: Some(format!("{by} says {what}")),
        outputs: Vec::new(),
    }
}

fn row(new: &NewGateDecision) -> GateDecisionRow {
    GateDecisionRow {
        index: new.index,
        attempt: new.attempt,
        sha256: new.sha256.clone(),
        decision: new.decision.clone(),
        decided_by: new.decided_by.clone(),
        decided_at: new.decided_at,
        comment: new.comment.clone(),
    }
}

fn gate_events(kinds: &[String]) -> Vec<&str> {
    kinds
        .iter()
        .map(String::as_str)
        .filter(|kind| kind.starts_with("gate_"))
        .collect()
}

pub(crate) async fn decision_is_recorded(fresh: Fresh) {
    let store = gated_run(&fresh).await;
    let approve = decision(1, &sha('a'), "approve", "ada", 4000);
    assert_eq!(
        store.decide_gate(&approve).await.unwrap(),
        GateDecided::Recorded(row(&approve))
    );
    assert_eq!(store.gate_decisions("r1").await.unwrap(), [row(&approve)]);
    let events = store.events("r1", 0).await.unwrap();
    let event = events.last().unwrap();
    assert_eq!((event.at, event.kind.as_str()), (4000, "gate_approved"));
    let detail: serde_json::Value = serde_json::from_str(&event.detail).unwrap();
    assert_eq!(detail["stage"], GATE);
    assert_eq!(detail["by"], "ada");
    assert_eq!(detail["sha256"], sha('a'));
}

pub(crate) async fn second_decision_gets_the_winner(fresh: Fresh) {
    let store = gated_run(&fresh).await;
    let reject = decision(1, &sha('a'), "reject", "bob", 4000);
    let approve = decision(1, &sha('a'), "approve", "ada", 5000);
    store.decide_gate(&reject).await.unwrap();
    assert_eq!(
        store.decide_gate(&approve).await.unwrap(),
        GateDecided::AlreadyDecided(row(&reject))
    );
    assert_eq!(store.gate_decisions("r1").await.unwrap(), [row(&reject)]);
    assert_eq!(
        gate_events(&event_kinds(&store, "r1").await),
        ["gate_rejected"]
    );
}

pub(crate) async fn new_attempt_or_artifact_is_decided_again(fresh: Fresh) {
    let store = gated_run(&fresh).await;
    let first = decision(1, &sha('a'), "reject", "bob", 4000);
    let edited = decision(1, &sha('b'), "approve", "ada", 5000);
    let rerun = decision(2, &sha('a'), "approve", "cy", 6000);
    for new in [&first, &edited, &rerun] {
        assert_eq!(
            store.decide_gate(new).await.unwrap(),
            GateDecided::Recorded(row(new))
        );
    }
    assert_eq!(
        store.gate_decisions("r1").await.unwrap(),
        [row(&first), row(&edited), row(&rerun)]
    );
    assert_eq!(
        gate_events(&event_kinds(&store, "r1").await),
        ["gate_rejected", "gate_approved", "gate_approved"]
    );
}

pub(crate) async fn decision_on_unknown_run_is_an_error(fresh: Fresh) {
    let store = fresh.open().await;
    let mut new = decision(1, &sha('a'), "approve", "ada", 4000);
    new.run_id = "nope".to_owned();
    assert!(matches!(
        store.decide_gate(&new).await,
        Err(Error::NoSuchRun(run)) if run == "nope"
    ));
}

fn edit(expected: char, new: char, at: i64) -> ArtifactEdit {
    ArtifactEdit {
        run_id: "r1".to_owned(),
        index: GATE,
        path: "outputs/plan.json".to_owned(),
        expected_sha256: sha(expected),
        new_sha256: sha(new),
        bytes: 12,
        at,
        by: "ada".to_owned(),
    }
}

pub(crate) async fn replace_artifact_is_a_compare_and_swap(fresh: Fresh) {
    let store = gated_run(&fresh).await;
    assert!(store.replace_artifact(&edit('a', 'b', 4000)).await.unwrap());
    let artifacts = store.artifacts("r1").await.unwrap();
    assert_eq!(
        (artifacts[0].sha256.clone(), artifacts[0].bytes),
        (sha('b'), 12)
    );
    // A second editor who read the old hash loses, and changes nothing.
    assert!(!store.replace_artifact(&edit('a', 'c', 5000)).await.unwrap());
    assert_eq!(store.artifacts("r1").await.unwrap(), artifacts);
    // An output that is not recorded is not created.
    let mut unknown = edit('b', 'c', 6000);
    unknown.path = "outputs/other.json".to_owned();
    assert!(!store.replace_artifact(&unknown).await.unwrap());
    assert_eq!(store.artifacts("r1").await.unwrap(), artifacts);
    assert_eq!(
        gate_events(&event_kinds(&store, "r1").await),
        ["gate_output_edited"]
    );
    let events = store.events("r1", 0).await.unwrap();
    let detail: serde_json::Value = serde_json::from_str(&events.last().unwrap().detail).unwrap();
    assert_eq!(detail["by"], "ada");
}

pub(crate) async fn a_decision_keeps_the_outputs_it_was_made_on(fresh: Fresh) {
    let store = gated_run(&fresh).await;
    let kept = |path: &str, content: Option<&str>, truncated| DecidedOutput {
        path: path.to_owned(),
        sha256: sha('c'),
        content: content.map(str::to_owned),
        truncated,
    };
    let mut approve = decision(1, &sha('a'), "approve", "ada", 4000);
    approve.outputs = vec![
        kept("outputs/b.md", None, true),
        kept("outputs/a.json", Some("[1, 2]\n"), false),
    ];
    store.decide_gate(&approve).await.unwrap();
    let read = store
        .decided_outputs("r1", GATE, 1, &sha('a'))
        .await
        .unwrap();
    assert_eq!(
        read,
        [approve.outputs[1].clone(), approve.outputs[0].clone()]
    );
    // The loser of a race keeps nothing of its own.
    let mut late = decision(1, &sha('a'), "reject", "bob", 5000);
    late.outputs = vec![kept("outputs/c.md", Some("late"), false)];
    store.decide_gate(&late).await.unwrap();
    assert_eq!(
        store
            .decided_outputs("r1", GATE, 1, &sha('a'))
            .await
            .unwrap(),
        read
    );
    // Another decision's outputs are its own; none recorded, none read.
    assert!(
        store
            .decided_outputs("r1", GATE, 2, &sha('a'))
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn concurrent_edits_one_wins(fresh: Fresh) {
    let store = gated_run(&fresh).await;
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8u8)
        .map(|i| {
            let store = store.clone();
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                store
                    .replace_artifact(&edit('a', char::from(b'b' + i), 4000))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut won = 0;
    for handle in handles {
        won += usize::from(handle.await.unwrap());
    }
    assert_eq!(won, 1);
}

/// Ten people decide at once (approvals and rejections, through three
/// connections pools standing for three processes), a hundred times over:
/// each time exactly one decision is recorded, every caller is told the
/// same winner, and exactly one event is logged.
pub(crate) async fn concurrent_decisions_record_exactly_one(fresh: Fresh) {
    const DECIDERS: usize = 10;
    const ROUNDS: i64 = 100;
    let store = gated_run(&fresh).await;
    let stores = [store.clone(), fresh.open().await, fresh.open().await];
    for round in 1..=ROUNDS {
        let barrier = Arc::new(Barrier::new(DECIDERS));
        let handles: Vec<_> = (0..DECIDERS)
            .map(|i| {
                let store = stores[i % stores.len()].clone();
                let barrier = Arc::clone(&barrier);
                let what = if i % 2 == 0 { "approve" } else { "reject" };
                let new = decision(round, &sha('a'), what, &format!("user{i}"), 4000 + round);
                tokio::spawn(async move {
                    barrier.wait().await;
                    store.decide_gate(&new).await.unwrap()
                })
            })
            .collect();
        let mut recorded = Vec::new();
        let mut winners = Vec::new();
        for handle in handles {
            let outcome = handle.await.unwrap();
            if let GateDecided::Recorded(row) = &outcome {
                recorded.push(row.clone());
            }
            winners.push(outcome.row().clone());
        }
        assert_eq!(recorded.len(), 1, "round {round}: {recorded:?}");
        assert!(
            winners.iter().all(|winner| *winner == recorded[0]),
            "round {round}: callers disagree on the winner: {winners:?}"
        );
    }
    let decisions = store.gate_decisions("r1").await.unwrap();
    assert_eq!(decisions.len(), usize::try_from(ROUNDS).unwrap());
    assert_eq!(
        gate_events(&event_kinds(&store, "r1").await).len(),
        usize::try_from(ROUNDS).unwrap()
    );
}

/// A run ended by a rejected gate is finished, like a failed one.
pub(crate) async fn rejected_run_is_terminal(fresh: Fresh) {
    let store = gated_run(&fresh).await;
    let lease = store
        .acquire("r1", "owner", 5000, 60_000, None)
        .await
        .unwrap();
    store
        .apply(
            &lease,
            &[Transition::RunStatus {
                status: "rejected".to_owned(),
                at: 6000,
                error: Some("gate 'gate' rejected by bob: no".to_owned()),
            }],
        )
        .await
        .unwrap();
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (run.status.as_str(), run.finished_at),
        ("rejected", Some(6000))
    );
}
