//! Leases: who may drive a run, and the fencing epoch that keeps a former
//! owner from writing.

use baton_store::{Error, Lease, LeaseHolder, Store, Transition};

use crate::harness::{Fresh, new_run, snapshot};

const TTL: i64 = 500;

async fn store_with_run(fresh: &Fresh) -> Store {
    let store = fresh.open().await;
    store
        .create_run(&new_run("r1", 1000, &["a", "b"]))
        .await
        .unwrap();
    store
}

fn assert_lost(error: &Error, epoch: i64) {
    assert!(
        matches!(error, Error::LostLease { run_id, epoch: stale } if run_id == "r1" && *stale == epoch),
        "expected LostLease at epoch {epoch}, got {error:?}"
    );
}

/// One transition of every kind, as a batch a former owner might still send.
fn every_transition() -> Vec<Transition> {
    vec![
        Transition::AttemptStarted {
            index: 1,
            attempt: 1,
            at: 5000,
        },
        Transition::ProcessStarted {
            index: 1,
            attempt: 1,
            pid: 42,
            pgid: 42,
            proc_start: 7,
        },
        Transition::AttemptFinished {
            index: 1,
            attempt: 1,
            status: "success".to_owned(),
            at: 5001,
            exit_code: Some(0),
            error: None,
            artifacts: vec![("out.txt".to_owned(), "ab".repeat(32), 3)],
        },
        Transition::AttemptInterrupted {
            index: 0,
            attempt: 1,
            at: 5002,
        },
        Transition::StageReset {
            index: 0,
            note: "rerun".to_owned(),
        },
        Transition::StageSkipped {
            index: 1,
            at: 5003,
            note: "when is false".to_owned(),
        },
        Transition::RunStatus {
            status: "failed".to_owned(),
            at: 5004,
            error: Some("late".to_owned()),
        },
        Transition::ArtifactsRecorded {
            index: 1,
            at: 5005,
            artifacts: vec![("out.txt".to_owned(), "cd".repeat(32), 4)],
        },
        Transition::Event {
            at: 5005,
            kind: "stale".to_owned(),
            detail: "{}".to_owned(),
        },
    ]
}

pub(crate) async fn acquire_free_run(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let lease = store
        .acquire("r1", "host-a:1:1", 2000, TTL, None)
        .await
        .unwrap();
    assert_eq!(
        lease,
        Lease {
            run_id: "r1".to_owned(),
            owner: "host-a:1:1".to_owned(),
            epoch: 1,
            until: 2000 + TTL
        }
    );
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (run.lease_owner.as_deref(), run.lease_epoch, run.lease_until),
        (Some("host-a:1:1"), 1, 2500)
    );
    assert_eq!(
        store.lease_holder("r1", 2499).await.unwrap(),
        Some(LeaseHolder {
            owner: "host-a:1:1".to_owned(),
            until: 2500
        })
    );
    assert_eq!(
        store.lease_holder("r1", 2500).await.unwrap(),
        None,
        "expired at `until`"
    );

    let events = store.events("r1", 0).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (last.at, last.kind.as_str(), last.detail.as_str()),
        (
            2000,
            "lease_acquired",
            r#"{"owner":"host-a:1:1","epoch":1}"#
        )
    );
}

pub(crate) async fn acquire_is_refused_while_held(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let first = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    let before = snapshot(&store, "r1").await;

    for now in [2000, 2100, 2499] {
        let error = store
            .acquire("r1", "b", now, TTL, None)
            .await
            .expect_err("the lease is live");
        assert!(
            matches!(&error, Error::Held { run_id, owner, until } if run_id == "r1" && owner == "a" && *until == 2500),
            "unexpected error: {error:?}"
        );
    }
    assert_eq!(
        snapshot(&store, "r1").await,
        before,
        "a refused acquire writes nothing"
    );

    // The first owner still holds it and can still write.
    let mut first = first;
    assert!(!store.renew(&mut first, 2400, TTL).await.unwrap());
    store
        .apply(
            &first,
            &[Transition::Event {
                at: 2401,
                kind: "still-mine".to_owned(),
                detail: "{}".to_owned(),
            }],
        )
        .await
        .unwrap();
}

