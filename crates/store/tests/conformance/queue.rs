//! The job queue: idempotent enqueue, exclusive claims, fencing by epoch,
//! the reaper, retries, poison jobs, `terminal-`/`deferred-` outcomes,
//! priorities and `not_before`.

use std::collections::HashSet;
use std::time::Duration;

use baton_store::queue::{MAX_DEFERRALS, status};
use baton_store::{ClaimRequest, Completion, JobFilter, JobOutcome, NewJob, Settled, Store};
use sqlx::{Connection, PgConnection};

use crate::harness::{Backend, Fresh};

fn job(key: Option<&str>) -> NewJob {
    NewJob {
        queue: "default".to_owned(),
        kind: "shell".to_owned(),
        payload: r#"{"script":"true"}"#.to_owned(),
        priority: 5,
        max_attempts: 3,
        delay_ms: 0,
        idempotency_key: key.map(str::to_owned),
    }
}

fn claim(owner: &str, limit: i64, lease_ms: i64) -> ClaimRequest {
    ClaimRequest {
        queue: "default".to_owned(),
        owner: owner.to_owned(),
        limit,
        lease_ms,
        key_prefix: None,
    }
}

fn done(id: i64, epoch: i64) -> Completion {
    Completion {
        id,
        epoch,
        outcome: JobOutcome::Succeeded {
            result: r#"{"exit_code":0}"#.to_owned(),
        },
    }
}

fn failure(id: i64, epoch: i64, retry_in_ms: i64) -> Completion {
    Completion {
        id,
        epoch,
        outcome: JobOutcome::Failed {
            error: "boom".to_owned(),
            result: None,
            retry_in_ms,
        },
    }
}

async fn expire(store: &Store) -> Vec<i64> {
    tokio::time::sleep(Duration::from_millis(150)).await;
    store.reap_expired().await.unwrap()
}

pub(crate) async fn enqueue_is_idempotent(fresh: Fresh) {
    let store = fresh.open().await;
    let first = store
        .enqueue(&[job(Some("run/a/1")), job(None), job(None)])
        .await
        .unwrap();
    assert!(first.iter().all(|entry| entry.created));
    let again = store
        .enqueue(&[job(Some("run/a/1")), job(Some("run/b/1"))])
        .await
        .unwrap();
    assert_eq!(again[0].id, first[0].id);
    assert!(!again[0].created);
    assert!(again[1].created);
    // Even once the job finished, its key still names it.
    let claimed = store.claim(&claim("w", 10, 10_000)).await.unwrap();
    assert_eq!(claimed.len(), 4);
    for job in &claimed {
        store.complete(done(job.id, job.lease_epoch)).await.unwrap();
    }
    let third = store.enqueue(&[job(Some("run/a/1"))]).await.unwrap();
    assert_eq!(third[0].id, first[0].id);
    assert!(!third[0].created);
    assert_eq!(store.jobs(&JobFilter::default()).await.unwrap().len(), 4);
    let by_key = store.job_by_key("run/a/1").await.unwrap().unwrap();
    assert_eq!(by_key.status, status::SUCCEEDED);
}

/// A claim with a key prefix takes only the jobs whose key starts with it:
/// a `_` in it is a character, not a wildcard.
pub(crate) async fn a_claim_by_key_prefix_takes_only_those_jobs(fresh: Fresh) {
    let store = fresh.open().await;
    store
        .enqueue(&[
            job(Some("a_b/s/-/1")),
            job(Some("axb/s/-/1")),
            job(Some("a_b-child/s/-/1")),
            job(None),
            job(Some("a_b/t/-/1")),
        ])
        .await
        .unwrap();
    let only = ClaimRequest {
        key_prefix: Some("a_b/".to_owned()),
        ..claim("w", 10, 10_000)
    };
    let claimed = store.claim(&only).await.unwrap();
    let mut keys: Vec<&str> = claimed
        .iter()
        .filter_map(|job| job.idempotency_key.as_deref())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["a_b/s/-/1", "a_b/t/-/1"]);
    assert_eq!(store.claim(&claim("w", 10, 10_000)).await.unwrap().len(), 3);
}

