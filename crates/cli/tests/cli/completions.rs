//! `baton completions SHELL`: scripts for every shell clap_complete knows,
//! and a bash script that bash accepts and that completes baton's commands.

use std::path::Path;

use crate::baton;

#[test]
fn every_shell_gets_a_script_naming_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = baton(dir.path(), &["completions", shell]);
        assert_eq!(script.code, 0, "{shell}: {}", script.stderr);
        for word in ["runs", "status", "gate", "completions"] {
            assert!(script.stdout.contains(word), "{shell} lacks {word}");
        }
    }
    // Nothing was written to the directory: no project state for this.
    assert!(!dir.path().join(".baton").exists());
    let unknown = baton(dir.path(), &["completions", "tcsh"]);
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(unknown.stderr.contains("bash"), "{}", unknown.stderr);
}

#[test]
fn the_bash_script_parses_and_completes_subcommands_and_their_options() {
    let dir = tempfile::tempdir().unwrap();
    let script = baton(dir.path(), &["completions", "bash"]);
    assert_eq!(script.code, 0, "{}", script.stderr);
    let path = dir.path().join("baton.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    // The options of a subcommand are in it too (they are built lazily
    // when baton parses, so this checks the whole tree was built).
    assert!(
        script.stdout.contains("--max-parallel"),
        "run's options missing"
    );
    assert!(
        script.stdout.contains("--older-than"),
        "prune's options missing"
    );

    let syntax = bash(dir.path(), &["-n", path.to_str().unwrap()]);
    assert!(syntax.status.success(), "bash -n: {syntax:?}");

    // Loaded into a shell, it completes `baton ru` to the commands that
    // start so, as bash would on TAB.
    let complete = format!(
        "source {}; COMP_WORDS=(baton ru); COMP_CWORD=1; COMP_LINE='baton ru'; COMP_POINT=8; \
         $(complete -p baton | sed -E 's/.*-F ([^ ]+).*/\\1/') baton ru baton; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let words = bash(dir.path(), &["-c", &complete]);
    assert!(words.status.success(), "{words:?}");
    let words = String::from_utf8_lossy(&words.stdout);
    let mut words: Vec<&str> = words.lines().collect();
    words.sort_unstable();
    assert_eq!(words, ["run", "runs"], "completions of `baton ru`");
}

fn bash(dir: &Path, args: &[&str]) -> std::process::Output {
    #[expect(clippy::disallowed_methods, reason = "tests load the script into bash")]
    std::process::Command::new("bash")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("bash runs")
}