pub(crate) async fn acquire_after_expiry_bumps_epoch(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let first = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    let second = store.acquire("r1", "b", 2500, TTL, None).await.unwrap();
    assert_eq!(
        (second.owner.as_str(), second.epoch, second.until),
        ("b", first.epoch + 1, 3000)
    );
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (run.lease_owner.as_deref(), run.lease_epoch),
        (Some("b"), 2)
    );

    let error = store
        .apply(&first, &every_transition())
        .await
        .expect_err("a is fenced out");
    assert_lost(&error, 1);
    store.apply(&second, &every_transition()).await.unwrap();
}

pub(crate) async fn take_over_bumps_epoch(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let first = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    let second = store
        .acquire("r1", "b", 2100, TTL, Some("a"))
        .await
        .unwrap();
    assert_eq!(
        (second.owner.as_str(), second.epoch, second.until),
        ("b", 2, 2600)
    );
    assert_eq!(
        store.lease_holder("r1", 2100).await.unwrap(),
        Some(LeaseHolder {
            owner: "b".to_owned(),
            until: 2600
        })
    );
    // A take-over of a free run is an ordinary acquire.
    let third = store
        .acquire("r1", "c", 9000, TTL, Some("nobody"))
        .await
        .unwrap();
    assert_eq!(third.epoch, 3);
    let error = store
        .apply(&first, &every_transition())
        .await
        .expect_err("fenced");
    assert_lost(&error, 1);
    let error = store
        .apply(&second, &every_transition())
        .await
        .expect_err("fenced");
    assert_lost(&error, 2);
    // Taking over from a holder that is not the current one is refused.
    let live = store.acquire("r1", "d", 9100, TTL, Some("a")).await;
    assert!(matches!(live, Err(Error::Held { .. })), "{live:?}");
}

pub(crate) async fn stale_epoch_writes_nothing(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let first = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    store
        .apply(
            &first,
            &[Transition::AttemptStarted {
                index: 0,
                attempt: 1,
                at: 2001,
            }],
        )
        .await
        .unwrap();
    let second = store
        .acquire("r1", "b", 2100, TTL, Some("a"))
        .await
        .unwrap();
    let before = snapshot(&store, "r1").await;

    let error = store
        .apply(&first, &every_transition())
        .await
        .expect_err("stale epoch");
    assert_lost(&error, 1);
    assert_eq!(
        error.to_string(),
        "lost ownership of run r1: another baton process took it over (epoch 1 is stale)"
    );
    // One at a time too: not a single row may change.
    for transition in every_transition() {
        let error = store
            .apply(&first, &[transition])
            .await
            .expect_err("stale epoch");
        assert_lost(&error, 1);
    }
    assert_eq!(snapshot(&store, "r1").await, before);

    // The new owner's writes go through.
    store.apply(&second, &every_transition()).await.unwrap();
    assert_ne!(snapshot(&store, "r1").await, before);
}

pub(crate) async fn renew_extends_the_lease(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let mut lease = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    let cancel = store.renew(&mut lease, 2400, TTL).await.unwrap();
    assert!(!cancel);
    assert_eq!(lease.until, 2900);
    assert_eq!(lease.epoch, 1, "renewing keeps the epoch");
    assert_eq!(store.run("r1").await.unwrap().lease_until, 2900);
    // Past the old expiry, the renewed lease still keeps others out.
    let error = store
        .acquire("r1", "b", 2600, TTL, None)
        .await
        .expect_err("renewed");
    assert!(
        matches!(error, Error::Held { until: 2900, .. }),
        "{error:?}"
    );
}

pub(crate) async fn renew_after_takeover_is_lost(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let mut first = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    let second = store
        .acquire("r1", "b", 2100, TTL, Some("a"))
        .await
        .unwrap();
    let before = snapshot(&store, "r1").await;

    let error = store
        .renew(&mut first, 2200, TTL)
        .await
        .expect_err("taken over");
    assert_lost(&error, 1);
    assert_eq!(
        first.until, 2500,
        "a failed renew leaves the lease as it was"
    );
    assert_eq!(
        snapshot(&store, "r1").await,
        before,
        "a failed renew writes nothing"
    );
    assert_eq!(store.run("r1").await.unwrap().lease_until, second.until);

    // Also after the run expired and was acquired normally.
    let mut second = second;
    let _third = store.acquire("r1", "c", 5000, TTL, None).await.unwrap();
    let error = store
        .renew(&mut second, 5001, TTL)
        .await
        .expect_err("expired and taken");
    assert_lost(&error, 2);
}

