//! Per-run tallies (`baton runs`) and deleting finished runs (`baton prune`).

use baton_store::{Error, NewLedgerEvent, Transition, UsageRow};

use crate::harness::{Fresh, new_run};

fn finished(index: i64, status: &str) -> [Transition; 2] {
    [
        Transition::AttemptStarted {
            index,
            attempt: 1,
            at: 1100,
        },
        Transition::AttemptFinished {
            index,
            attempt: 1,
            status: status.to_owned(),
            at: 1200,
            exit_code: Some(0),
            error: None,
            artifacts: vec![("out.txt".to_owned(), "00".repeat(32), 3)],
        },
    ]
}

fn usage(index: i64, unit: &str, cost: Option<i64>) -> Transition {
    Transition::UsageRecorded(UsageRow {
        index,
        unit: unit.to_owned(),
        attempt: 1,
        cost_microusd: cost,
        ..UsageRow::default()
    })
}

pub(crate) async fn tallies_count_stages_by_status_and_sum_costs(fresh: Fresh) {
    let store = fresh.open().await;
    store
        .create_run(&new_run("r1", 1000, &["a", "b", "c"]))
        .await
        .unwrap();
    store
        .create_run(&new_run("r2", 2000, &["a"]))
        .await
        .unwrap();
    let lease = store.acquire("r1", "me", 1000, 60_000, None).await.unwrap();
    let mut changes: Vec<Transition> = finished(0, "success").into();
    changes.extend(finished(1, "failed"));
    changes.extend([
        usage(0, "", Some(100)),
        usage(1, "", Some(23)),
        usage(1, "item:x", None),
    ]);
    store.apply(&lease, &changes).await.unwrap();

    let tallies = store.run_tallies().await.unwrap();
    let r1 = &tallies["r1"];
    let counts: Vec<(&str, i64)> = r1
        .stages
        .iter()
        .map(|(status, count)| (status.as_str(), *count))
        .collect();
    assert_eq!(counts, [("failed", 1), ("pending", 1), ("success", 1)]);
    assert_eq!(r1.cost_microusd, Some(123));
    assert_eq!(tallies["r2"].stages.get("pending"), Some(&1));
    assert_eq!(tallies["r2"].cost_microusd, None);
}

/// Rows of run `r1` left in every table that holds a run's records.
async fn rows_of_r1(fresh: &Fresh) -> Vec<(&'static str, i64)> {
    let mut counts = Vec::new();
    for (table, sql) in [
        ("runs", "SELECT COUNT(*) FROM runs WHERE run_id = 'r1'"),
        (
            "run_documents",
            "SELECT COUNT(*) FROM run_documents WHERE run_id = 'r1'",
        ),
        ("stages", "SELECT COUNT(*) FROM stages WHERE run_id = 'r1'"),
        (
            "attempts",
            "SELECT COUNT(*) FROM attempts WHERE run_id = 'r1'",
        ),
        (
            "artifacts",
            "SELECT COUNT(*) FROM artifacts WHERE run_id = 'r1'",
        ),
        ("events", "SELECT COUNT(*) FROM events WHERE run_id = 'r1'"),
        ("usage", "SELECT COUNT(*) FROM usage WHERE run_id = 'r1'"),
        (
            "ledger_events",
            "SELECT COUNT(*) FROM ledger_events WHERE scope_kind = 'run' AND scope_key = 'r1'",
        ),
        (
            "ledger_scopes",
            "SELECT COUNT(*) FROM ledger_scopes WHERE scope_kind = 'run' AND scope_key = 'r1'",
        ),
    ] {
        counts.push((table, fresh.query_i64(sql).await));
    }
    counts
}

pub(crate) async fn only_a_finished_run_no_driver_holds_is_deleted_whole(fresh: Fresh) {
    let store = fresh.open().await;
    store
        .create_run(&new_run("r1", 1000, &["a", "b"]))
        .await
        .unwrap();
    store
        .create_run(&new_run("r2", 1000, &["a"]))
        .await
        .unwrap();
    let lease = store.acquire("r1", "me", 1000, 60_000, None).await.unwrap();
    let mut changes: Vec<Transition> = finished(0, "success").into();
    changes.push(usage(0, "", Some(5)));
    changes.push(Transition::RunStatus {
        status: "success".to_owned(),
        at: 2000,
        error: None,
    });
    store.apply(&lease, &changes).await.unwrap();
    store
        .append_ledger(
            &NewLedgerEvent {
                scope_kind: "run".to_owned(),
                scope_key: "r1".to_owned(),
                kind: "edited".to_owned(),
                payload: "{}".to_owned(),
                profile: "p".to_owned(),
                model: None,
                session: "s".to_owned(),
                recorded_at: 2000,
            },
            None,
        )
        .await
        .unwrap();
    assert!(rows_of_r1(&fresh).await.iter().all(|(_, count)| *count > 0));

    // Its driver still holds the lease; r2 has not finished.
    assert!(!store.delete_finished_run("r1", 2000).await.unwrap());
    assert!(!store.delete_finished_run("r2", 2000).await.unwrap());
    assert!(rows_of_r1(&fresh).await.iter().all(|(_, count)| *count > 0));

    store.release(&lease).await.unwrap();
    assert!(store.delete_finished_run("r1", 2000).await.unwrap());
    let left: Vec<_> = rows_of_r1(&fresh)
        .await
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(matches!(store.run("r1").await, Err(Error::NoSuchRun(_))));
    assert_eq!(store.runs().await.unwrap().len(), 1);
    assert_eq!(store.stages("r2").await.unwrap().len(), 1);
    // Gone already: nothing to delete.
    assert!(!store.delete_finished_run("r1", 3000).await.unwrap());
}
