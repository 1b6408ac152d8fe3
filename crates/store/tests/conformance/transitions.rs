//! What each [`Transition`] writes (see `model.rs`), and batches being
//! all-or-nothing.

use baton_store::{
    ArtifactRow, AttemptRow, Error, EventRow, Lease, NewUnit, StageRow, Store, Transition,
};

use crate::harness::{Fresh, event_kinds, new_run, snapshot};

async fn driven_run(fresh: &Fresh) -> (Store, Lease) {
    let store = fresh.open().await;
    store
        .create_run(&new_run("r1", 1000, &["a", "b", "c"]))
        .await
        .unwrap();
    let lease = store
        .acquire("r1", "owner", 1000, 60_000, None)
        .await
        .unwrap();
    (store, lease)
}

async fn stage(store: &Store, index: usize) -> StageRow {
    store.stages("r1").await.unwrap().swap_remove(index)
}

async fn last_event(store: &Store) -> (i64, String, String) {
    let event = store.events("r1", 0).await.unwrap().pop().unwrap();
    (event.at, event.kind, event.detail)
}

fn started(index: i64, attempt: i64, at: i64) -> Transition {
    Transition::AttemptStarted { index, attempt, at }
}

fn finished(
    index: i64,
    attempt: i64,
    status: &str,
    at: i64,
    artifacts: &[(&str, i64)],
) -> Transition {
    Transition::AttemptFinished {
        index,
        attempt,
        status: status.to_owned(),
        at,
        exit_code: Some(if status == "failed" { 1 } else { 0 }),
        error: (status == "failed").then(|| "exit status 1".to_owned()),
        artifacts: artifacts
            .iter()
            .map(|(path, bytes)| ((*path).to_owned(), sha(path), *bytes))
            .collect(),
    }
}

fn sha(path: &str) -> String {
    format!("{:0>64}", path.len())
}

pub(crate) async fn attempt_started(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store.apply(&lease, &[started(1, 1, 2000)]).await.unwrap();

    assert_eq!(
        store.attempts("r1").await.unwrap(),
        [AttemptRow {
            index: 1,
            attempt: 1,
            status: "running".to_owned(),
            pid: None,
            pgid: None,
            proc_start: None,
            started_at: 2000,
            finished_at: None,
            exit_code: None,
            error: None,
        }]
    );
    let b = stage(&store, 1).await;
    assert_eq!(
        b,
        StageRow {
            index: 1,
            name: "b".to_owned(),
            status: "running".to_owned(),
            attempts: 1,
            started_at: Some(2000),
            finished_at: None,
            error: None,
            note: None,
        }
    );
    assert_eq!(b.duration_ms(), None);
    assert_eq!(
        stage(&store, 0).await.status,
        "pending",
        "other stages are untouched"
    );
    assert_eq!(
        last_event(&store).await,
        (
            2000,
            "attempt_started".to_owned(),
            r#"{"stage":1,"attempt":1}"#.to_owned()
        )
    );

    // A retry after a failure: the stage counts the attempt and forgets the
    // previous end and error.
    store
        .apply(&lease, &[finished(1, 1, "failed", 2100, &[])])
        .await
        .unwrap();
    store.apply(&lease, &[started(1, 2, 2200)]).await.unwrap();
    let b = stage(&store, 1).await;
    assert_eq!(
        (
            b.status.as_str(),
            b.attempts,
            b.started_at,
            b.finished_at,
            b.error
        ),
        ("running", 2, Some(2200), None, None)
    );
    let attempts = store.attempts("r1").await.unwrap();
    assert_eq!(
        attempts
            .iter()
            .map(|a| (a.attempt, a.status.as_str()))
            .collect::<Vec<_>>(),
        [(1, "failed"), (2, "running")]
    );
}

