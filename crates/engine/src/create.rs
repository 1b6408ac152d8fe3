//! Creating a run: compile, record it in the store (before anything else
//! happens, so a run killed at any moment is listed), then lay out its
//! workspace.

use std::path::{Path, PathBuf};

use baton_store::{Lease, NewRun, Store};
use baton_workflow::{Loaded, Plan};
use serde::{Deserialize, Serialize};
use serde_json::json;

pub use crate::digest::sha256_hex;

use crate::clock;
use crate::loader::FsLoader;
use crate::run_options::DriverMode;
pub use crate::run_options::RunOptions;
use crate::workspace;
use crate::{Error, Result};

/// How long a drive's lease lasts by default, in ms ([`crate::DriveOptions`]'s
/// `lease_ttl`): also the first lease's, which [`create_run`] takes along
/// with the run.
pub(crate) const LEASE_TTL_MS: i64 = 30_000;

/// What `baton run` asks for.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The workflow file, relative to `project_dir` or absolute.
    pub workflow_path: String,
    /// `--params key=value`.
    pub params: Vec<(String, String)>,
    /// `--workspace DIR`: the base directory for the run's workspace.
    pub base_dir: Option<PathBuf>,
    /// `--max-parallel`.
    pub max_parallel: usize,
    /// The project: where the store, workspaces and worktrees are, and
    /// what relative workflow paths start from.
    pub project_dir: PathBuf,
    /// `--budget`, in dollars; the workflow's `budget_usd` when unset.
    pub budget_usd: Option<f64>,
}

/// A workflow file and the digest it had when the run started.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SourceDigest {
    /// The path as read.
    pub path: String,
    /// Hex SHA-256 of the bytes.
    pub sha256: String,
}

/// A created run.
#[derive(Debug, Clone)]
pub struct Created {
    /// Its id.
    pub run_id: String,
    /// Its workspace.
    pub workspace: PathBuf,
    /// Its plan.
    pub plan: Plan,
    /// The workflow file as given.
    pub workflow_path: String,
    /// The options recorded with it.
    pub options: RunOptions,
    /// Its first lease, taken along with the run by [`create_run`] for the
    /// built-in driver, which drives it next; `None` for an external driver.
    pub lease: Option<Lease>,
}

/// The digests of every file a loaded workflow was read from.
pub fn digests(loaded: &Loaded) -> Vec<SourceDigest> {
    loaded
        .files
        .iter()
        .map(|file| SourceDigest {
            path: file.path.clone(),
            sha256: sha256_hex(file.text.as_bytes()),
        })
        .collect()
}

/// Loads and compiles a workflow relative to `project_dir`.
///
/// # Errors
///
/// [`Error::Invalid`] with the diagnostics.
pub fn compile(
    project_dir: &Path,
    workflow_path: &str,
    options: &baton_workflow::compile::Options,
) -> Result<(Loaded, Plan)> {
    let loader = FsLoader::new(project_dir);
    let loaded = baton_workflow::load(workflow_path, &loader).map_err(Error::Invalid)?;
    let plan = baton_workflow::compile(&loaded, options, &loader).map_err(Error::Invalid)?;
    Ok((loaded, plan))
}

/// Compiles the workflow of a recorded run again, for a driver that did not
/// create it, and refuses (unless `accept_changes`) when a file it was read
/// from changed since the run started.
///
/// The parameters are the run's resolved ones, `work_dir` included, so the
/// plan is the one [`create_run`] compiled.
///
/// # Errors
///
/// [`Error::Invalid`] with the diagnostics, or [`Error::WorkflowChanged`]
/// naming the files that changed.
pub(crate) fn recompile(
    run: &baton_store::RunRow,
    run_options: &RunOptions,
    params: &indexmap::IndexMap<String, String>,
    accept_changes: bool,
) -> Result<Plan> {
    let options = baton_workflow::compile::Options {
        work_dir: None,
        params: params
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        // Accepted when the run was created.
        reject_unknown_params: false,
    };
    let (loaded, plan) = compile(&run_options.project_dir, &run.workflow_path, &options)?;
    let recorded: Vec<SourceDigest> = serde_json::from_str(&run.sources).unwrap_or_default();
    let current = digests(&loaded);
    if recorded != current && !accept_changes {
        let mut changed: Vec<String> = current
            .iter()
            .filter(|digest| !recorded.contains(digest))
            .map(|digest| digest.path.clone())
            .collect();
        changed.extend(
            recorded
                .iter()
                .filter(|digest| !current.iter().any(|now| now.path == digest.path))
                .map(|digest| digest.path.clone()),
        );
        return Err(Error::WorkflowChanged {
            run_id: run.run_id.clone(),
            changed,
        });
    }
    Ok(plan)
}