pub(crate) async fn claims_are_exclusive_under_concurrency(fresh: Fresh) {
    let store = fresh.open().await;
    let jobs: Vec<NewJob> = (0..300).map(|_| job(None)).collect();
    store.enqueue(&jobs).await.unwrap();
    let mut tasks = Vec::new();
    for worker in 0..6 {
        let store = fresh.open().await;
        tasks.push(tokio::spawn(async move {
            let owner = format!("w{worker}");
            let mut mine = Vec::new();
            let mut pending = Vec::new();
            loop {
                let (settled, claimed) = store
                    .settle(&pending, Some(&claim(&owner, 7, 30_000)))
                    .await
                    .unwrap();
                assert!(settled.iter().all(|s| *s != Settled::Stale));
                if claimed.is_empty() {
                    break;
                }
                pending = claimed
                    .iter()
                    .map(|job| done(job.id, job.lease_epoch))
                    .collect();
                mine.extend(claimed.iter().map(|job| job.id));
            }
            store.settle(&pending, None).await.unwrap();
            mine
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            assert!(seen.insert(id), "job {id} was claimed twice");
        }
    }
    assert_eq!(seen.len(), 300);
    let succeeded = store
        .jobs(&JobFilter {
            status: Some(status::SUCCEEDED.to_owned()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(succeeded.len(), 300);
    assert!(succeeded.iter().all(|job| job.attempts == 1));
}

pub(crate) async fn stale_epoch_completion_is_rejected(fresh: Fresh) {
    let store = fresh.open().await;
    let id = store.enqueue(&[job(None)]).await.unwrap()[0].id;
    let first = store.claim(&claim("paused", 1, 50)).await.unwrap();
    assert_eq!(first[0].lease_epoch, 1);
    assert_eq!(expire(&store).await, vec![id]);
    // Reaped but not claimed again: the old epoch is already stale.
    assert_eq!(store.complete(done(id, 1)).await.unwrap(), Settled::Stale);
    let second = store.claim(&claim("live", 1, 10_000)).await.unwrap();
    assert_eq!(second[0].lease_epoch, 2);
    assert_eq!(second[0].attempts, 2);
    assert_eq!(store.complete(done(id, 1)).await.unwrap(), Settled::Stale);
    assert_eq!(store.job(id).await.unwrap().status, status::RUNNING);
    assert_eq!(
        store.complete(done(id, 2)).await.unwrap(),
        Settled::Accepted(status::SUCCEEDED.to_owned())
    );
    // A completion after the job finished changes nothing either.
    assert_eq!(
        store.complete(failure(id, 2, 0)).await.unwrap(),
        Settled::Stale
    );
    let row = store.job(id).await.unwrap();
    assert_eq!(row.status, status::SUCCEEDED);
    assert_eq!(row.lease_owner.as_deref(), Some("live"));
    let counters = store.queue_counters().await.unwrap();
    assert_eq!(counters.stale_completions, 3);
    assert_eq!(counters.lease_expiries, 1);
}

pub(crate) async fn heartbeat_extends_and_reports_lost_leases(fresh: Fresh) {
    let store = fresh.open().await;
    store.enqueue(&[job(None), job(None)]).await.unwrap();
    // Renewed every 150 ms for 600 ms, a 500 ms lease outlives its first
    // term, and a test thread stalled for a moment on a loaded machine
    // (past a renewal's slack) does not lose it.
    let claimed = store.claim(&claim("w", 2, 500)).await.unwrap();
    let held: Vec<(i64, i64)> = claimed.iter().map(|j| (j.id, j.lease_epoch)).collect();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(store.heartbeat("w", &held, 500).await.unwrap().is_empty());
        assert!(store.reap_expired().await.unwrap().is_empty());
    }
    // The last renewal is short, so that it can be seen to run out.
    assert!(store.heartbeat("w", &held, 100).await.unwrap().is_empty());
    // Another owner cannot renew them; after expiry the holder learns it lost them.
    assert_eq!(store.heartbeat("other", &held, 100).await.unwrap(), held);
    expire(&store).await;
    let lost = store.heartbeat("w", &held, 100).await.unwrap();
    assert_eq!(lost, held);
}

/// Every worker reaps: a reaper that waited for a job another transaction
/// holds could deadlock with a reaper holding the job it waits for next.
/// It skips that job instead, and a later sweep reaps it. SQLite serialises
/// its writers, so no other transaction holds a job there: it reaps both.
pub(crate) async fn reaper_skips_jobs_another_transaction_holds(fresh: Fresh) {
    let store = fresh.open().await;
    store.enqueue(&[job(None), job(None)]).await.unwrap();
    let claimed = store.claim(&claim("w", 2, 50)).await.unwrap();
    let (held, free) = (claimed[0].id, claimed[1].id);
    tokio::time::sleep(Duration::from_millis(150)).await;
    if fresh.backend() == Backend::Sqlite {
        let mut reaped = store.reap_expired().await.unwrap();
        reaped.sort_unstable();
        assert_eq!(reaped, vec![held.min(free), held.max(free)]);
        return;
    }
    let mut other = PgConnection::connect(fresh.location()).await.unwrap();
    let mut tx = other.begin().await.unwrap();
    sqlx::query("SELECT id FROM jobs WHERE id = $1 FOR UPDATE")
        .bind(held)
        .execute(&mut *tx)
        .await
        .unwrap();
    let reaped = tokio::time::timeout(Duration::from_secs(10), store.reap_expired())
        .await
        .expect("the reaper waited for a job another transaction holds")
        .unwrap();
    assert_eq!(reaped, vec![free]);
    tx.rollback().await.unwrap();
    assert_eq!(store.reap_expired().await.unwrap(), vec![held]);
    assert_eq!(store.queue_counters().await.unwrap().lease_expiries, 2);
}

pub(crate) async fn reaper_counts_attempts_and_poison_ends_in_error(fresh: Fresh) {
    let store = fresh.open().await;
    let mut poison = job(None);
    poison.max_attempts = 2;
    let id = store.enqueue(&[poison]).await.unwrap()[0].id;
    for attempt in 1..=2 {
        let claimed = store.claim(&claim("doomed", 1, 50)).await.unwrap();
        assert_eq!(claimed.len(), 1, "attempt {attempt}");
        assert_eq!(expire(&store).await, vec![id]);
    }
    let row = store.job(id).await.unwrap();
    assert_eq!(row.status, status::ERROR);
    assert_eq!(row.attempts, 2);
    assert!(
        row.error
            .as_deref()
            .unwrap()
            .contains("expired on attempt 2 of 2"),
        "{:?}",
        row.error
    );
    assert!(row.finished_at.is_some());
    assert!(store.claim(&claim("w", 1, 50)).await.unwrap().is_empty());
    // By hand it can run again.
    assert!(store.retry_job(id).await.unwrap());
    assert_eq!(store.claim(&claim("w", 1, 50)).await.unwrap().len(), 1);
}

pub(crate) async fn failures_retry_with_backoff_until_max_attempts(fresh: Fresh) {
    let store = fresh.open().await;
    let id = store.enqueue(&[job(None)]).await.unwrap()[0].id;
    for attempt in 1..=3 {
        let claimed = store.claim(&claim("w", 1, 10_000)).await.unwrap();
        assert_eq!(claimed[0].attempts, attempt);
        let (settled, again) = store
            .settle(
                &[failure(id, claimed[0].lease_epoch, 200)],
                Some(&claim("w", 1, 10_000)),
            )
            .await
            .unwrap();
        let expected = if attempt < 3 {
            status::FAILED
        } else {
            status::ERROR
        };
        assert_eq!(settled, vec![Settled::Accepted(expected.to_owned())]);
        // The backoff holds it back.
        assert!(again.is_empty());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let row = store.job(id).await.unwrap();
    assert_eq!(row.status, status::ERROR);
    assert_eq!(row.error.as_deref(), Some("boom"));
    assert!(
        store
            .claim(&claim("w", 1, 10_000))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.requeue_errors(Some("default")).await.unwrap(), 1);
    assert_eq!(store.job(id).await.unwrap().status, status::AVAILABLE);
}

pub(crate) async fn terminal_and_deferred_outcomes(fresh: Fresh) {
    let store = fresh.open().await;
    let ids: Vec<i64> = store
        .enqueue(&[job(None), job(None)])
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    let claimed = store.claim(&claim("w", 2, 10_000)).await.unwrap();
    let (settled, _) = store
        .settle(
            &[
                Completion {
                    id: ids[0],
                    epoch: claimed[0].lease_epoch,
                    outcome: JobOutcome::Terminal {
                        error: "terminal-bad input".to_owned(),
                        result: None,
                    },
                },
                Completion {
                    id: ids[1],
                    epoch: claimed[1].lease_epoch,
                    outcome: JobOutcome::Deferred {
                        error: "deferred-not yet".to_owned(),
                        retry_in_ms: 0,
                    },
                },
            ],
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        settled,
        vec![
            Settled::Accepted(status::ERROR.to_owned()),
            Settled::Accepted(status::AVAILABLE.to_owned())
        ]
    );
    let dead = store.job(ids[0]).await.unwrap();
    assert_eq!(dead.attempts, 1);
    // Deferrals do not count as attempts, but they are capped.
    for round in 0..MAX_DEFERRALS {
        let job = store.claim(&claim("w", 1, 10_000)).await.unwrap().remove(0);
        assert_eq!(job.attempts, 1, "round {round}");
        let settled = store
            .complete(Completion {
                id: job.id,
                epoch: job.lease_epoch,
                outcome: JobOutcome::Deferred {
                    error: "deferred-again".to_owned(),
                    retry_in_ms: 0,
                },
            })
            .await
            .unwrap();
        let expected = if round + 1 < MAX_DEFERRALS {
            status::AVAILABLE
        } else {
            status::ERROR
        };
        assert_eq!(
            settled,
            Settled::Accepted(expected.to_owned()),
            "round {round}"
        );
    }
    let row = store.job(ids[1]).await.unwrap();
    assert_eq!(row.status, status::ERROR);
    assert_eq!(row.attempts, 0);
}

pub(crate) async fn release_does_not_count_an_attempt(fresh: Fresh) {
    let store = fresh.open().await;
    let id = store.enqueue(&[job(None)]).await.unwrap()[0].id;
    let claimed = store.claim(&claim("w", 1, 10_000)).await.unwrap();
    let settled = store
        .complete(Completion {
            id,
            epoch: claimed[0].lease_epoch,
            outcome: JobOutcome::Released {
                reason: "worker stopping".to_owned(),
            },
        })
        .await
        .unwrap();
    assert_eq!(settled, Settled::Accepted(status::AVAILABLE.to_owned()));
    let again = store.claim(&claim("w2", 1, 10_000)).await.unwrap();
    assert_eq!(again[0].attempts, 1);
    assert_eq!(again[0].lease_epoch, 2);
}

pub(crate) async fn priorities_and_not_before(fresh: Fresh) {
    let store = fresh.open().await;
    let mut low = job(None);
    low.priority = 9;
    let mut high = job(None);
    high.priority = 1;
    let mut later = job(None);
    later.priority = 0;
    later.delay_ms = 300;
    let mut other_queue = job(None);
    other_queue.queue = "other".to_owned();
    let ids: Vec<i64> = store
        .enqueue(&[low, job(None), high, later, other_queue])
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    let order: Vec<i64> = store
        .claim(&claim("w", 10, 10_000))
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(order, vec![ids[2], ids[1], ids[0]]);
    tokio::time::sleep(Duration::from_millis(350)).await;
    let order: Vec<i64> = store
        .claim(&claim("w", 10, 10_000))
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(order, vec![ids[3]]);
}

pub(crate) async fn purge_removes_old_finished_jobs(fresh: Fresh) {
    let store = fresh.open().await;
    let ids: Vec<i64> = store
        .enqueue(&[job(None), job(None)])
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    let claimed = store.claim(&claim("w", 1, 10_000)).await.unwrap();
    store
        .complete(done(claimed[0].id, claimed[0].lease_epoch))
        .await
        .unwrap();
    assert_eq!(store.purge_jobs(60_000).await.unwrap(), 0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.purge_jobs(1).await.unwrap(), 1);
    let left: Vec<i64> = store
        .jobs(&JobFilter::default())
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(left, vec![ids[1]]);
    assert!(matches!(
        store.job(ids[0]).await,
        Err(baton_store::Error::NoSuchJob(_))
    ));
    assert!(store.queue_now().await.unwrap() > 1_600_000_000_000);
}

pub(crate) async fn jobs_page_by_id_with_filters(fresh: Fresh) {
    let store = fresh.open().await;
    let jobs: Vec<NewJob> = (0..7).map(|_| job(None)).collect();
    let ids: Vec<i64> = store
        .enqueue(&jobs)
        .await
        .unwrap()
        .iter()
        .map(|entry| entry.id)
        .collect();
    let claimed = store.claim(&claim("w", 3, 30_000)).await.unwrap();
    let running: Vec<i64> = claimed.iter().map(|job| job.id).collect();
    let listed = |filter: JobFilter| {
        let store = &store;
        async move {
            let rows = store.jobs(&filter).await.unwrap();
            rows.iter().map(|job| job.id).collect::<Vec<i64>>()
        }
    };
    let page = |after: Option<i64>, limit: i64, status: Option<&str>| JobFilter {
        status: status.map(str::to_owned),
        limit: Some(limit),
        after,
        ..JobFilter::default()
    };
    assert_eq!(listed(page(None, 3, None)).await, ids[..3]);
    assert_eq!(listed(page(Some(ids[2]), 3, None)).await, ids[3..6]);
    assert_eq!(listed(page(Some(ids[5]), 3, None)).await, ids[6..]);
    assert!(listed(page(Some(ids[6]), 3, None)).await.is_empty());
    assert!(listed(page(None, 0, None)).await.is_empty());
    let waiting: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|id| !running.contains(id))
        .collect();
    let available = Some(status::AVAILABLE);
    assert_eq!(listed(page(None, 2, available)).await, waiting[..2]);
    assert_eq!(
        listed(page(Some(waiting[1]), 9, available)).await,
        waiting[2..]
    );
    let mut running = running;
    running.sort_unstable();
    assert_eq!(listed(page(None, 9, Some(status::RUNNING))).await, running);
}

pub(crate) async fn jobs_are_counted_by_queue_and_status(fresh: Fresh) {
    let store = fresh.open().await;
    assert_eq!(store.job_counts().await.unwrap(), []);
    let mut other = job(None);
    other.queue = "other".to_owned();
    store
        .enqueue(&[job(None), job(None), job(None), other])
        .await
        .unwrap();
    let claimed = store.claim(&claim("w", 1, 60_000)).await.unwrap();
    assert_eq!(
        store
            .complete(done(claimed[0].id, claimed[0].lease_epoch))
            .await
            .unwrap(),
        Settled::Accepted(status::SUCCEEDED.to_owned())
    );
    let counted =
        |queue: &str, status: &str, count: i64| (queue.to_owned(), status.to_owned(), count);
    assert_eq!(
        store.job_counts().await.unwrap(),
        [
            counted("default", "available", 2),
            counted("default", "succeeded", 1),
            counted("other", "available", 1),
        ]
    );
}