pub(crate) async fn process_started(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store
        .apply(&lease, &[started(0, 1, 2000), started(2, 1, 2000)])
        .await
        .unwrap();
    let events_before = store.events("r1", 0).await.unwrap();
    let stages_before = store.stages("r1").await.unwrap();

    store
        .apply(
            &lease,
            &[Transition::ProcessStarted {
                index: 2,
                attempt: 1,
                pid: 4242,
                pgid: 4240,
                proc_start: 987_654,
            }],
        )
        .await
        .unwrap();
    let attempts = store.attempts("r1").await.unwrap();
    assert_eq!(
        (
            attempts[1].index,
            attempts[1].pid,
            attempts[1].pgid,
            attempts[1].proc_start,
            attempts[1].status.as_str()
        ),
        (2, Some(4242), Some(4240), Some(987_654), "running")
    );
    assert_eq!(
        (attempts[0].pid, attempts[0].pgid, attempts[0].proc_start),
        (None, None, None)
    );
    assert_eq!(
        store.stages("r1").await.unwrap(),
        stages_before,
        "stages are untouched"
    );
    assert_eq!(
        store.events("r1", 0).await.unwrap(),
        events_before,
        "no event is logged"
    );
}

/// A process that starts and ends within one batch is recorded with the
/// attempt's end; one that ended in a later batch keeps its own record.
pub(crate) async fn process_started_with_its_end(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store
        .apply(&lease, &[started(0, 1, 2000), started(2, 1, 2000)])
        .await
        .unwrap();
    let process = |index: i64, pid: i64| Transition::ProcessStarted {
        index,
        attempt: 1,
        pid,
        pgid: pid,
        proc_start: 987_654,
    };
    store
        .apply(
            &lease,
            &[
                process(0, 4242),
                process(2, 4343),
                finished(0, 1, "success", 2500, &[]),
            ],
        )
        .await
        .unwrap();
    let attempts = store.attempts("r1").await.unwrap();
    let recorded: Vec<_> = attempts
        .iter()
        .map(|a| (a.index, a.status.as_str(), a.pid, a.pgid, a.proc_start))
        .collect();
    assert_eq!(
        recorded,
        [
            (0, "success", Some(4242), Some(4242), Some(987_654)),
            (2, "running", Some(4343), Some(4343), Some(987_654)),
        ]
    );
    store
        .apply(&lease, &[finished(2, 1, "failed", 2600, &[])])
        .await
        .unwrap();
    let attempts = store.attempts("r1").await.unwrap();
    assert_eq!(
        (attempts[1].status.as_str(), attempts[1].pid),
        ("failed", Some(4343)),
        "a later end keeps the recorded process"
    );
}

