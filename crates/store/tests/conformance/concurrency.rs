//! Concurrent writers: batches under one lease, racing acquirers and
//! racing creators. Several store handles stand for several processes.

use std::sync::Arc;

use baton_store::{Error, Store, Transition};
use tokio::sync::Barrier;

use crate::harness::{Fresh, event_kinds, new_run};

const TTL: i64 = 60_000;

/// Runs `task(i)` for `0..count` at once (released together by a barrier)
/// and returns the results in order.
async fn race<T, F, Fut>(count: usize, task: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(count));
    let handles: Vec<_> = (0..count)
        .map(|i| {
            let barrier = Arc::clone(&barrier);
            let work = task(i);
            tokio::spawn(async move {
                barrier.wait().await;
                work.await
            })
        })
        .collect();
    let mut out = Vec::with_capacity(count);
    for handle in handles {
        out.push(handle.await.expect("a racing task panicked"));
    }
    out
}

pub(crate) async fn concurrent_applies_serialize(fresh: Fresh) {
    const TASKS: i64 = 20;
    let store = fresh.open().await;
    let names: Vec<String> = (0..TASKS).map(|i| format!("s{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    store
        .create_run(&new_run("r1", 1000, &names))
        .await
        .unwrap();
    let lease = store.acquire("r1", "owner", 1000, TTL, None).await.unwrap();
    // A second handle (another pool) shares the work.
    let other = fresh.open().await;

    let results = race(usize::try_from(TASKS).unwrap(), |i| {
        let store = if i % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        let lease = lease.clone();
        let index = i64::try_from(i).unwrap();
        async move {
            let batch = [
                Transition::Event {
                    at: 2000,
                    kind: format!("begin-{index}"),
                    detail: "{}".to_owned(),
                },
                Transition::AttemptStarted {
                    index,
                    attempt: 1,
                    at: 2000 + index,
                },
                Transition::ProcessStarted {
                    index,
                    attempt: 1,
                    pid: 100 + index,
                    pgid: 100 + index,
                    proc_start: index,
                },
                Transition::AttemptFinished {
                    index,
                    attempt: 1,
                    status: "success".to_owned(),
                    at: 3000 + index,
                    exit_code: Some(0),
                    error: None,
                    artifacts: vec![(format!("out/{index}.txt"), "0".repeat(64), index)],
                },
                Transition::Event {
                    at: 4000,
                    kind: format!("end-{index}"),
                    detail: "{}".to_owned(),
                },
            ];
            store.apply(&lease, &batch).await
        }
    })
    .await;
    for (i, result) in results.into_iter().enumerate() {
        result.unwrap_or_else(|error| panic!("batch {i} failed: {error:?}"));
    }

    // No lost update: every batch landed in full.
    let stages = store.stages("r1").await.unwrap();
    assert!(
        stages
            .iter()
            .all(|stage| stage.status == "success" && stage.attempts == 1),
        "{stages:?}"
    );
    let attempts = store.attempts("r1").await.unwrap();
    assert_eq!(attempts.len(), 20);
    for attempt in &attempts {
        assert_eq!(
            (attempt.status.as_str(), attempt.pid, attempt.finished_at),
            (
                "success",
                Some(100 + attempt.index),
                Some(3000 + attempt.index)
            )
        );
    }
    assert_eq!(store.artifacts("r1").await.unwrap().len(), 20);

    // Serialised: each batch's events are contiguous in the log, in order.
    let kinds = event_kinds(&store, "r1").await;
    assert_eq!(kinds.len(), 2 + 20 * 4, "{kinds:?}");
    let mut seen = std::collections::BTreeSet::new();
    for batch in kinds[2..].chunks(4) {
        let index = batch[0]
            .strip_prefix("begin-")
            .unwrap_or_else(|| panic!("interleaved batches: {kinds:?}"));
        assert_eq!(
            batch,
            [
                format!("begin-{index}"),
                "attempt_started".to_owned(),
                "attempt_finished".to_owned(),
                format!("end-{index}"),
            ],
            "interleaved batches: {kinds:?}"
        );
        assert!(seen.insert(index.to_owned()));
    }
}

pub(crate) async fn concurrent_acquirers_one_wins(fresh: Fresh) {
    let stores = [fresh.open().await, fresh.open().await];
    for round in 0..20 {
        let run_id = format!("r{round}");
        stores[0]
            .create_run(&new_run(&run_id, 1000, &["a"]))
            .await
            .unwrap();

        let results = race(2, |i| {
            let store: Store = stores[i].clone();
            let run_id = run_id.clone();
            async move {
                store
                    .acquire(&run_id, &format!("owner-{i}"), 2000, TTL, None)
                    .await
            }
        })
        .await;

        let winners: Vec<_> = results
            .iter()
            .filter_map(|result| result.as_ref().ok())
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one acquirer wins: {results:?}"
        );
        let winner = winners[0].clone();
        assert_eq!(winner.epoch, 1, "round {round}");
        let loser = results
            .into_iter()
            .find_map(Result::err)
            .expect("one loses");
        assert!(
            matches!(&loser, Error::Held { owner, until, .. } if *owner == winner.owner && *until == winner.until),
            "round {round}: the loser sees the winner: {loser:?}"
        );
        let run = stores[1].run(&run_id).await.unwrap();
        assert_eq!(
            (run.lease_owner.as_deref(), run.lease_epoch),
            (Some(winner.owner.as_str()), 1)
        );
        let kinds = event_kinds(&stores[1], &run_id).await;
        assert_eq!(kinds, ["run_created", "lease_acquired"], "round {round}");
        // The winner's lease is the live one.
        stores[1]
            .apply(
                &winner,
                &[Transition::Event {
                    at: 2001,
                    kind: "won".to_owned(),
                    detail: "{}".to_owned(),
                }],
            )
            .await
            .unwrap();
    }
}

pub(crate) async fn concurrent_take_overs_have_one_winner(fresh: Fresh) {
    let stores = [fresh.open().await, fresh.open().await];
    for round in 0..10 {
        let run_id = format!("r{round}");
        stores[0]
            .create_run(&new_run(&run_id, 1000, &["a"]))
            .await
            .unwrap();
        let old = stores[0]
            .acquire(&run_id, "old", 1000, TTL, None)
            .await
            .unwrap();

        let results = race(2, |i| {
            let store: Store = stores[i].clone();
            let run_id = run_id.clone();
            async move {
                store
                    .acquire(&run_id, &format!("new-{i}"), 2000, TTL, Some("old"))
                    .await
            }
        })
        .await;
        // Both saw "old" dead; the first to lock the run takes it over and
        // the second then finds a live holder that is not "old": refused.
        let (won, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
        assert_eq!(
            (won.len(), refused.len()),
            (1, 1),
            "round {round}: exactly one take-over wins"
        );
        assert!(
            matches!(refused[0], Err(Error::Held { .. })),
            "round {round}: {:?}",
            refused[0]
        );
        let winner = won.into_iter().next().expect("one").expect("ok");
        assert_eq!(winner.epoch, 2, "round {round}");
        let leases = [winner.clone(), winner];
        let run = stores[0].run(&run_id).await.unwrap();
        assert_eq!(
            (run.lease_owner.as_deref(), run.lease_epoch),
            (Some(leases[1].owner.as_str()), 2)
        );
        let event = Transition::Event {
            at: 2001,
            kind: "w".to_owned(),
            detail: "{}".to_owned(),
        };
        for stale in [&old] {
            let error = stores[1]
                .apply(stale, std::slice::from_ref(&event))
                .await
                .expect_err("stale");
            assert!(
                matches!(error, Error::LostLease { .. }),
                "round {round}: {error:?}"
            );
        }
        stores[1].apply(&leases[1], &[event]).await.unwrap();
    }
}

pub(crate) async fn concurrent_creates_one_wins(fresh: Fresh) {
    let stores = [fresh.open().await, fresh.open().await];
    for round in 0..10 {
        let run_id = format!("r{round}");
        let results = race(2, |i| {
            let store: Store = stores[i].clone();
            let run = new_run(&run_id, 1000 + i64::try_from(i).unwrap(), &["a", "b"]);
            async move { store.create_run(&run).await }
        })
        .await;
        let created = results.iter().filter(|result| result.is_ok()).count();
        assert_eq!(created, 1, "round {round}: {results:?}");
        let refused = results
            .into_iter()
            .find_map(Result::err)
            .expect("one is refused");
        assert!(
            matches!(&refused, Error::Duplicate(id) if *id == run_id),
            "round {round}: the loser gets Duplicate: {refused:?}"
        );
        assert_eq!(stores[0].stages(&run_id).await.unwrap().len(), 2);
        assert_eq!(event_kinds(&stores[0], &run_id).await, ["run_created"]);
    }
}
