//! `baton agents check --probe`: one short request per agent profile, run
//! the way a read-only stage runs its agent, to learn whether it answers
//! here, how fast, and at what cost, or why not in the CLI's own words.
//!
//! A CLI profile is launched as a read-only stage launches it (the same
//! argv, environment rules and access rule), asked to "Reply with the
//! single word OK.", within a time limit. Where the machine can contain a
//! process ([`crate::read_only`] does the same for stages), it runs in the
//! project, contained, with its scratch under `.baton/probe/` (removed
//! afterwards); elsewhere the caller hands an empty directory as the
//! project, so nothing it does can reach the repository. An `openai-chat`
//! profile gets one chat request. The probes run at the same time.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_executor::profile::{AccessMode, AccessRequest, AgentRequest, Config, Kind, Usage};
use baton_executor::{KillReason, Outcome, ProcessSpec, Stdin};
use tokio::sync::watch;

use crate::usage::Meter;

/// What each probe asks.
pub const PROMPT: &str = "Reply with the single word OK.";

/// The most of a probe's output kept in its logs.
const LOG_CAP: u64 = 4 * 1024 * 1024;

/// The longest SIGTERM-to-SIGKILL grace a probe gets: a probe is not work
/// worth waiting for.
const KILL_GRACE: Duration = Duration::from_secs(3);

/// One profile to probe, with the model a role asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The profile.
    pub profile: String,
    /// The model, when a role names one.
    pub model: Option<String>,
}

/// Where and how long the probes run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The project the CLIs start in: the real one when `contain_helper` is
    /// set, else an empty directory.
    pub project_dir: PathBuf,
    /// An empty directory for the probes' workspaces, logs and files
    /// (under the project's `.baton/` when contained, which the containment
    /// requires); the caller removes it.
    pub scratch: PathBuf,
    /// The helper that contains the CLIs (the `baton` binary), where the
    /// machine can.
    pub contain_helper: Option<PathBuf>,
    /// The time limit of each probe.
    pub timeout: Duration,
    /// The profiles and prices.
    pub agents: Arc<Config>,
}

/// How one probe went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The CLI (or endpoint) answered and exited successfully.
    pub ok: bool,
    /// From the start to the end of the probe.
    pub latency: Duration,
    /// Tokens and cost, when its output reports them.
    pub usage: Option<Usage>,
    /// Why it failed: the agent's own words first, when its output has them.
    pub error: Option<String>,
}

/// Runs every probe at once; the answers come in the order of `probes`.
pub async fn run(probes: &[Probe], options: &Options) -> Vec<Answer> {
    let tasks: Vec<_> = probes
        .iter()
        .enumerate()
        .map(|(index, probe)| {
            let probe = probe.clone();
            let options = options.clone();
            tokio::spawn(async move { one(&probe, index, &options).await })
        })
        .collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(
            task.await
                .unwrap_or_else(|error| failed(format!("the probe failed: {error}"))),
        );
    }
    answers
}

async fn one(probe: &Probe, index: usize, options: &Options) -> Answer {
    let started = Instant::now();
    let Some(profile) = options.agents.profiles.get(&probe.profile) else {
        return Answer {
            error: Some(format!("there is no profile `{}`", probe.profile)),
            ..Answer::default()
        };
    };
    let meter = Meter {
        profile: profile.clone(),
        model: probe.model.clone().or_else(|| profile.model.clone()),
        agents: Arc::clone(&options.agents),
    };
    let dir = options.scratch.join(index.to_string());
    let mut answer = match profile.kind {
        Kind::OpenaiChat => endpoint(&meter, &dir, options.timeout).await,
        Kind::Cli => cli(&meter, &dir, options).await,
    };
    answer.latency = started.elapsed();
    answer
}

/// One chat request to an `openai-chat` profile's server.
async fn endpoint(meter: &Meter, dir: &Path, timeout: Duration) -> Answer {
    let profile = &meter.profile;
    let Some(base_url) = &profile.base_url else {
        return failed("the profile has no base_url".to_owned());
    };
    let result = baton_executor::endpoint::probe(
        base_url,
        meter.model.as_deref(),
        profile.api_key_env.as_deref(),
        PROMPT,
        timeout,
    )
    .await;
    match result {
        Ok(body) => {
            // The profile's `[output]` rules read a log, as for a stage.
            let log = dir.join("response.json");
            let usage = std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(&log, body))
                .ok()
                .and_then(|()| meter.read(&log));
            Answer {
                ok: true,
                usage,
                ..Answer::default()
            }
        }
        Err(error) => failed(error.to_string()),
    }
}

fn failed(error: String) -> Answer {
    Answer {
        error: Some(error),
        ..Answer::default()
    }
}

/// The CLI, launched as a read-only stage launches it.
async fn cli(meter: &Meter, dir: &Path, options: &Options) -> Answer {
    let spec = match launch(meter, dir, options).await {
        Ok(spec) => spec,
        Err(error) => return failed(error),
    };
    let stdout_log = spec.stdout_log.clone();
    // Nothing cancels a probe but its time limit.
    let (_keep, cancel) = watch::channel(false);
    let outcome = match baton_executor::run(spec, cancel, |_| {}).await {
        Ok(outcome) => outcome,
        Err(error) => return failed(format!("cannot start the CLI: {error}")),
    };
    // Tokens are spent whether or not it answered well.
    let usage = meter.read(&stdout_log);
    let success = outcome.killed.is_none()
        && outcome
            .exit_code
            .is_some_and(|code| meter.profile.success.exit_codes.contains(&code));
    if success {
        return Answer {
            ok: true,
            usage,
            ..Answer::default()
        };
    }
    Answer {
        usage,
        error: Some(explain(&outcome, meter, &stdout_log, options.timeout)),
        ..Answer::default()
    }
}

