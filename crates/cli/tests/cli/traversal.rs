//! Names that become paths never lead baton's writes out of the run's
//! workspace: stage names with separators, `writes_to` paths that climb
//! out or are absolute, and symlinks planted where baton writes next.

use std::path::Path;

use crate::baton;

const HEADER: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

fn inline(name: &str, script: &str, writes_to: &str) -> String {
    format!(
        "  - name: {name}\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      {script}\n    writes_to: {writes_to}\n"
    )
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<String> {
    crate::project::files_under(dir)
        .iter()
        .map(|path| path.display().to_string())
        .collect()
}

#[test]
fn names_and_outputs_that_leave_the_workspace_are_refused_with_their_place() {
    let outside = tempfile::tempdir().expect("temp dir");
    let project = outside.path().join("project");
    std::fs::create_dir(&project).expect("project");
    for (stage, line, column, message) in [
        (
            inline("'../../escaped'", "true", "[]"),
            6,
            11,
            "stage name '../../escaped' contains a path separator",
        ),
        (
            inline("\"a\\nb\"", "true", "[]"),
            6,
            11,
            "or a control character",
        ),
        (
            inline("climb", "echo x > ../../x.txt", "['../../x.txt']"),
            12,
            17,
            "stage 'climb' writes_to '../../x.txt', which is outside the workspace",
        ),
        (
            inline("absolute", "true", "['/tmp/baton-escape.txt']"),
            12,
            17,
            "stage 'absolute' writes_to '/tmp/baton-escape.txt'",
        ),
    ] {
        std::fs::write(project.join("wf.yaml"), format!("{HEADER}{stage}")).expect("write");
        for command in [&["compile", "wf.yaml"][..], &["run", "wf.yaml"][..]] {
            let run = baton(&project, command);
            assert_eq!(run.code, 1, "{command:?}: {}", run.stderr);
            assert!(run.stderr.contains(message), "{command:?}: {}", run.stderr);
            assert!(
                run.stderr.contains(&format!("wf.yaml:{line}:{column}")),
                "{command:?} names the place: {}",
                run.stderr
            );
        }
    }
    let written: Vec<String> = files(outside.path())
        .into_iter()
        .filter(|file| !file.ends_with("wf.yaml") && !file.contains("/.baton/"))
        .collect();
    assert_eq!(written, Vec::<String>::new(), "nothing written outside");
    assert!(!Path::new("/tmp/baton-escape.txt").exists());
}

#[test]
fn a_symlink_planted_where_baton_writes_a_log_is_not_followed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let victim = tempfile::tempdir().expect("temp dir");
    let target = victim.path().join("victim.txt");
    std::fs::write(&target, "untouched\n").expect("write");
    // The first stage plants symlinks where the second stage's logs and
    // the temporary file of its result will be written.
    let plant = format!(
        "mkdir -p logs/001-second && ln -s '{0}' logs/001-second/1.stdout && ln -s '{0}' logs/001-second/1.stderr",
        target.display()
    );
    let workflow = [
        inline("first", &plant, "[]"),
        format!(
            "{}    depends_on: [first]\n",
            inline("second", "echo pwned; echo pwned >&2", "[]")
        ),
    ]
    .concat();
    std::fs::write(dir.path().join("wf.yaml"), format!("{HEADER}{workflow}")).expect("write");
    let run = baton(dir.path(), &["run", "wf.yaml"]);
    assert_eq!(
        std::fs::read_to_string(&target).expect("victim"),
        "untouched\n",
        "{}",
        run.stderr
    );
}

#[test]
fn an_output_that_leads_outside_through_a_symlinked_directory_fails_its_stage() {
    let dir = tempfile::tempdir().expect("temp dir");
    let victim = tempfile::tempdir().expect("temp dir");
    let outside = victim.path().display();
    let workflow = [
        // A directory of the outputs replaced by a link, and an output
        // file that is a link: both lead out.
        inline(
            "through-dir",
            &format!("ln -s '{outside}' outputs/sub && echo '- a' > outputs/sub/list.md"),
            "[sub/list.md]",
        ),
        inline(
            "through-file",
            &format!("echo '- b' > '{outside}/b.md' && ln -s '{outside}/b.md' outputs/b.md"),
            "[b.md]",
        ),
        // A link that stays inside the workspace is fine.
        inline(
            "inside",
            "mkdir -p outputs/real && echo '- c' > outputs/real/c.md && ln -s real outputs/near",
            "[near/c.md]",
        ),
    ]
    .concat()
    .replace("writes_to:", "required: false\n    writes_to:");
    std::fs::write(dir.path().join("wf.yaml"), format!("{HEADER}{workflow}")).expect("write");
    let run = baton(dir.path(), &["run", "wf.yaml", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", run.stdout, run.stderr));
    let id = value["run_id"].as_str().expect("run id");
    let status = baton(dir.path(), &["status", id, "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).expect("status");
    let stage = |name: &str| {
        status["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .find(|stage| stage["stage"] == name)
            .cloned()
            .expect("stage")
    };
    for (name, relative) in [
        ("through-dir", "outputs/sub/list.md"),
        ("through-file", "outputs/b.md"),
    ] {
        let found = stage(name);
        assert_eq!(found["status"], "failed", "{found}");
        let error = found["error"].as_str().expect("error");
        assert!(
            error.contains("leads outside the workspace through a symlink")
                && error.contains(relative),
            "{error}"
        );
    }
    assert_eq!(stage("inside")["status"], "success", "{}", stage("inside"));
}
