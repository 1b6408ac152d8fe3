//! A scratch project of the failpoint sweep: the workflow, its agents, a
//! store, a witness log, and the commands of a run.

use std::path::Path;
use std::time::Duration;

use baton_store::Store;
use baton_test_support::Run;

use super::{Setup, Step};

/// Longest any one command may take before the test fails showing why.
const LIMIT: Duration = Duration::from_secs(120);

/// A scratch project: the workflow, agents in `baton.toml`, a store (its
/// own SQLite file, or the shared PostgreSQL database), and a witness log
/// outside the project, where every execution of a script or an agent
/// leaves a line (read-only validators may not write in the project).
pub(super) struct Project {
    pub(super) dir: tempfile::TempDir,
    witness: tempfile::TempDir,
    /// The workflow's name: unique, since a PostgreSQL database is shared.
    pub(super) name: String,
    store: String,
    /// The run's id, once recorded.
    run: std::cell::OnceCell<String>,
    /// The store as the test reads it, once there is one, and the runtime
    /// it lives in.
    opened: std::cell::OnceCell<Store>,
    runtime: tokio::runtime::Runtime,
}

impl Project {
    pub(super) fn new(setup: Setup<'_>, label: &str) -> Project {
        static PROJECTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = tempfile::tempdir().expect("temp dir");
        let witness = tempfile::tempdir().expect("temp dir");
        let serial = PROJECTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("sweep-{label}-{}-{serial}", std::process::id());
        let log = witness.path().join("witness");
        let text = workflow(&name, &log, setup.isolated);
        std::fs::write(dir.path().join("wf.yaml"), text).expect("write");
        std::fs::write(dir.path().join("baton.toml"), agents(&log)).expect("write");
        if setup.isolated {
            let files = [("code.txt", "first\n"), (".gitignore", ".baton/\n")];
            crate::project::git_repository(dir.path(), &files);
        }
        // Set even for SQLite (the default file, named): an inherited
        // `BATON_DATABASE_URL` must not point the test elsewhere.
        let store = setup.postgres.map_or_else(
            || dir.path().join(".baton/baton.db").display().to_string(),
            str::to_owned,
        );
        Project {
            dir,
            witness,
            name,
            store,
            run: std::cell::OnceCell::new(),
            opened: std::cell::OnceCell::new(),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
        }
    }

    pub(super) fn baton(&self, args: &[&str], failpoint: Option<&str>) -> Run {
        let mut env = vec![("BATON_DATABASE_URL".to_owned(), self.store.clone())];
        if let Some(point) = failpoint {
            env.push(("BATON_FAILPOINT".to_owned(), point.to_owned()));
        }
        baton_test_support::run_bounded_with(
            Path::new(env!("CARGO_BIN_EXE_baton")),
            self.dir.path(),
            args,
            &env,
            LIMIT,
        )
    }

    /// Runs a command that must succeed.
    pub(super) fn must(&self, args: &[&str]) -> Result<(), String> {
        let run = self.baton(args, None);
        match run.code {
            0 => Ok(()),
            code => Err(format!("{args:?} exited {code}: {}", run.stderr.trim_end())),
        }
    }

    /// The arguments of `step` for this project's run.
    fn args(step: Step, run_id: Option<&str>) -> Vec<String> {
        let id = || run_id.expect("a recorded run").to_owned();
        match step {
            Step::Run => vec!["run".into(), "wf.yaml".into()],
            Step::Approve => vec!["gate".into(), "approve".into(), id(), "review".into()],
            Step::Resume => vec!["resume".into(), id()],
        }
    }

    pub(super) fn step(&self, step: Step, failpoint: Option<&str>) -> Run {
        let id = (step != Step::Run).then(|| self.run_id()).flatten();
        let args = Self::args(step, id.as_deref());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.baton(&args, failpoint)
    }