/// Compiles the workflow, records the run and creates its workspace.
///
/// With [`DriverMode::Builtin`] the run is recorded with its first lease,
/// held by this process, which is meant to drive it next
/// ([`drive_created`](crate::drive_created)); a process that dies first
/// leaves it to a resume, which takes the lease of a dead holder at once.
/// With [`DriverMode::External`] an external orchestrator drives it through
/// `next` / `complete` / `fail`.
///
/// # Errors
///
/// An invalid workflow, a store error, or a workspace that cannot be created.
pub async fn create_run(
    store: &Store,
    request: &RunRequest,
    driver: DriverMode,
) -> Result<Created> {
    record_run(store, prepare_run(request, driver)?).await
}

/// A run compiled and given its id, not yet recorded: the part of
/// [`create_run`] that needs no store, which a caller may do while the store
/// opens ([`prepare_run`], then [`record_run`]).
#[derive(Debug)]
pub struct Prepared {
    workspace: PathBuf,
    plan: Plan,
    yaml_path: PathBuf,
    run_options: RunOptions,
    new_run: NewRun,
    /// `plan.json`'s text.
    pretty: String,
    /// What loading and compiling warned of.
    warnings: Vec<baton_workflow::Diagnostic>,
}

impl Prepared {
    /// The compiled plan the run will follow.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// What loading and compiling the workflow warned of (unknown keys,
    /// parameters without a value): the run goes ahead regardless.
    pub fn warnings(&self) -> &[baton_workflow::Diagnostic] {
        &self.warnings
    }
}

/// Compiles the workflow of `request` and builds what recording it takes.
///
/// # Errors
///
/// [`Error::Invalid`] with the diagnostics of an invalid workflow.
pub fn prepare_run(request: &RunRequest, driver: DriverMode) -> Result<Prepared> {
    let options = baton_workflow::compile::Options {
        work_dir: Some(
            request
                .project_dir
                .join("out")
                .to_string_lossy()
                .into_owned(),
        ),
        params: request.params.clone(),
        // A request's parameters come from the command line: a typo is
        // refused before anything is recorded.
        reject_unknown_params: true,
    };
    let (loaded, plan) = compile(&request.project_dir, &request.workflow_path, &options)?;
    // The parsed sources are only needed for their digests: freed before the
    // plan's JSON is built, which keeps the peak of a 10 000-stage run low.
    let sources = serde_json::to_string(&digests(&loaded)).expect("plain data");
    let warnings = [loaded.warnings.as_slice(), plan.warnings.as_slice()].concat();
    drop(loaded);
    let now = clock::now_ms();
    let run_id = workspace::run_id(&plan.name, now, clock::entropy());
    let base = match &request.base_dir {
        Some(base) => request.project_dir.join(base),
        None => default_base(&plan, &request.project_dir),
    };
    let workspace = base.join(&run_id);
    let PlanText { compact, pretty } = PlanText::new(&plan, &run_id);
    let new_run = NewRun {
        run_id,
        workflow: plan.name.clone(),
        workflow_path: request.workflow_path.clone(),
        workspace: workspace.to_string_lossy().into_owned(),
        created_at: now,
        plan: compact,
        params: serde_json::to_string(&plan.params).expect("plain data"),
        sources,
        // Filled in by `record_run`, which may ask git for the base commit.
        options: String::new(),
        stages: plan
            .stages
            .iter()
            .map(|stage| stage.name().to_owned())
            .collect(),
    };
    Ok(Prepared {
        workspace,
        yaml_path: request.project_dir.join(&request.workflow_path),
        run_options: RunOptions {
            project_dir: request.project_dir.clone(),
            max_parallel: request.max_parallel.max(1),
            driver,
            // `--budget` wins over the workflow's `budget_usd`.
            budget_usd: request.budget_usd.or(plan.budget_usd),
        },
        plan,
        new_run,
        pretty,
        warnings,
    })
}

