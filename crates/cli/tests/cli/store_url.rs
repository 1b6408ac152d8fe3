//! `BATON_DATABASE_URL`: which values select which store, and which are
//! refused instead of silently becoming a new SQLite file.

use crate::project::{HEADER, Project, stage};

/// `baton ARGS` in `project` with `BATON_DATABASE_URL=url`.
fn with_url(project: &Project, url: &str, args: &[&str]) -> baton_test_support::Run {
    project
        .command(args)
        .env("BATON_DATABASE_URL", url)
        .output()
        .expect("baton runs")
        .into()
}

/// The names in the project directory: a refused value must create nothing.
fn entries(project: &Project) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(project.path())
        .expect("read the project")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn an_upper_case_postgres_url_selects_postgresql() {
    let project = Project::new();
    let run = with_url(&project, "POSTGRES://nobody@127.0.0.1:1/x", &["runs"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(
        run.stderr
            .contains("cannot open the store at POSTGRES://nobody@127.0.0.1:1/x"),
        "{}",
        run.stderr
    );
    assert!(
        entries(&project).is_empty(),
        "no SQLite file: {:?}",
        entries(&project)
    );
}

#[test]
fn a_url_of_another_database_is_refused() {
    let project = Project::new();
    let run = with_url(&project, "mysql://x", &["runs"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(
        run.stderr
            .contains("BATON_DATABASE_URL has the scheme mysql://"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("postgres://"),
        "says what works: {}",
        run.stderr
    );
    assert!(entries(&project).is_empty(), "{:?}", entries(&project));
}

#[test]
fn a_value_with_surrounding_whitespace_is_refused() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!("{HEADER}{}", stage("a", "touch ran", "")),
    );
    let path = project.path().join("x.db");
    let run = with_url(
        &project,
        &format!(" {}", path.display()),
        &["run", "wf.yaml"],
    );
    assert_eq!(run.code, 4, "{run:?}");
    assert!(
        run.stderr
            .contains("BATON_DATABASE_URL starts or ends with whitespace"),
        "{}",
        run.stderr
    );
    assert_eq!(entries(&project), ["wf.yaml"], "nothing ran or was created");
}

#[test]
fn a_sqlite_url_names_the_file() {
    let project = Project::new();
    project.write("wf.yaml", &format!("{HEADER}{}", stage("a", "true", "")));
    let path = project.path().join("stores").join("some.db");
    let url = format!("sqlite://{}", path.display());
    let run = with_url(&project, &url, &["run", "wf.yaml"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(path.is_file(), "the store is at {}", path.display());
    assert!(!project.path().join(".baton").join("baton.db").exists());
    let runs = with_url(&project, &url, &["runs", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).expect("json");
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
}