/// A batch in which stages start, run and end is written as their net
/// effect, in batch order: a stage that started and ended in it reads as
/// ended, and a second attempt of a stage in the same batch comes after
/// the first.
pub(crate) async fn starts_and_ends_in_one_batch(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store
        .apply(
            &lease,
            &[
                started(0, 1, 2000),
                started(1, 1, 2000),
                Transition::ProcessStarted {
                    index: 0,
                    attempt: 1,
                    pid: 4242,
                    pgid: 4242,
                    proc_start: 99,
                },
                finished(0, 1, "success", 2100, &[("out/a.txt", 10)]),
                started(2, 1, 2100),
                finished(1, 1, "failed", 2200, &[]),
                started(1, 2, 2300),
            ],
        )
        .await
        .unwrap();
    let stages: Vec<_> = store
        .stages("r1")
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.status, s.attempts, s.started_at, s.finished_at, s.error))
        .collect();
    assert_eq!(
        stages,
        [
            ("success".to_owned(), 1, Some(2000), Some(2100), None),
            ("running".to_owned(), 2, Some(2300), None, None),
            ("running".to_owned(), 1, Some(2100), None, None),
        ]
    );
    let attempts: Vec<_> = store
        .attempts("r1")
        .await
        .unwrap()
        .into_iter()
        .map(|a| {
            (
                a.index,
                a.attempt,
                a.status,
                a.pid,
                a.finished_at,
                a.exit_code,
                a.error,
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [
            (
                0,
                1,
                "success".to_owned(),
                Some(4242),
                Some(2100),
                Some(0),
                None
            ),
            (
                1,
                1,
                "failed".to_owned(),
                None,
                Some(2200),
                Some(1),
                Some("exit status 1".to_owned())
            ),
            (1, 2, "running".to_owned(), None, None, None, None),
            (2, 1, "running".to_owned(), None, None, None, None),
        ]
    );
    let artifacts: Vec<_> = store
        .artifacts("r1")
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.index, a.path))
        .collect();
    assert_eq!(artifacts, [(0, "out/a.txt".to_owned())]);
    let events: Vec<_> = store
        .events("r1", 0)
        .await
        .unwrap()
        .into_iter()
        .map(|event| (event.kind, event.detail))
        .filter(|(kind, _)| kind.starts_with("attempt_"))
        .collect();
    assert_eq!(
        events,
        [
            (
                "attempt_started".to_owned(),
                r#"{"stage":0,"attempt":1}"#.to_owned()
            ),
            (
                "attempt_started".to_owned(),
                r#"{"stage":1,"attempt":1}"#.to_owned()
            ),
            (
                "attempt_finished".to_owned(),
                r#"{"stage":0,"attempt":1,"status":"success"}"#.to_owned()
            ),
            (
                "attempt_started".to_owned(),
                r#"{"stage":2,"attempt":1}"#.to_owned()
            ),
            (
                "attempt_finished".to_owned(),
                r#"{"stage":1,"attempt":1,"status":"failed"}"#.to_owned()
            ),
            (
                "attempt_started".to_owned(),
                r#"{"stage":1,"attempt":2}"#.to_owned()
            ),
        ]
    );
}