/// Why a probe's CLI did not answer: what it reported (by the profile's
/// `[output]` error rules, as a stage's error says), then how it ended.
fn explain(outcome: &Outcome, meter: &Meter, stdout_log: &Path, timeout: Duration) -> String {
    // Some CLIs (Gemini CLI) print the error object on stderr instead.
    let reported = meter
        .reported_error(stdout_log)
        .or_else(|| meter.reported_error(&stdout_log.with_extension("stderr")));
    let tail = last_words(&outcome.stderr_tail);
    match (outcome.killed, reported) {
        (Some(KillReason::WallTimeout), Some(reported)) => format!(
            "no answer within {}; the agent last reported: {reported}",
            seconds(timeout)
        ),
        (Some(KillReason::WallTimeout), None) if !tail.is_empty() => format!(
            "no answer within {}; its stderr ended with: {tail}",
            seconds(timeout)
        ),
        (Some(KillReason::WallTimeout), None) => format!(
            "no answer within {} (the CLI reported nothing: is its model server reachable from here?)",
            seconds(timeout)
        ),
        (Some(reason), _) => format!("the CLI was stopped: {reason}"),
        (None, reported) => {
            let ended = match (outcome.exit_code, outcome.signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => "ended without an exit status".to_owned(),
            };
            match reported {
                Some(reported) => format!("the agent reported: {reported} ({ended})"),
                None if tail.is_empty() => ended,
                None => format!("{ended}: {tail}"),
            }
        }
    }
}

/// The last two lines of stderr that are not a stack trace's frames.
fn last_words(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("at "))
        .collect();
    lines[lines.len().saturating_sub(2)..].join(" | ")
}

fn seconds(duration: Duration) -> String {
    format!("{:.0}s", duration.as_secs_f64())
}

/// The probe's process: the profile's argv for a read-only stage, its
/// environment rules, the time limit, and containment where available.
async fn launch(meter: &Meter, dir: &Path, options: &Options) -> Result<ProcessSpec, String> {
    let profile = &meter.profile;
    let workspace = dir.join("workspace");
    let files_dir = dir.join("access");
    let prompt_file = dir.join("prompt.md");
    for directory in [&workspace, &files_dir] {
        std::fs::create_dir_all(directory)
            .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    }
    std::fs::write(&prompt_file, PROMPT)
        .map_err(|error| format!("cannot write {}: {error}", prompt_file.display()))?;
    let request = AgentRequest {
        prompt: PROMPT.to_owned(),
        prompt_file: Some(prompt_file),
        model: meter.model.clone(),
        cwd: options.project_dir.clone(),
        access: Some(AccessRequest {
            mode: AccessMode::ReadOnly,
            project: options.project_dir.clone(),
            workspace: workspace.clone(),
            files_dir,
        }),
        ..AgentRequest::default()
    };
    let command = baton_executor::profile::command_line(profile, &request)
        .map_err(|error| error.to_string())?;
    for (path, content) in &command.files {
        std::fs::write(path, content)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    let mut env: Vec<(String, String)> = profile
        .env
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .chain(command.env)
        .collect();
    // As in a read-only stage: `git status` must not refresh the index.
    env.push(("GIT_OPTIONAL_LOCKS".to_owned(), "0".to_owned()));
    let contain = match &options.contain_helper {
        None => None,
        Some(helper) => Some(contained(helper, &options.project_dir, &workspace).await),
    };
    Ok(ProcessSpec {
        program: command.program,
        args: command.args,
        cwd: command.cwd,
        env,
        env_passthrough: profile
            .env_passthrough
            .iter()
            .chain(&profile.env_passthrough_extra)
            .cloned()
            .collect(),
        clear_env: true,
        stdin: command.stdin.map_or(Stdin::Null, Stdin::Bytes),
        stdout_log: dir.join("logs/probe.stdout"),
        stderr_log: dir.join("logs/probe.stderr"),
        log_cap_bytes: LOG_CAP,
        kill_after_bytes: Some(LOG_CAP * 4),
        wall_timeout: Some(options.timeout),
        idle_timeout: None,
        kill_grace: KILL_GRACE,
        // Finds what the CLI left behind outside its group.
        marker: Some((
            "BATON_PROBE".to_owned(),
            format!("{}/{}", std::process::id(), dir.display()),
        )),
        contain,
    })
}

/// The CLI's view of the repository: an overlay only this probe sees,
/// with its workspace mounted through.
async fn contained(helper: &Path, project: &Path, workspace: &Path) -> baton_executor::Contained {
    let root = baton_executor::git::top_level(project)
        .await
        .unwrap_or_else(|| project.to_path_buf());
    let place = workspace.join(".contain");
    let scratch = place.join("scratch");
    // Where it cannot be created, the helper fails saying so.
    let _ = std::fs::create_dir_all(&scratch);
    baton_executor::Contained {
        helper: helper.to_path_buf(),
        containment: baton_executor::contain::Containment {
            overlay: Some(baton_executor::contain::Overlay {
                root,
                scratch,
                report: place.join("changes.txt"),
            }),
            writable: vec![workspace.to_path_buf()],
            ..Default::default()
        },
    }
}
