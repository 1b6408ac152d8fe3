//! The command an attempt runs: a stage's script, or its agent's CLI with
//! the prompt baton renders, or a request to an OpenAI-compatible endpoint.

use std::sync::Arc;

use baton_executor::endpoint::ChatRequest;
use baton_executor::profile::{AgentRequest, Kind};
use baton_executor::{ProcessSpec, Stdin};
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Executor;

use crate::attempt::{Attempt, environment, idempotency_key, substitute_script};
use crate::session::Resume;
use crate::usage::Meter;
use crate::workspace;
use crate::worktree::Worktree;

/// How an attempt runs.
pub(super) enum Launch {
    /// A process.
    Process(Process),
    /// A request to an OpenAI-compatible endpoint.
    Endpoint { request: ChatRequest, meter: Meter },
}

/// A process to run for an attempt, and how to read its usage afterwards
/// (agents only).
pub(super) struct Process {
    pub(super) spec: Box<ProcessSpec>,
    pub(super) success_codes: Vec<i32>,
    pub(super) meter: Option<Meter>,
    /// Repository files the agent CLI keeps for itself (see
    /// `AccessRule::own_files`).
    pub(super) own_files: Vec<String>,
    /// The profile's slots, when it limits how many run at once.
    pub(super) slot: Option<(String, Arc<tokio::sync::Semaphore>)>,
}

/// The process to run for the stage (with the exit codes that mean
/// success), or the endpoint to ask.
pub(super) fn command(
    stage: &PlanStage,
    attempt: &Attempt,
    worktree: Option<&Worktree>,
    resume: Option<&Resume>,
) -> Result<Launch, String> {
    let spec = &stage.spec;
    if spec.fan_out.is_some() {
        return Err("fan_out stages are not run by this version of baton's engine".to_owned());
    }
    if spec.executor == Executor::WorkerQueue {
        return Err(
            "executor: worker_queue stages are not run by this version of baton's engine"
                .to_owned(),
        );
    }
    let logs = attempt.workspace.join("logs").join(stage.file_stem());
    let base = ProcessSpec {
        program: String::new(),
        args: Vec::new(),
        cwd: attempt.workspace.clone(),
        env: environment(stage, attempt),
        env_passthrough: Vec::new(),
        clear_env: false,
        stdin: Stdin::Null,
        stdout_log: logs.join(format!("{}.stdout", attempt.attempt)),
        stderr_log: logs.join(format!("{}.stderr", attempt.attempt)),
        log_cap_bytes: attempt.limits.log_cap,
        kill_after_bytes: attempt.limits.kill_after_bytes,
        wall_timeout: Some(attempt.limits.wall),
        idle_timeout: attempt.limits.idle,
        kill_grace: attempt.limits.kill_grace,
        // The marker must name this attempt alone: the executor kills every
        // process carrying it once the stage's leader exits, and stages of
        // one run run side by side. `BATON_RUN_ID` (in `environment`) is what
        // a resume uses to find everything a crashed driver left.
        marker: Some(("BATON_IDEMPOTENCY_KEY".to_owned(), idempotency_key(attempt))),
        contain: None,
    };
    match spec
        .script
        .as_ref()
        .filter(|_| spec.executor == Executor::Inline)
    {
        Some(script) => Ok(Launch::Process(Process {
            spec: Box::new(shell_command(base, &script.value, attempt)?),
            success_codes: vec![0],
            meter: None,
            own_files: Vec::new(),
            slot: None,
        })),
        None => agent_command(base, stage, attempt, worktree, resume),
    }
}

fn shell_command(
    mut base: ProcessSpec,
    script: &str,
    attempt: &Attempt,
) -> Result<ProcessSpec, String> {
    let substituted = substitute_script(script, attempt)?;
    let (program, args) = baton_executor::shell::command_for_script(&substituted.script);
    base.program = program;
    base.args = args;
    base.env.extend(substituted.env);
    Ok(base)
}