/// A batch larger than one statement's rows is written in several.
pub(crate) async fn a_large_batch_is_written_whole(fresh: Fresh) {
    let store = fresh.open().await;
    let names: Vec<String> = (0..450).map(|i| format!("s{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    store
        .create_run(&new_run("r1", 1000, &names))
        .await
        .unwrap();
    let lease = store
        .acquire("r1", "owner", 1000, 60_000, None)
        .await
        .unwrap();
    let starts: Vec<Transition> = (0..450).map(|i| started(i, 1, 2000)).collect();
    store.apply(&lease, &starts).await.unwrap();
    let ends: Vec<Transition> = (0..450)
        .map(|i| finished(i, 1, "success", 3000, &[("out/a.txt", i), ("out/b.txt", i)]))
        .collect();
    store.apply(&lease, &ends).await.unwrap();
    let stages = store.stages("r1").await.unwrap();
    assert!(
        stages
            .iter()
            .all(|stage| stage.status == "success" && stage.finished_at == Some(3000))
    );
    assert_eq!(store.attempts("r1").await.unwrap().len(), 450);
    assert_eq!(store.artifacts("r1").await.unwrap().len(), 900);
}

pub(crate) async fn attempt_finished_success_records_artifacts(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store.apply(&lease, &[started(0, 1, 2000)]).await.unwrap();
    store
        .apply(
            &lease,
            &[finished(
                0,
                1,
                "success",
                2500,
                &[("out/b.txt", 20), ("out/a.txt", 10)],
            )],
        )
        .await
        .unwrap();

    let attempt = store.attempts("r1").await.unwrap().remove(0);
    assert_eq!(
        (
            attempt.status.as_str(),
            attempt.finished_at,
            attempt.exit_code,
            attempt.error
        ),
        ("success", Some(2500), Some(0), None)
    );
    let a = stage(&store, 0).await;
    assert_eq!(
        (
            a.status.as_str(),
            a.started_at,
            a.finished_at,
            a.error.as_deref(),
            a.attempts
        ),
        ("success", Some(2000), Some(2500), None, 1)
    );
    assert_eq!(a.duration_ms(), Some(500));
    assert_eq!(
        store.artifacts("r1").await.unwrap(),
        [
            ArtifactRow {
                index: 0,
                path: "out/a.txt".to_owned(),
                sha256: sha("out/a.txt"),
                bytes: 10
            },
            ArtifactRow {
                index: 0,
                path: "out/b.txt".to_owned(),
                sha256: sha("out/b.txt"),
                bytes: 20
            },
        ]
    );
    assert_eq!(
        last_event(&store).await,
        (
            2500,
            "attempt_finished".to_owned(),
            r#"{"stage":0,"attempt":1,"status":"success"}"#.to_owned()
        )
    );

    // Stage statuses other than `failed` count as a successful attempt.
    for (index, status) in [(1, "awaiting_human"), (2, "skipped")] {
        store
            .apply(&lease, &[started(index, 1, 3000)])
            .await
            .unwrap();
        store
            .apply(&lease, &[finished(index, 1, status, 3100, &[])])
            .await
            .unwrap();
        assert_eq!(
            stage(&store, usize::try_from(index).unwrap()).await.status,
            status
        );
        let attempts = store.attempts("r1").await.unwrap();
        let attempt = attempts.iter().find(|a| a.index == index).unwrap();
        assert_eq!(attempt.status, "success");
    }
}

pub(crate) async fn attempt_finished_failed(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store.apply(&lease, &[started(1, 1, 2000)]).await.unwrap();
    store
        .apply(
            &lease,
            &[Transition::AttemptFinished {
                index: 1,
                attempt: 1,
                status: "failed".to_owned(),
                at: 2300,
                exit_code: None,
                error: Some("killed by \"SIGKILL\"\nafter 3 s".to_owned()),
                artifacts: Vec::new(),
            }],
        )
        .await
        .unwrap();
    let attempt = store.attempts("r1").await.unwrap().remove(0);
    assert_eq!(
        (
            attempt.status.as_str(),
            attempt.finished_at,
            attempt.exit_code,
            attempt.error.as_deref()
        ),
        (
            "failed",
            Some(2300),
            None,
            Some("killed by \"SIGKILL\"\nafter 3 s")
        )
    );
    let b = stage(&store, 1).await;
    assert_eq!(
        (b.status.as_str(), b.finished_at, b.error.as_deref()),
        (
            "failed",
            Some(2300),
            Some("killed by \"SIGKILL\"\nafter 3 s")
        )
    );
    assert!(store.artifacts("r1").await.unwrap().is_empty());
    assert_eq!(
        last_event(&store).await,
        (
            2300,
            "attempt_finished".to_owned(),
            r#"{"stage":1,"attempt":1,"status":"failed"}"#.to_owned()
        )
    );
}

pub(crate) async fn attempt_finished_replaces_artifacts(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store
        .apply(
            &lease,
            &[
                started(0, 1, 2000),
                finished(0, 1, "success", 2100, &[("keep.txt", 1), ("gone.txt", 2)]),
                started(1, 1, 2000),
                finished(1, 1, "success", 2100, &[("other.txt", 3)]),
                started(0, 2, 3000),
                finished(0, 2, "success", 3100, &[("keep.txt", 4), ("new.txt", 5)]),
            ],
        )
        .await
        .unwrap();
    let artifacts: Vec<(i64, String, i64)> = store
        .artifacts("r1")
        .await
        .unwrap()
        .into_iter()
        .map(|artifact| (artifact.index, artifact.path, artifact.bytes))
        .collect();
    assert_eq!(
        artifacts,
        [
            (0, "keep.txt".to_owned(), 4),
            (0, "new.txt".to_owned(), 5),
            (1, "other.txt".to_owned(), 3)
        ]
    );
}

pub(crate) async fn artifacts_recorded_replaces_one_stage_s_artifacts(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store
        .apply(
            &lease,
            &[
                started(0, 1, 2000),
                finished(0, 1, "success", 2100, &[("a.txt", 1), ("old.txt", 2)]),
                started(1, 1, 2000),
                finished(1, 1, "success", 2100, &[("b.txt", 3)]),
            ],
        )
        .await
        .unwrap();
    let before = stage(&store, 0).await;
    store
        .apply(
            &lease,
            &[Transition::ArtifactsRecorded {
                index: 0,
                at: 2600,
                artifacts: vec![("a.txt".to_owned(), "ef".repeat(32), 7)],
            }],
        )
        .await
        .unwrap();
    let artifacts: Vec<(i64, String, String, i64)> = store
        .artifacts("r1")
        .await
        .unwrap()
        .into_iter()
        .map(|artifact| {
            (
                artifact.index,
                artifact.path,
                artifact.sha256,
                artifact.bytes,
            )
        })
        .collect();
    assert_eq!(
        artifacts,
        [
            (0, "a.txt".to_owned(), "ef".repeat(32), 7),
            (1, "b.txt".to_owned(), sha("b.txt"), 3)
        ]
    );
    // The stage itself is as it was: still a success, same times.
    assert_eq!(stage(&store, 0).await, before);
    assert_eq!(
        last_event(&store).await,
        (
            2600,
            "artifacts_recorded".to_owned(),
            r#"{"stage":0,"artifacts":1}"#.to_owned()
        )
    );
}

pub(crate) async fn attempt_interrupted(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store.apply(&lease, &[started(2, 1, 2000)]).await.unwrap();
    store
        .apply(
            &lease,
            &[Transition::AttemptInterrupted {
                index: 2,
                attempt: 1,
                at: 2600,
            }],
        )
        .await
        .unwrap();
    let attempt = store.attempts("r1").await.unwrap().remove(0);
    assert_eq!(
        (
            attempt.status.as_str(),
            attempt.finished_at,
            attempt.exit_code
        ),
        ("interrupted", Some(2600), None)
    );
    let c = stage(&store, 2).await;
    assert_eq!((c.status.as_str(), c.attempts), ("pending", 1));
    assert_eq!(
        last_event(&store).await,
        (
            2600,
            "attempt_interrupted".to_owned(),
            r#"{"stage":2,"attempt":1}"#.to_owned()
        )
    );
}

pub(crate) async fn stage_reset(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store
        .apply(
            &lease,
            &[
                started(0, 1, 2000),
                finished(0, 1, "failed", 2100, &[("a.txt", 1)]),
                started(1, 1, 2000),
                finished(1, 1, "success", 2100, &[("b.txt", 2)]),
            ],
        )
        .await
        .unwrap();
    let events_before = store.events("r1", 0).await.unwrap();

    store
        .apply(
            &lease,
            &[Transition::StageReset {
                index: 0,
                note: "rerun requested".to_owned(),
            }],
        )
        .await
        .unwrap();
    let a = stage(&store, 0).await;
    assert_eq!(
        a,
        StageRow {
            index: 0,
            name: "a".to_owned(),
            status: "pending".to_owned(),
            attempts: 1,
            started_at: None,
            finished_at: None,
            error: None,
            note: Some("rerun requested".to_owned()),
        }
    );
    let artifacts = store.artifacts("r1").await.unwrap();
    assert_eq!(
        artifacts
            .iter()
            .map(|a| (a.index, a.path.as_str()))
            .collect::<Vec<_>>(),
        [(1, "b.txt")],
        "only the reset stage's outputs are forgotten"
    );
    assert_eq!(stage(&store, 1).await.status, "success");
    assert_eq!(
        store.attempts("r1").await.unwrap().len(),
        2,
        "attempts are history and stay"
    );
    assert_eq!(
        store.events("r1", 0).await.unwrap(),
        events_before,
        "no event is logged"
    );
}

pub(crate) async fn stage_skipped(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    let events_before = store.events("r1", 0).await.unwrap();
    store
        .apply(
            &lease,
            &[Transition::StageSkipped {
                index: 2,
                at: 2400,
                note: "when: false".to_owned(),
            }],
        )
        .await
        .unwrap();
    let c = stage(&store, 2).await;
    assert_eq!(
        c,
        StageRow {
            index: 2,
            name: "c".to_owned(),
            status: "skipped".to_owned(),
            attempts: 0,
            started_at: Some(2400),
            finished_at: Some(2400),
            error: None,
            note: Some("when: false".to_owned()),
        }
    );
    assert_eq!(c.duration_ms(), Some(0));
    assert!(store.attempts("r1").await.unwrap().is_empty());
    assert_eq!(
        store.events("r1", 0).await.unwrap(),
        events_before,
        "no event is logged"
    );
}

pub(crate) async fn run_status(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store
        .apply(
            &lease,
            &[Transition::RunStatus {
                status: "running".to_owned(),
                at: 2000,
                error: None,
            }],
        )
        .await
        .unwrap();
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (run.status.as_str(), run.finished_at, run.error),
        ("running", None, None)
    );
    assert_eq!(
        last_event(&store).await,
        (
            2000,
            "run_status".to_owned(),
            r#"{"status":"running"}"#.to_owned()
        )
    );

    store
        .apply(
            &lease,
            &[Transition::RunStatus {
                status: "failed".to_owned(),
                at: 3000,
                error: Some("stage b failed".to_owned()),
            }],
        )
        .await
        .unwrap();
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (run.status.as_str(), run.finished_at, run.error.as_deref()),
        ("failed", Some(3000), Some("stage b failed"))
    );

    // Resumed: not terminal any more, so no end time and no error.
    store
        .apply(
            &lease,
            &[Transition::RunStatus {
                status: "awaiting_human".to_owned(),
                at: 4000,
                error: None,
            }],
        )
        .await
        .unwrap();
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (run.status.as_str(), run.finished_at, run.error),
        ("awaiting_human", None, None)
    );

    for status in ["success", "cancelled"] {
        store
            .apply(
                &lease,
                &[Transition::RunStatus {
                    status: status.to_owned(),
                    at: 5000,
                    error: None,
                }],
            )
            .await
            .unwrap();
        let run = store.run("r1").await.unwrap();
        assert_eq!((run.status.as_str(), run.finished_at), (status, Some(5000)));
    }
    // The lease columns are not the status's business.
    let run = store.run("r1").await.unwrap();
    assert_eq!(
        (run.lease_owner.as_deref(), run.lease_epoch),
        (Some("owner"), 1)
    );
}

