//! `baton agents check --probe`: which profiles to probe, where they run,
//! and how their answers read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_engine::probe::{Answer, Options, Probe};
use baton_executor::profile::{CheckResult, Config, Kind};
use serde_json::{Value, json};

/// One probe with the roles it stands for, and its answer.
pub(crate) struct Probed {
    pub(crate) probe: Probe,
    pub(crate) roles: Vec<String>,
    pub(crate) answer: Answer,
    /// `None` when it ran; else why not (its CLI is not installed).
    pub(crate) not_run: Option<String>,
}

impl Probed {
    pub(crate) fn ok(&self) -> bool {
        self.not_run.is_none() && self.answer.ok
    }

    pub(crate) fn error(&self) -> Option<String> {
        match &self.not_run {
            Some(why) => Some(format!("not run: {why}")),
            None => self.answer.error.clone(),
        }
    }
}

/// The profiles to probe, once per model their roles ask for, with those
/// roles: the `named` profiles (each unmapped one once, without a model),
/// else every profile a role is mapped to.
pub(crate) fn targets(config: &Config, named: &[String]) -> Vec<(Probe, Vec<String>)> {
    let mut targets: Vec<(Probe, Vec<String>)> = Vec::new();
    for (role, choice) in &config.agents {
        let Some(profile) = &choice.profile else {
            continue;
        };
        if !named.is_empty() && !named.contains(profile) {
            continue;
        }
        let probe = Probe {
            profile: profile.clone(),
            model: choice.model.clone(),
        };
        match targets.iter_mut().find(|(seen, _)| *seen == probe) {
            Some((_, roles)) => roles.push(role.clone()),
            None => targets.push((probe, vec![role.clone()])),
        }
    }
    targets.sort_by(|(left, _), (right, _)| {
        (&left.profile, &left.model).cmp(&(&right.profile, &right.model))
    });
    for name in named {
        if !targets.iter().any(|(probe, _)| &probe.profile == name) {
            let probe = Probe {
                profile: name.clone(),
                model: None,
            };
            targets.push((probe, Vec::new()));
        }
    }
    targets
}

/// Runs the probes of `targets`, those whose program was found at once;
/// `checks` are the version checks by profile name.
pub(crate) fn run(
    config: &Config,
    targets: Vec<(Probe, Vec<String>)>,
    checks: &[(&String, CheckResult)],
    timeout: Duration,
) -> Result<(Vec<Probed>, bool), String> {
    let not_run = |probe: &Probe| -> Option<String> {
        let profile = config.profiles.get(&probe.profile)?;
        let (_, check) = checks.iter().find(|(name, _)| **name == probe.profile)?;
        // A slow `--version` is no reason to skip the probe; a missing
        // program is.
        (profile.kind == Kind::Cli && check.program_path.is_none()).then(|| {
            check
                .detail
                .clone()
                .unwrap_or_else(|| "not installed".to_owned())
        })
    };
    let (runnable, skipped): (Vec<_>, Vec<_>) = targets
        .into_iter()
        .map(|(probe, roles)| {
            let why = not_run(&probe);
            (probe, roles, why)
        })
        .partition(|(_, _, why)| why.is_none());
    let place = Place::new()?;
    let options = Options {
        project_dir: place.project.clone(),
        scratch: place.scratch.clone(),
        contain_helper: place.helper.clone(),
        timeout,
        agents: Arc::new(config.clone()),
    };
    let probes: Vec<Probe> = runnable.iter().map(|(probe, _, _)| probe.clone()).collect();
    let answers = super::runtime::block_on(baton_engine::probe::run(&probes, &options));
    let contained = place.helper.is_some();
    drop(place);
    let mut probed: Vec<Probed> = runnable
        .into_iter()
        .zip(answers)
        .map(|((probe, roles, _), answer)| Probed {
            probe,
            roles,
            answer,
            not_run: None,
        })
        .collect();
    probed.extend(skipped.into_iter().map(|(probe, roles, why)| Probed {
        probe,
        roles,
        answer: Answer::default(),
        not_run: why,
    }));
    Ok((probed, contained))
}

/// Where the probes run: in the project, contained, with their scratch
/// under `.baton/probe/` (the containment wants it inside the repository,
/// where a stage's workspace is too); or, where containment is not
/// available, in an empty temporary directory, so nothing can reach the
/// repository. What it created goes when it is dropped.
struct Place {
    project: PathBuf,
    scratch: PathBuf,
    helper: Option<PathBuf>,
    /// Directories to remove afterwards: the first with all it holds, the
    /// others (its parents) only when empty.
    created: Vec<PathBuf>,
}