/// Records a [`Prepared`] run (with its first lease for the built-in
/// driver) and creates its workspace.
///
/// # Errors
///
/// A store error, or a workspace that cannot be created.
pub async fn record_run(store: &Store, prepared: Prepared) -> Result<Created> {
    let Prepared {
        workspace,
        plan,
        yaml_path,
        run_options,
        mut new_run,
        pretty,
        warnings: _,
    } = prepared;
    new_run.options = crate::worktree::record_base(&run_options, &run_options.project_dir, &plan)
        .await
        .to_string();
    let lease = match run_options.driver {
        DriverMode::Builtin => Some(
            store
                .create_leased_run(&new_run, &crate::owner::me(), LEASE_TTL_MS)
                .await?,
        ),
        DriverMode::External => {
            store.create_run(&new_run).await?;
            None
        }
    };
    // The run's id and path are kept; its plan's JSON and the rest go.
    let NewRun {
        run_id,
        workflow_path,
        created_at,
        ..
    } = new_run;
    ensure_workspace(
        &workspace,
        &run_id,
        &plan,
        &yaml_path,
        created_at,
        Some(&pretty),
    )?;
    Ok(Created {
        run_id,
        workspace,
        plan,
        workflow_path,
        options: run_options,
        lease,
    })
}

/// The plan's JSON, built once for both places it goes: compact in the
/// store, indented in `plan.json`, from one typed view of the plan
/// ([`PlanJson`]).
pub(crate) struct PlanText {
    /// For the store.
    pub(crate) compact: String,
    /// For `plan.json`.
    pub(crate) pretty: String,
}

impl PlanText {
    pub(crate) fn new(plan: &Plan, run_id: &str) -> PlanText {
        PlanText {
            compact: serde_json::to_string(&plan_view(plan, run_id)).expect("plain data"),
            pretty: workspace::pretty_json(&plan_view(plan, run_id)),
        }
    }
}

/// Creates the workspace layout with its `manifest.json` and `plan.json`
/// (`plan_file`, when the caller has built its text), if they are not there
/// yet. Run creation and every resume call it: a driver killed between
/// recording the run and writing the workspace leaves the run recorded and
/// the workspace missing.
pub(crate) fn ensure_workspace(
    workspace: &Path,
    run_id: &str,
    plan: &Plan,
    yaml_path: &Path,
    created_at: i64,
    plan_file: Option<&str>,
) -> Result<()> {
    let io = |error| Error::Workspace {
        path: workspace.to_path_buf(),
        source: error,
    };
    workspace::create(workspace).map_err(io)?;
    let manifest_path = workspace.join("manifest.json");
    let plan_path = workspace.join("plan.json");
    if intact(&manifest_path) && intact(&plan_path) {
        return Ok(());
    }
    let manifest = json!({
        "yaml_path": yaml_path,
        "workspace_dir": workspace,
        "run_id": run_id,
        "compiled_at": workspace::utc(created_at),
        "trigger_params": plan.params,
        "manifest_version": 1,
        "workflow_name": plan.name,
        "total_stages": plan.stages.len(),
        "parallel_groups": plan.groups.iter().map(|group| group.stages.iter().map(|&index| plan.stages[index].name()).collect::<Vec<_>>()).collect::<Vec<_>>(),
    });
    // Both mirror what the store holds, so they are not forced to disk (an
    // fsync each is a visible share of a short run): a crash of the machine
    // may leave one empty or torn, and the resume that follows writes it
    // again (`intact`).
    // The parameters in both keep no secret (they are in the store).
    let redactor = baton_executor::redact::Redactor::global();
    let manifest = workspace::pretty_json(&manifest);
    workspace::write_replace(&manifest_path, redactor.redact(&manifest).as_bytes()).map_err(io)?;
    let plan_text = match plan_file {
        Some(text) => std::borrow::Cow::Borrowed(text),
        None => std::borrow::Cow::Owned(workspace::pretty_json(&plan_view(plan, run_id))),
    };
    workspace::write_replace(&plan_path, redactor.redact(&plan_text).as_bytes()).map_err(io)
}

/// Whether `path` holds a whole JSON document.
fn intact(path: &Path) -> bool {
    std::fs::read(path)
        .is_ok_and(|bytes| serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok())
}

/// The parent of the rendered `workspace_dir` (the reference's rule), else
/// `.baton/runs` in the project.
fn default_base(plan: &Plan, project_dir: &Path) -> PathBuf {
    if let Some(template) = &plan.workspace_dir {
        let rendered = baton_workflow::template::render(template, |name| {
            plan.params.get(name).map(String::as_str)
        });
        if let Some(parent) = Path::new(rendered.as_ref())
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            return project_dir.join(parent);
        }
    }
    project_dir.join(".baton").join("runs")
}

/// `plan.json` in the reference's shape, serialized straight from the
/// plan: the same text a `serde_json::Value` built key by key gives (keys
/// in this order), with no tree of 10 000 maps to allocate and free for a
/// large run.
#[derive(Serialize)]
struct PlanJson<'a> {
    workflow_name: &'a str,
    run_id: &'a str,
    total_stages: usize,
    parallel_groups: Vec<GroupJson<'a>>,
    stage_details: StageDetails<'a>,
}