/// An agent stage (or an inline stage without a script): the role's profile
/// from `baton.toml` runs with a prompt baton renders and first writes to
/// `dispatch/NNN-name.json`; continuing `resume`'s session, its prompt.
fn agent_command(
    mut base: ProcessSpec,
    stage: &PlanStage,
    attempt: &Attempt,
    worktree: Option<&Worktree>,
    resume: Option<&Resume>,
) -> Result<Launch, String> {
    let spec = &stage.spec;
    let role = spec.agent_role();
    let no_profile = || {
        format!(
            "no agent profile for role '{role}': add [agents.{role}] or [agents.default] with a profile to baton.toml (`baton agents check` lists the profiles that work here)"
        )
    };
    let config = attempt.agents.as_ref().ok_or_else(no_profile)?;
    let agent = config.agent(role).map_err(|_| no_profile())?;
    let prompt = match resume {
        Some(resume) => resume.prompt.clone(),
        None => crate::worktree::handed_prompt(
            &attempt.plan,
            stage,
            &attempt.workspace,
            worktree,
            attempt.push_back.as_ref(),
        ),
    };
    crate::prompt::write_dispatch(&attempt.plan, stage, &attempt.workspace, &prompt)
        .map_err(|(path, error)| format!("cannot write {}: {error}", path.display()))?;
    let prompt_file = workspace::dispatch_file(&attempt.workspace, stage, "prompt.md");
    let model = spec
        .agent
        .model
        .clone()
        .or_else(|| agent.model.map(str::to_owned))
        .or_else(|| agent.profile.model.clone());
    let meter = Meter {
        profile: agent.profile.clone(),
        model: model.clone(),
        agents: Arc::clone(config),
    };
    if agent.profile.kind == Kind::OpenaiChat {
        let request = ChatRequest {
            base_url: agent.profile.base_url.clone().unwrap_or_default(),
            model,
            api_key_env: agent.profile.api_key_env.clone(),
            prompt,
            workspace: attempt.workspace.clone(),
            allowed: workspace::declared_outputs(stage),
            response_log: base.stdout_log,
            wall_timeout: agent.profile.limits.wall.unwrap_or(attempt.limits.wall),
        };
        return Ok(Launch::Endpoint { request, meter });
    }
    let request = AgentRequest {
        prompt,
        prompt_file: Some(prompt_file),
        model,
        tools: spec.agent.tools.clone(),
        permission_mode: None,
        cwd: attempt.project_dir.clone(),
        options: std::collections::BTreeMap::new(),
        access: Some(access_request(stage, attempt, worktree)),
        resume: resume.map(|resume| resume.session.clone()),
    };
    let command = baton_executor::profile::command_line(agent.profile, &request)
        .map_err(|error| format!("agent profile '{}': {error}", agent.profile_name))?;
    for (path, content) in &command.files {
        workspace::write_atomic(path, content.as_bytes())
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    base.cwd = command.cwd;
    base.program = command.program;
    base.args = command.args;
    base.stdin = command.stdin.map_or(Stdin::Null, Stdin::Bytes);
    base.clear_env = true;
    base.env_passthrough = agent
        .profile
        .env_passthrough
        .iter()
        .chain(&agent.profile.env_passthrough_extra)
        .cloned()
        .collect();
    base.env.extend(
        agent
            .profile
            .env
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .chain(command.env),
    );
    let limits = &agent.profile.limits;
    if let Some(wall) = limits.wall {
        base.wall_timeout = Some(wall);
    }
    if limits.idle.is_some() {
        base.idle_timeout = limits.idle;
    }
    if let Some(grace) = limits.kill_grace {
        base.kill_grace = grace;
    }
    Ok(Launch::Process(Process {
        success_codes: agent.profile.success.exit_codes.clone(),
        spec: Box::new(base),
        meter: Some(meter),
        own_files: command.own_files,
        slot: attempt
            .slots
            .of(agent.profile_name)
            .map(|slots| (agent.profile_name.to_owned(), Arc::clone(slots))),
    }))
}

/// Where an agent works and what it may change: in the project directory
/// (or its worktree), with the run's workspace writable whatever the
/// access, and the repository writable only for read-write stages.
fn access_request(
    stage: &PlanStage,
    attempt: &Attempt,
    worktree: Option<&Worktree>,
) -> baton_executor::profile::AccessRequest {
    use baton_executor::profile::AccessMode;
    let read_only = stage.spec.agent.access == baton_workflow::schema::Access::ReadOnly;
    let (mode, project, workspace) = match worktree {
        Some(tree) if read_only => (AccessMode::ReadOnly, tree.path.clone(), tree.view()),
        Some(tree) => (AccessMode::Worktree, tree.path.clone(), tree.view()),
        None if read_only => (
            AccessMode::ReadOnly,
            attempt.project_dir.clone(),
            attempt.workspace.clone(),
        ),
        None => (
            AccessMode::ReadWrite,
            attempt.project_dir.clone(),
            attempt.workspace.clone(),
        ),
    };
    baton_executor::profile::AccessRequest {
        mode,
        project,
        workspace,
        files_dir: workspace::dispatch_file(&attempt.workspace, stage, "access"),
    }
}
