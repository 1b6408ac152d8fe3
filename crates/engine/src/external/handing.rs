//! Handing a stage (or unit) out: its prompt, dispatch file and, for an
//! isolated stage, its worktree; and what `next` needs to find the work.

use super::*;
use crate::outputs::snapshot;

/// Renders the stage's prompt and writes its dispatch and prompt files.
pub(super) fn hand_out(
    plan: &Plan,
    stage: &PlanStage,
    workspace: &Path,
    worktree: Option<&Worktree>,
    push_back: Option<&baton_store::GateDecisionRow>,
) -> Result<Ready> {
    let prompt = crate::worktree::handed_prompt(plan, stage, workspace, worktree, push_back);
    crate::prompt::write_dispatch(plan, stage, workspace, &prompt)
        .map_err(|(path, source)| Error::Workspace { path, source })?;
    let dispatch_file = dispatch_path(workspace, stage);
    Ok(Ready {
        stage: stage.name().to_owned(),
        prompt,
        dispatch_file,
        worktree: worktree.map(|worktree| worktree.path.clone()),
    })
}

/// Where an isolated stage (or fan-out child) of this run lives, for
/// [`Worktree`].
pub(super) fn place<'a>(
    store: &'a Store,
    opened: &'a Opened,
    index: usize,
    env: &'a [(String, String)],
) -> Place<'a> {
    Place {
        store,
        run_id: &opened.run.run_id,
        project_dir: &opened.options.project_dir,
        workspace: &opened.workspace,
        plan: &opened.plan,
        index,
        item: env
            .iter()
            .find(|(name, _)| name == "BATON_ITEM_NAME")
            .map(|(_, value)| value.as_str()),
    }
}

/// The worktree of an isolated stage being handed out: the one an earlier
/// `next` made for this attempt (the orchestrator's agent may be at work
/// in it), else one made, or reset, with its `inputs/` filled.
pub(super) async fn worktree_for(
    store: &Store,
    opened: &Opened,
    index: usize,
    stage: &PlanStage,
    env: &[(String, String)],
) -> Result<Option<Worktree>> {
    if !crate::worktree::isolated(stage) {
        return Ok(None);
    }
    let place = place(store, opened, index, env);
    let fresh = fresh_path(&opened.workspace, stage);
    if !fresh.exists()
        && let Ok(found) = Worktree::find(stage, &place).await
    {
        return Ok(Some(found));
    }
    let created = Worktree::create(stage, &place)
        .await
        .map_err(|error| Error::Refused(format!("stage '{}': {error}", stage.name())))?;
    // Made for this attempt: later listings find it as it is.
    let _ = std::fs::remove_file(&fresh);
    Ok(Some(created))
}

/// What baton runs itself during `next` (an inline script, a queue
/// stage's job): a stage, or a unit of one.
pub(super) struct Script {
    pub(super) index: usize,
    pub(super) attempt: i64,
    pub(super) stage: PlanStage,
    pub(super) unit: Option<String>,
    pub(super) values: Vec<(String, String)>,
    pub(super) env: Vec<(String, String)>,
    pub(super) defer_checks: bool,
    /// A queue job the `next` that died while it ran left is waited for
    /// again rather than enqueued twice.
    pub(super) adopt_job: bool,
}

/// The units of a run, by stage, in ordinal order.
pub(super) async fn units_by_stage(
    store: &Store,
    run_id: &str,
) -> Result<HashMap<usize, Vec<UnitRow>>> {
    let mut by_stage: HashMap<usize, Vec<UnitRow>> = HashMap::new();
    for unit in store.units(run_id).await? {
        if let Ok(index) = usize::try_from(unit.index) {
            by_stage.entry(index).or_default().push(unit);
        }
    }
    for units in by_stage.values_mut() {
        units.sort_by_key(|unit| unit.ordinal);
    }
    Ok(by_stage)
}

/// What a start needs on disk, written before it is recorded: the
/// fingerprints of `stage`'s declared outputs, for `complete`, and for an
/// isolated stage a mark that its next hand-out is a new attempt's, whose
/// worktree is reset and whose `inputs/` are filled afresh.
pub(super) fn write_start(stage: &PlanStage, workspace: &Path) -> Result<()> {
    let io = |path: PathBuf| move |source| Error::Workspace { path, source };
    let before: Vec<(PathBuf, Fingerprint)> = snapshot(stage, workspace).into_iter().collect();
    let path = before_path(workspace, stage);
    workspace::write_json(&path, &serde_json::to_value(before).expect("plain data"))
        .map_err(io(path))?;
    if crate::worktree::isolated(stage) {
        let path = fresh_path(workspace, stage);
        workspace::write_atomic(&path, b"").map_err(io(path))?;
    }
    Ok(())
}

fn fresh_path(workspace: &Path, stage: &PlanStage) -> PathBuf {
    workspace::dispatch_file(workspace, stage, "fresh")
}