pub(crate) async fn renew_sees_cancel_request(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let mut lease = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    assert!(!store.renew(&mut lease, 2100, TTL).await.unwrap());

    store.request_cancel("r1", 2150).await.unwrap();
    let events = store.events("r1", 0).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!((last.at, last.kind.as_str()), (2150, "cancel_requested"));

    assert!(store.renew(&mut lease, 2200, TTL).await.unwrap());
    assert!(
        store.renew(&mut lease, 2300, TTL).await.unwrap(),
        "the request stays until the run ends"
    );
    assert_eq!(lease.until, 2800);

    // A cancel requested before anyone holds the run is seen by the next owner.
    store
        .create_run(&new_run("r2", 1000, &["a"]))
        .await
        .unwrap();
    store.request_cancel("r2", 1500).await.unwrap();
    let mut lease = store.acquire("r2", "a", 2000, TTL, None).await.unwrap();
    assert!(store.renew(&mut lease, 2001, TTL).await.unwrap());
}

pub(crate) async fn release_frees_the_lease(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let first = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    store.release(&first).await.unwrap();
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (run.lease_owner, run.lease_epoch, run.lease_until),
        (None, 1, 0)
    );
    assert_eq!(store.lease_holder("r1", 2001).await.unwrap(), None);

    // Another owner need not wait for the expiry.
    let second = store.acquire("r1", "b", 2001, TTL, None).await.unwrap();
    assert_eq!(second.epoch, 2);

    // Releasing a stale lease is harmless: the new owner keeps the run.
    store.release(&first).await.unwrap();
    assert_eq!(
        store.lease_holder("r1", 2002).await.unwrap(),
        Some(LeaseHolder {
            owner: "b".to_owned(),
            until: 2501
        })
    );
    let error = store
        .apply(&first, &every_transition())
        .await
        .expect_err("fenced");
    assert_lost(&error, 1);
}

pub(crate) async fn a_run_created_leased_is_held_at_epoch_one(fresh: Fresh) {
    let store = fresh.open().await;
    let lease = store
        .create_leased_run(&new_run("r1", 1000, &["a", "b"]), "a", TTL)
        .await
        .unwrap();
    assert_eq!(
        lease,
        Lease {
            run_id: "r1".to_owned(),
            owner: "a".to_owned(),
            epoch: 1,
            until: 1500,
        }
    );
    assert_eq!(
        store.lease_holder("r1", 1001).await.unwrap(),
        Some(LeaseHolder {
            owner: "a".to_owned(),
            until: 1500
        })
    );
    let error = store.acquire("r1", "b", 1001, TTL, None).await.unwrap_err();
    assert!(matches!(error, Error::Held { .. }), "{error:?}");
    // The lease fences writes as an acquired one does.
    store
        .apply(
            &lease,
            &[Transition::RunStatus {
                status: "running".to_owned(),
                at: 1002,
                error: None,
            }],
        )
        .await
        .unwrap();
    let taken = store.acquire("r1", "b", 1501, TTL, None).await.unwrap();
    assert_eq!(taken.epoch, 2);
    let error = store.apply(&lease, &every_transition()).await.unwrap_err();
    assert_lost(&error, 1);
    let kinds: Vec<String> = store
        .events("r1", 0)
        .await
        .unwrap()
        .into_iter()
        .map(|event| event.kind)
        .collect();
    assert_eq!(
        &kinds[..2],
        &["run_created".to_owned(), "lease_acquired".to_owned()]
    );
}

pub(crate) async fn the_last_commit_can_release_the_lease(fresh: Fresh) {
    let store = store_with_run(&fresh).await;
    let lease = store.acquire("r1", "a", 2000, TTL, None).await.unwrap();
    let done = [Transition::RunStatus {
        status: "success".to_owned(),
        at: 2001,
        error: None,
    }];
    store.apply_and_release(&lease, &done).await.unwrap();
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (
            run.status.as_str(),
            run.lease_owner,
            run.lease_epoch,
            run.lease_until
        ),
        ("success", None, 1, 0)
    );

    // A lost lease releases nothing and writes nothing.
    let second = store.acquire("r1", "b", 2002, TTL, None).await.unwrap();
    let error = store
        .apply_and_release(&lease, &every_transition())
        .await
        .unwrap_err();
    assert_lost(&error, 1);
    assert_eq!(
        store.lease_holder("r1", 2003).await.unwrap(),
        Some(LeaseHolder {
            owner: "b".to_owned(),
            until: second.until
        })
    );
}