pub(crate) async fn event(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    let before = snapshot(&store, "r1").await;
    let detail = r#"{"message":"héllo \"world\"","n":[1,2]}"#;
    store
        .apply(
            &lease,
            &[Transition::Event {
                at: 2222,
                kind: "note".to_owned(),
                detail: detail.to_owned(),
            }],
        )
        .await
        .unwrap();
    let after = snapshot(&store, "r1").await;
    assert_eq!(
        (&after.run, &after.stages, &after.attempts),
        (&before.run, &before.stages, &before.attempts)
    );
    assert_eq!(after.events.len(), before.events.len() + 1);
    assert_eq!(
        last_event(&store).await,
        (2222, "note".to_owned(), detail.to_owned())
    );
}

pub(crate) async fn batch_is_atomic(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    store.apply(&lease, &[started(0, 1, 2000)]).await.unwrap();
    let before = snapshot(&store, "r1").await;

    // The last transition conflicts with the attempt recorded above (same
    // primary key), after several writes to every table succeeded.
    let batch = [
        Transition::Event {
            at: 2100,
            kind: "first".to_owned(),
            detail: "{}".to_owned(),
        },
        Transition::RunStatus {
            status: "running".to_owned(),
            at: 2100,
            error: None,
        },
        Transition::StageSkipped {
            index: 2,
            at: 2100,
            note: "when".to_owned(),
        },
        started(1, 1, 2100),
        finished(1, 1, "success", 2200, &[("b.txt", 1)]),
        started(0, 1, 2300),
    ];
    let error = store
        .apply(&lease, &batch)
        .await
        .expect_err("the duplicate attempt fails");
    assert!(
        matches!(
            error,
            Error::Query {
                what: "record an attempt",
                ..
            }
        ),
        "unexpected error: {error:?}"
    );
    assert_eq!(
        snapshot(&store, "r1").await,
        before,
        "a failed batch writes nothing"
    );

    // The store is still usable, and the same batch without the conflict
    // goes through whole.
    store.apply(&lease, &batch[..5]).await.unwrap();
    let after = snapshot(&store, "r1").await;
    assert_eq!(after.run.status, "running");
    assert_eq!(after.stages[2].status, "skipped");
    assert_eq!(after.stages[1].status, "success");
    assert_eq!(after.artifacts.len(), 1);
    assert_eq!(after.events.len(), before.events.len() + 4);
}

