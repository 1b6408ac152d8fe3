//! `baton queue list`: `--status` and `--limit` select the jobs, and a
//! listing longer than the pages it is read in comes out whole, in order
//! and, as a table, aligned. SQLite always; PostgreSQL when
//! `BATON_TEST_DATABASE_URL` is set (see `baton_test_support::needs`).

use serde_json::Value;

use crate::queue::Suite;

/// More than two of the pages `queue list` reads at a time.
const MANY: usize = 1_203;

fn ids(listed: &Value) -> Vec<i64> {
    listed
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|job| job["id"].as_i64().expect("an id"))
        .collect()
}

fn enqueue(suite: &Suite, count: usize) -> Vec<i64> {
    let count = count.to_string();
    let queue = suite.queue.as_str();
    let args = [
        "queue", "enqueue", "--queue", queue, "--script", "true", "--count", &count, "--json",
    ];
    let enqueued = suite.json(&args);
    let ids = enqueued["ids"].as_array().expect("ids");
    ids.iter().map(|id| id.as_i64().expect("an id")).collect()
}

fn listed(suite: &Suite, extra: &[&str]) -> Vec<i64> {
    let mut args = vec!["queue", "list", "--queue", &suite.queue, "--json"];
    args.extend_from_slice(extra);
    ids(&suite.json(&args))
}

fn stdout(suite: &Suite, extra: &[&str]) -> String {
    let mut args = vec!["queue", "list", "--queue", &suite.queue];
    args.extend_from_slice(extra);
    let output = suite.command(&args).output().expect("run baton");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn list_filters_by_status_and_limit(database_url: Option<String>, backend: &str) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let suite = Suite {
        dir: dir.path().to_owned(),
        database_url,
        queue: format!("list-{backend}-{}", std::process::id()),
    };
    let done = enqueue(&suite, 2);
    let worked = suite.json(&["worker", "--once", "--queue", &suite.queue, "--json"]);
    assert_eq!(worked["succeeded"], 2, "{worked}");
    let waiting = enqueue(&suite, MANY);

    assert_eq!(listed(&suite, &["--status", "succeeded"]), done);
    assert_eq!(listed(&suite, &["--status", "available"]), waiting);
    assert_eq!(
        listed(&suite, &["--status", "available", "--limit", "3"]),
        waiting[..3]
    );
    assert_eq!(
        listed(&suite, &["--status", "succeeded", "--limit", "1"]),
        done[..1]
    );
    assert_eq!(
        listed(&suite, &["--limit", "3"]),
        [&done[..], &waiting[..1]].concat()
    );
    assert_eq!(listed(&suite, &["--limit", "700"]).len(), 700);
    assert!(listed(&suite, &["--status", "error"]).is_empty());
    assert!(listed(&suite, &["--limit", "0"]).is_empty());
    assert_eq!(listed(&suite, &[]), [done, waiting.clone()].concat());

    let yaml = stdout(&suite, &["--limit", "2", "--format", "yaml"]);
    assert_eq!(
        yaml.lines().filter(|line| line.starts_with("- ")).count(),
        2,
        "{yaml}"
    );

    let table = stdout(&suite, &["--status", "available"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), MANY + 1, "a header and a line per job");
    let status_at = lines[0].find("status").expect("a status column");
    for (line, id) in lines[1..].iter().zip(&waiting) {
        assert!(line.starts_with(&format!("{id} ")), "{line}");
        assert_eq!(
            line.get(status_at..status_at + 9),
            Some("available"),
            "{line}"
        );
    }
}

#[test]
fn queue_list_filters_by_status_and_limit_on_sqlite() {
    list_filters_by_status_and_limit(None, "sqlite");
}

#[test]
fn queue_list_filters_by_status_and_limit_on_postgres() {
    if let Some(url) = baton_test_support::needs::postgres_url() {
        list_filters_by_status_and_limit(Some(url), "postgres");
    }
}
