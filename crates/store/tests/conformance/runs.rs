//! Creating and reading runs.

use baton_store::{Error, RunRow, StageRow};

use crate::harness::{Fresh, event_kinds, new_run, snapshot};

pub(crate) async fn create_run_and_read_it_back(fresh: Fresh) {
    let store = fresh.open().await;
    let new = new_run("r1", 1000, &["fetch", "build", "test"]);
    store.create_run(&new).await.unwrap();

    let run = store.run("r1").await.unwrap();
    assert_eq!(
        run,
        RunRow {
            run_id: "r1".to_owned(),
            workflow: new.workflow.clone(),
            workflow_path: new.workflow_path.clone(),
            workspace: new.workspace.clone(),
            status: "pending".to_owned(),
            created_at: 1000,
            finished_at: None,
            plan: new.plan.clone(),
            params: new.params.clone(),
            sources: new.sources.clone(),
            options: new.options.clone(),
            error: None,
            lease_owner: None,
            lease_epoch: 0,
            lease_until: 0,
        }
    );

    let stages = store.stages("r1").await.unwrap();
    let expected: Vec<StageRow> = ["fetch", "build", "test"]
        .iter()
        .zip(0..)
        .map(|(name, index)| StageRow {
            index,
            name: (*name).to_owned(),
            status: "pending".to_owned(),
            attempts: 0,
            started_at: None,
            finished_at: None,
            error: None,
            note: None,
        })
        .collect();
    assert_eq!(stages, expected);
    assert_eq!(stages[0].duration_ms(), None);

    assert!(store.attempts("r1").await.unwrap().is_empty());
    assert!(store.artifacts("r1").await.unwrap().is_empty());
    let events = store.events("r1", 0).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (
            events[0].at,
            events[0].kind.as_str(),
            events[0].detail.as_str()
        ),
        (1000, "run_created", "{}")
    );
    assert_eq!(store.lease_holder("r1", 1000).await.unwrap(), None);
}

pub(crate) async fn runs_are_listed_oldest_first(fresh: Fresh) {
    let store = fresh.open().await;
    assert!(store.runs().await.unwrap().is_empty());
    store
        .create_run(&new_run("late", 3000, &["a"]))
        .await
        .unwrap();
    store
        .create_run(&new_run("early", 1000, &["a"]))
        .await
        .unwrap();
    store
        .create_run(&new_run("b-tie", 2000, &["a"]))
        .await
        .unwrap();
    store
        .create_run(&new_run("a-tie", 2000, &[]))
        .await
        .unwrap();
    let ids: Vec<String> = store
        .runs()
        .await
        .unwrap()
        .into_iter()
        .map(|run| run.run_id)
        .collect();
    assert_eq!(ids, ["early", "a-tie", "b-tie", "late"]);
    assert!(store.stages("a-tie").await.unwrap().is_empty());
    // Each run's rows stay its own.
    assert_eq!(event_kinds(&store, "late").await, ["run_created"]);
}

pub(crate) async fn child_runs_are_those_whose_options_name_a_parent(fresh: Fresh) {
    let store = fresh.open().await;
    assert!(store.child_runs().await.unwrap().is_empty());
    let mut child = new_run("parent-build", 2000, &["a"]);
    child.options = r#"{"max_parallel":2,"parent_run":"parent","parent_stage":"build"}"#.to_owned();
    store.create_run(&child).await.unwrap();
    store
        .create_run(&new_run("parent", 1000, &["build"]))
        .await
        .unwrap();
    // A run whose options only mention the word elsewhere is no child.
    let mut other = new_run("other", 3000, &["a"]);
    other.options = r#"{"note":"parent_run"}"#.to_owned();
    store.create_run(&other).await.unwrap();
    let ids: Vec<String> = store
        .child_runs()
        .await
        .unwrap()
        .into_iter()
        .map(|run| run.run_id)
        .collect();
    assert_eq!(ids, ["parent-build"]);
}

pub(crate) async fn duplicate_run_id_is_refused(fresh: Fresh) {
    let store = fresh.open().await;
    store
        .create_run(&new_run("r1", 1000, &["a", "b"]))
        .await
        .unwrap();
    let before = snapshot(&store, "r1").await;

    let error = store
        .create_run(&new_run("r1", 2000, &["x", "y", "z"]))
        .await
        .expect_err("a second run with the same id");
    assert!(
        matches!(&error, Error::Duplicate(id) if id == "r1"),
        "unexpected error: {error:?}"
    );
    assert_eq!(error.to_string(), "a run with id r1 exists already");
    assert_eq!(
        snapshot(&store, "r1").await,
        before,
        "the refused run must write nothing"
    );
    assert_eq!(store.runs().await.unwrap().len(), 1);
}

pub(crate) async fn unknown_run_is_an_error(fresh: Fresh) {
    let store = fresh.open().await;
    store
        .create_run(&new_run("r1", 1000, &["a"]))
        .await
        .unwrap();

    let error = store.run("nope").await.expect_err("no such run");
    assert!(
        matches!(&error, Error::NoSuchRun(id) if id == "nope"),
        "{error:?}"
    );
    assert!(store.has_run("r1").await.unwrap());
    assert!(!store.has_run("nope").await.unwrap());
    let error = store
        .acquire("nope", "me", 1000, 500, None)
        .await
        .expect_err("no such run");
    assert!(
        matches!(&error, Error::NoSuchRun(id) if id == "nope"),
        "{error:?}"
    );
    let error = store
        .request_cancel("nope", 1000)
        .await
        .expect_err("no such run");
    assert!(
        matches!(&error, Error::NoSuchRun(id) if id == "nope"),
        "{error:?}"
    );
    let error = store
        .lease_holder("nope", 1000)
        .await
        .expect_err("no such run");
    assert!(
        matches!(&error, Error::NoSuchRun(id) if id == "nope"),
        "{error:?}"
    );

    assert!(store.stages("nope").await.unwrap().is_empty());
    assert!(store.attempts("nope").await.unwrap().is_empty());
    assert!(store.artifacts("nope").await.unwrap().is_empty());
    assert!(store.events("nope", 0).await.unwrap().is_empty());
    // The failed calls logged nothing anywhere.
    assert_eq!(event_kinds(&store, "r1").await, ["run_created"]);
}