pub(crate) async fn events_are_ordered(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    // Times deliberately out of order: the log is ordered by position.
    let batch: Vec<Transition> = (0..30)
        .map(|n| Transition::Event {
            at: 10_000 - n,
            kind: format!("e{n}"),
            detail: format!("{{\"n\":{n}}}"),
        })
        .collect();
    store.apply(&lease, &batch[..10]).await.unwrap();
    store.apply(&lease, &batch[10..]).await.unwrap();
    store
        .create_run(&new_run("other", 1000, &["x"]))
        .await
        .unwrap();

    let events = store.events("r1", 0).await.unwrap();
    assert!(
        events.windows(2).all(|pair| pair[0].seq < pair[1].seq),
        "seq increases: {events:?}"
    );
    let mut expected = vec!["run_created".to_owned(), "lease_acquired".to_owned()];
    expected.extend((0..30).map(|n| format!("e{n}")));
    assert_eq!(event_kinds(&store, "r1").await, expected);

    // Reading after a position returns exactly the tail.
    let cut = events[5].seq;
    let tail: Vec<EventRow> = store.events("r1", cut).await.unwrap();
    assert_eq!(tail, events[6..]);
    assert!(
        store
            .events("r1", events.last().unwrap().seq)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(event_kinds(&store, "other").await, ["run_created"]);
}

pub(crate) async fn events_of_one_kind(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    let event = |at: i64, kind: &str| Transition::Event {
        at,
        kind: kind.to_owned(),
        detail: format!("{{\"at\":{at}}}"),
    };
    store
        .apply(
            &lease,
            &[
                event(3000, "agent_retry"),
                event(2000, "other"),
                event(1000, "agent_retry"),
            ],
        )
        .await
        .unwrap();
    store
        .create_run(&new_run("other", 1000, &["x"]))
        .await
        .unwrap();
    let other_lease = store
        .acquire("other", "owner", 1000, 60_000, None)
        .await
        .unwrap();
    store
        .apply(&other_lease, &[event(4000, "agent_retry")])
        .await
        .unwrap();

    // Only that kind, only that run, in the order they were logged.
    let found = store.events_of_kind("r1", "agent_retry").await.unwrap();
    let details: Vec<&str> = found.iter().map(|row| row.detail.as_str()).collect();
    assert_eq!(details, ["{\"at\":3000}", "{\"at\":1000}"]);
    assert!(found.iter().all(|row| row.kind == "agent_retry"));
    assert!(found[0].seq < found[1].seq);
    assert!(
        store
            .events_of_kind("r1", "missing")
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn usage_recorded_per_attempt_and_unit(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    let usage = |unit: &str, attempt: i64, cost: Option<i64>| {
        Transition::UsageRecorded(baton_store::UsageRow {
            index: 1,
            unit: unit.to_owned(),
            attempt,
            input_tokens: Some(1200),
            output_tokens: Some(80),
            cache_read_tokens: Some(4000),
            cache_write_tokens: None,
            cost_microusd: cost,
            turns: Some(2),
            session_id: Some("s-1".to_owned()),
            model: None,
            resumed_session: (attempt == 2).then(|| "s-0".to_owned()),
        })
    };
    store
        .apply(
            &lease,
            &[
                usage("", 1, Some(12_300)),
                usage("item:a", 1, None),
                // The same attempt again replaces its row.
                usage("", 1, Some(12_345)),
                usage("", 2, Some(1)),
            ],
        )
        .await
        .unwrap();
    let rows = store.usage("r1").await.unwrap();
    let keys: Vec<(&str, i64, Option<i64>)> = rows
        .iter()
        .map(|row| (row.unit.as_str(), row.attempt, row.cost_microusd))
        .collect();
    assert_eq!(
        keys,
        [("", 1, Some(12_345)), ("", 2, Some(1)), ("item:a", 1, None)]
    );
    assert_eq!(rows[0].input_tokens, Some(1200));
    assert_eq!(rows[0].cache_write_tokens, None);
    assert_eq!(rows[0].session_id.as_deref(), Some("s-1"));
    assert_eq!(rows[0].resumed_session, None);
    assert_eq!(rows[1].resumed_session.as_deref(), Some("s-0"));
    assert!(store.usage("nope").await.unwrap().is_empty());
}

/// Unit starts and ends in one batch are written as their net effect, in
/// batch order: a unit that started and ended reads as ended, a unit that
/// failed and started again in the batch reads as running its second
/// attempt, and a failed end logs its event in its place.
pub(crate) async fn units_start_and_end_in_one_batch(fresh: Fresh) {
    let (store, lease) = driven_run(&fresh).await;
    let unit = |key: &str, ordinal: i64| NewUnit {
        key: key.to_owned(),
        ordinal,
        kind: "item".to_owned(),
        cycle: 0,
        label: format!("a[{key}]"),
        spec: "{}".to_owned(),
    };
    let unit_started = |key: &str, at: i64| Transition::UnitStarted {
        index: 0,
        key: key.to_owned(),
        at,
    };
    let unit_finished = |key: &str, status: &str, at: i64| Transition::UnitFinished {
        index: 0,
        key: key.to_owned(),
        status: status.to_owned(),
        at,
        exit_code: Some(if status == "success" { 0 } else { 1 }),
        error: (status != "success").then(|| "exited 1".to_owned()),
        artifacts: vec![("out/x".to_owned(), "ab".repeat(32), 3)],
    };
    store
        .apply(
            &lease,
            &[
                started(0, 1, 1000),
                Transition::UnitsPlanned {
                    index: 0,
                    units: vec![unit("x", 0), unit("y", 1), unit("z", 2)],
                    at: 1000,
                },
                unit_started("x", 1000),
                unit_started("y", 1000),
                unit_finished("x", "success", 1100),
                unit_finished("y", "failed", 1200),
                unit_started("y", 1300),
                unit_started("z", 1300),
            ],
        )
        .await
        .unwrap();
    let units: Vec<_> = store
        .units("r1")
        .await
        .unwrap()
        .into_iter()
        .map(|u| {
            (
                u.key,
                u.status,
                u.attempts,
                u.started_at,
                u.finished_at,
                u.exit_code,
                u.error,
            )
        })
        .collect();
    assert_eq!(
        units,
        [
            (
                "x".to_owned(),
                "success".to_owned(),
                1,
                Some(1000),
                Some(1100),
                Some(0),
                None
            ),
            (
                "y".to_owned(),
                "running".to_owned(),
                2,
                Some(1300),
                None,
                None,
                None
            ),
            (
                "z".to_owned(),
                "running".to_owned(),
                1,
                Some(1300),
                None,
                None,
                None
            ),
        ]
    );
    let recorded = store.units("r1").await.unwrap();
    assert!(
        recorded[0].artifacts.contains("out/x"),
        "{}",
        recorded[0].artifacts
    );
    let kinds = event_kinds(&store, "r1").await;
    assert_eq!(
        kinds.iter().filter(|kind| *kind == "unit_failed").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("unit_failed"),
        "{kinds:?}"
    );
}