#[derive(Serialize)]
struct GroupJson<'a> {
    group: usize,
    stages: Vec<&'a str>,
    parallelism: usize,
}

/// The stages by name, in plan order.
struct StageDetails<'a>(&'a Plan);

impl Serialize for StageDetails<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.stages.len()))?;
        for stage in &self.0.stages {
            let spec = &stage.spec;
            map.serialize_entry(
                stage.name(),
                &StageJson {
                    kind: spec.kind.as_str(),
                    agent_role: &spec.agent.role,
                    human_gate: spec.human_gate,
                    required: spec.required,
                    depends_on: Values(&spec.depends_on),
                    reads_from: Values(&spec.reads_from),
                    writes_to: Values(&spec.writes_to),
                },
            )?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct StageJson<'a> {
    kind: &'a str,
    agent_role: &'a str,
    human_gate: bool,
    required: bool,
    depends_on: Values<'a>,
    reads_from: Values<'a>,
    writes_to: Values<'a>,
}

/// A list of spanned strings, as plain strings.
struct Values<'a>(&'a [baton_workflow::schema::Spanned<String>]);

impl Serialize for Values<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|item| item.value.as_str()))
    }
}

fn plan_view<'a>(plan: &'a Plan, run_id: &'a str) -> PlanJson<'a> {
    PlanJson {
        workflow_name: &plan.name,
        run_id,
        total_stages: plan.stages.len(),
        parallel_groups: plan
            .groups
            .iter()
            .enumerate()
            .map(|(number, group)| GroupJson {
                group: number,
                stages: group
                    .stages
                    .iter()
                    .map(|&index| plan.stages[index].name())
                    .collect(),
                parallelism: group.stages.len(),
            })
            .collect(),
        stage_details: StageDetails(plan),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_workflow::MemoryLoader;

    /// `plan.json` as it was first written, a `serde_json::Value` built key
    /// by key; the typed view must give the same text.
    fn plan_value(plan: &Plan, run_id: &str) -> serde_json::Value {
        let details: serde_json::Map<String, serde_json::Value> = plan
            .stages
            .iter()
            .map(|stage| {
                let spec = &stage.spec;
                let strings = |list: &[baton_workflow::schema::Spanned<String>]| {
                    list.iter()
                        .map(|item| item.value.clone())
                        .collect::<Vec<_>>()
                };
                (
                    stage.name().to_owned(),
                    json!({
                        "kind": spec.kind.as_str(),
                        "agent_role": spec.agent.role,
                        "human_gate": spec.human_gate,
                        "required": spec.required,
                        "depends_on": strings(&spec.depends_on),
                        "reads_from": strings(&spec.reads_from),
                        "writes_to": strings(&spec.writes_to),
                    }),
                )
            })
            .collect();
        json!({
            "workflow_name": plan.name,
            "run_id": run_id,
            "total_stages": plan.stages.len(),
            "parallel_groups": plan.groups.iter().enumerate().map(|(number, group)| json!({
                "group": number,
                "stages": group.stages.iter().map(|&index| plan.stages[index].name()).collect::<Vec<_>>(),
                "parallelism": group.stages.len(),
            })).collect::<Vec<_>>(),
            "stage_details": details,
        })
    }

    #[test]
    fn the_plan_text_is_the_reference_shape_key_for_key() {
        let yaml = "name: \"t \\\"quoted\\\"\"\nversion: '1'\ndescription: d\n\
                    trigger: {source: manual}\nstages:\n  \
                    - {name: a, kind: execute, description: d, executor: inline, script: 'true', writes_to: [a.json, 'b/c.md']}\n  \
                    - {name: b, kind: execute, description: d, executor: inline, script: 'true'}\n  \
                    - {name: review, kind: validate, description: d, agent: {role: reviewer}, depends_on: [a, b], reads_from: [a], required: false}\n  \
                    - {name: gate, kind: execute, description: d, executor: inline, script: 'true', human_gate: true, depends_on: [review]}\n";
        let loader = MemoryLoader::new().with("w.yaml", yaml);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        let plan =
            baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles");
        let text = PlanText::new(&plan, "t-20260101-abcdef");
        let value = plan_value(&plan, "t-20260101-abcdef");
        assert_eq!(text.compact, value.to_string());
        assert_eq!(text.pretty, workspace::pretty_json(&value));
        assert!(
            text.compact.contains(r#""reads_from":["a"]"#),
            "{}",
            text.compact
        );
    }
}