    /// Reads the store with `read`, unless there is none yet (opening
    /// would create it).
    pub(super) fn read<T>(&self, read: impl AsyncFnOnce(&Store) -> T) -> Option<T> {
        if !self.store.starts_with("postgres") && !Path::new(&self.store).exists() {
            return None;
        }
        let store = self.opened.get_or_init(|| {
            self.runtime
                .block_on(Store::open(&self.store))
                .expect("the store opens")
        });
        Some(self.runtime.block_on(read(store)))
    }

    pub(super) fn run_id(&self) -> Option<String> {
        if let Some(id) = self.run.get() {
            return Some(id.clone());
        }
        let id = self
            .read(async |store| {
                let runs = store.runs().await.expect("runs");
                runs.into_iter()
                    .find(|run| run.workflow == self.name)
                    .map(|run| run.run_id)
            })
            .flatten()?;
        Some(self.run.get_or_init(|| id).clone())
    }

    pub(super) fn witnessed(&self) -> Vec<String> {
        std::fs::read_to_string(self.witness.path().join("witness"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// `plan` → `review` (gate) → `work` (fan-out over the reviewed items) →
/// (`code`, isolated: an agent changing `code.txt` in a worktree of its
/// own, merged back) → `report` (validated; the first cycle's finding is
/// critical, corrected once) → `publish`. Every script leaves a witness
/// line as the stand-in agent does: `run stage attempt idempotency-key`.
fn workflow(name: &str, witness: &Path, isolated: bool) -> String {
    let witness = format!(
        "      echo \"$BATON_RUN_ID $BATON_STAGE $BATON_ATTEMPT $BATON_IDEMPOTENCY_KEY\" >> '{}'\n",
        witness.display()
    );
    let stage = |name: &str, extra: &str, script: &str| {
        format!(
            "  - name: {name}\n    kind: execute\n    description: d\n    executor: inline\n{extra}    script: |\n      {script}\n{witness}"
        )
    };
    [
        format!(
            "name: {name}\nversion: '1'\ndescription: the failpoint sweep\ntrigger: {{source: manual}}\nstages:\n"
        ),
        stage(
            "plan",
            "    writes_to: [plan.json]\n",
            r#"printf '{"items": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}' > outputs/plan.json"#,
        ),
        stage(
            "review",
            "    depends_on: [plan]\n    writes_to: [review.json]\n    human_gate: true\n",
            "cp outputs/plan.json outputs/review.json",
        ),
        stage(
            "work",
            "    depends_on: [review]\n    fan_out: {source: review, field: items, key: id}\n    writes_to: ['work-{id}.txt']\n",
            "printf 'done %s\\n' {id} > \"outputs/work-$BATON_ITEM_NAME.txt\"",
        ),
        if isolated {
            "  - name: code\n    kind: execute\n    description: Change the code.\n    agent: {role: coder, access: read-write, isolation: worktree}\n    depends_on: [work]\n    writes_to: [code.md]\n".to_owned()
        } else {
            String::new()
        },
        stage(
            "report",
            &format!(
                "    depends_on: [{}]\n    writes_to: [report.json]\n    validation: {{strategy: cross_unit, max_revisions: 2}}\n",
                if isolated { "code" } else { "work" }
            ),
            r#"printf '[{"id": "a"}, {"id": "b"}]' > outputs/report.json"#,
        ),
        stage(
            "publish",
            "    depends_on: [report]\n    writes_to: [final.txt]\n",
            "cat outputs/work-*.txt outputs/report.json > outputs/final.txt",
        ),
    ]
    .concat()
}

/// Validators, the corrector and the coder are the stand-in agent, leaving
/// witness lines.
fn agents(witness: &Path) -> String {
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    let role = |role: &str, directive: &str| {
        format!(
            "\n[agents.{role}]\nprofile = \"{role}\"\n\n[profiles.{role}]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_AGENT = \"{directive}\", BATON_FAKE_WITNESS = \"{}\" }}\n",
            fake.display(),
            witness.display()
        )
    };
    [
        role("validator", "findings critical-until 1"),
        role("correction", "correct"),
        role(
            "coder",
            "write code.txt changed\\nwrite inputs/outputs/code.md coded",
        ),
    ]
    .concat()
}
