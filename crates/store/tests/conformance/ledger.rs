//! The governance ledger: per-scope order assigned atomically, even when
//! many writers append to one scope at once, and the compare-and-append.

use std::sync::Arc;

use baton_store::{Error, NewLedgerEvent};
use tokio::sync::Barrier;

use crate::harness::Fresh;

fn event(kind: &str, key: &str, what: &str, at: i64) -> NewLedgerEvent {
    NewLedgerEvent {
        scope_kind: kind.to_owned(),
        scope_key: key.to_owned(),
        kind: what.to_owned(),
        payload: format!(r#"{{"n":{at}}}"#),
        profile: "claude".to_owned(),
        model: Some("opus".to_owned()),
        session: "s1".to_owned(),
        recorded_at: at,
    }
}

pub(crate) async fn appends_are_numbered_per_scope(fresh: Fresh) {
    let store = fresh.open().await;
    assert!(store.ledger_events("run", "r1").await.unwrap().is_empty());
    assert_eq!(
        store
            .append_ledger(&event("run", "r1", "edited", 10), None)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .append_ledger(&event("run", "r1", "validated", 5), None)
            .await
            .unwrap(),
        2
    );
    // Another scope counts from 1 on its own, even with the same key.
    assert_eq!(
        store
            .append_ledger(&event("task", "r1", "edited", 7), None)
            .await
            .unwrap(),
        1
    );
    let events = store.ledger_events("run", "r1").await.unwrap();
    // Order is the sequence, not the (earlier) timestamp of the second event.
    assert_eq!(
        events
            .iter()
            .map(|e| (e.seq, e.kind.as_str()))
            .collect::<Vec<_>>(),
        [(1, "edited"), (2, "validated")]
    );
    assert_eq!(events[0].payload, r#"{"n":10}"#);
    assert_eq!(events[0].model.as_deref(), Some("opus"));
    let scopes = store.ledger_scopes().await.unwrap();
    assert_eq!(
        scopes
            .iter()
            .map(|s| (s.kind.as_str(), s.key.as_str(), s.events))
            .collect::<Vec<_>>(),
        [("run", "r1", 2), ("task", "r1", 1)]
    );
}

pub(crate) async fn expected_append_refuses_when_the_scope_moved(fresh: Fresh) {
    let store = fresh.open().await;
    assert_eq!(
        store
            .append_ledger(&event("session", "s", "edited", 1), Some(0))
            .await
            .unwrap(),
        1
    );
    let error = store
        .append_ledger(&event("session", "s", "validated", 2), Some(0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::LedgerMoved {
                expected: 0,
                found: 1,
                ..
            }
        ),
        "{error:?}"
    );
    // Nothing was written and the counter was rolled back.
    assert_eq!(store.ledger_events("session", "s").await.unwrap().len(), 1);
    assert_eq!(
        store
            .append_ledger(&event("session", "s", "validated", 3), Some(1))
            .await
            .unwrap(),
        2
    );
}

pub(crate) async fn concurrent_appends_never_collide(fresh: Fresh) {
    const WRITERS: usize = 8;
    const EACH: usize = 10;
    let barrier = Arc::new(Barrier::new(WRITERS));
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        // A store (and pool) per writer, as separate processes would have.
        let store = fresh.open().await;
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut seqs = Vec::new();
            for n in 0..EACH {
                let at = i64::try_from(writer * 100 + n).unwrap();
                seqs.push(
                    store
                        .append_ledger(&event("run", "busy", "edited", at), None)
                        .await
                        .unwrap(),
                );
            }
            seqs
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let seqs = task.await.unwrap();
        // A writer's own appends keep their order.
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        all.extend(seqs);
    }
    all.sort_unstable();
    let total = i64::try_from(WRITERS * EACH).unwrap();
    assert_eq!(all, (1..=total).collect::<Vec<_>>());
    let store = fresh.open().await;
    let events = store.ledger_events("run", "busy").await.unwrap();
    assert_eq!(events.len(), WRITERS * EACH);
    assert_eq!(store.ledger_scopes().await.unwrap()[0].events, total);
}

pub(crate) async fn ledger_events_ride_in_a_fenced_batch(fresh: Fresh) {
    use baton_store::Transition;

    use crate::harness::new_run;

    let store = fresh.open().await;
    store
        .create_run(&new_run("r1", 1000, &["a"]))
        .await
        .unwrap();
    let stale = store
        .acquire("r1", "first", 1000, 60_000, None)
        .await
        .unwrap();
    let lease = store
        .acquire("r1", "second", 100_000, 60_000, None)
        .await
        .unwrap();
    let batch = [
        Transition::LedgerAppended(event("run", "r1", "edited", 1)),
        Transition::LedgerAppended(event("run", "r1", "validated", 2)),
    ];
    // A driver that lost its lease writes no ledger event either.
    assert!(store.apply(&stale, &batch).await.is_err());
    assert!(store.ledger_events("run", "r1").await.unwrap().is_empty());
    store.apply(&lease, &batch).await.unwrap();
    store
        .append_ledger(&event("run", "r1", "reviewed", 3), None)
        .await
        .unwrap();
    let kinds: Vec<(i64, String)> = store
        .ledger_events("run", "r1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            (1, "edited".to_owned()),
            (2, "validated".to_owned()),
            (3, "reviewed".to_owned())
        ]
    );
}