impl Place {
    fn new() -> Result<Place, String> {
        let Ok(helper) = super::containment::contain_check() else {
            let temporary = std::env::temp_dir().join(format!(
                "baton-probe-{}-{}",
                std::process::id(),
                baton_engine::clock::now_ms()
            ));
            let project = temporary.join("project");
            let scratch = temporary.join("scratch");
            for directory in [&project, &scratch] {
                std::fs::create_dir_all(directory)
                    .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
            }
            return Ok(Place {
                project,
                scratch,
                helper: None,
                created: vec![temporary],
            });
        };
        let project = super::project_dir();
        let baton = project.join(".baton");
        let probes = baton.join("probe");
        let scratch = probes.join(std::process::id().to_string());
        let mut created = vec![scratch.clone(), probes.clone()];
        if !baton.exists() {
            created.push(baton);
        }
        std::fs::create_dir_all(&scratch)
            .map_err(|error| format!("cannot create {}: {error}", scratch.display()))?;
        Ok(Place {
            project,
            scratch,
            helper: Some(helper),
            created,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut directories = self.created.iter();
        if let Some(scratch) = directories.next() {
            let _ = std::fs::remove_dir_all(scratch);
        }
        for directory in directories {
            // Only when empty: another baton may be using it.
            let _ = std::fs::remove_dir(directory);
        }
    }
}

fn tokens_json(answer: &Answer) -> Value {
    answer.usage.as_ref().map_or(Value::Null, |usage| {
        json!({
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "cache_read": usage.cache_read_tokens,
            "cache_write": usage.cache_write_tokens,
        })
    })
}

/// A probe for `--format json`.
pub(crate) fn probe_json(probed: &Probed, contained: bool) -> Value {
    let ran = probed.not_run.is_none();
    json!({
        "model": probed.probe.model,
        "roles": probed.roles,
        "ok": probed.ok(),
        "latency_ms": ran.then(|| u64::try_from(probed.answer.latency.as_millis()).unwrap_or(u64::MAX)),
        "tokens": tokens_json(&probed.answer),
        "cost_usd": probed.answer.usage.as_ref().and_then(|usage| usage.cost_usd),
        "error": probed.error(),
        "contained": ran && contained,
    })
}

/// The probes as a table, with a line on where they ran.
pub(crate) fn table(probed: &[Probed], contained: bool, timeout: Duration) -> String {
    let header = [
        "profile", "model", "roles", "probe", "latency", "tokens", "detail",
    ];
    let table = crate::output::table_of(&header, probed, |one| {
        let answer = &one.answer;
        let tokens = answer.usage.as_ref().map_or_else(String::new, |usage| {
            format!(
                "{} in, {} out",
                usage.input_tokens.unwrap_or(0),
                usage.output_tokens.unwrap_or(0)
            )
        });
        vec![
            one.probe.profile.clone(),
            one.probe.model.clone().unwrap_or_default(),
            one.roles.join(", "),
            match (&one.not_run, answer.ok) {
                (Some(_), _) => "not run".to_owned(),
                (None, true) => "ok".to_owned(),
                (None, false) => "failed".to_owned(),
            },
            if one.not_run.is_none() {
                format!("{:.1}s", answer.latency.as_secs_f64())
            } else {
                String::new()
            },
            tokens,
            one.error().unwrap_or_default(),
        ]
    });
    let place = if contained {
        "in the project, contained"
    } else {
        "in an empty temporary directory (containment is not available here)"
    };
    format!(
        "\nprobe: \"{}\", within {:.0}s each, {place}\n{table}",
        baton_engine::probe::PROMPT,
        timeout.as_secs_f64(),
    )
}

/// The probes that failed, named for the error that ends the command.
pub(crate) fn failures(probed: &[Probed]) -> Vec<String> {
    probed
        .iter()
        .filter(|one| !one.ok())
        .map(|one| match &one.probe.model {
            Some(model) => format!("`{}` (model {model})", one.probe.profile),
            None => format!("`{}`", one.probe.profile),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_the_mapped_profiles_once_per_model_or_those_named() {
        let config = Config::from_toml(
            "[agents.default]\nprofile = \"claude\"\n[agents.reviewer]\nprofile = \"codex\"\n[agents.referee]\nprofile = \"claude\"\nmodel = \"opus\"\n[agents.writer]\nprofile = \"claude\"\n",
        )
        .unwrap();
        let shown: Vec<String> = targets(&config, &[])
            .iter()
            .map(|(probe, roles)| {
                format!(
                    "{} {} {}",
                    probe.profile,
                    probe.model.as_deref().unwrap_or("-"),
                    roles.join("+")
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                "claude - default+writer",
                "claude opus referee",
                "codex - reviewer"
            ]
        );
        let named = targets(&config, &["gemini".to_owned(), "codex".to_owned()]);
        assert_eq!(named.len(), 2);
        assert_eq!(named[0].0.profile, "codex");
        assert_eq!(named[0].1, ["reviewer"]);
        assert_eq!(named[1].0.profile, "gemini");
        assert!(named[1].1.is_empty());
    }
}
