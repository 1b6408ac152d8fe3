//! `baton agents check`.

use baton_executor::profile::{CheckResult, Profile};
use serde_json::json;

use super::agents_probe::{self, Probed};
use crate::args::agents::AgentsCheckArgs;
use crate::{exit_code, output, settings};

/// Checks every profile (built-in and from `baton.toml`), or those named;
/// with `--probe`, also asks them for a one-word answer. Exits non-zero
/// when a profile a role is mapped to (`[agents.*]`) cannot run here, or a
/// probe fails.
pub(crate) fn check(args: &AgentsCheckArgs) -> Result<u8, u8> {
    let config = super::or_usage(settings::agent_config(&super::project_dir()))?;
    if let Some(unknown) = args
        .profiles
        .iter()
        .find(|name| !config.profiles.contains_key(*name))
    {
        let known: Vec<&str> = config.profiles.keys().map(String::as_str).collect();
        output::stderr_line(&format!(
            "error: there is no profile `{unknown}`: the profiles are {} (a `[profiles.{unknown}]` table in baton.toml adds one)",
            known.join(", ")
        ));
        return Err(exit_code::USAGE);
    }
    let results = check_profiles(
        config
            .profiles
            .iter()
            .filter(|(name, _)| args.profiles.is_empty() || args.profiles.contains(name)),
    );
    let probed = if args.probe {
        let targets = agents_probe::targets(&config, &args.profiles);
        if targets.is_empty() {
            output::stderr_line(
                "error: nothing to probe: baton.toml maps no role to a profile; name the profiles to probe (`baton agents check --probe claude`) or add [agents.default]",
            );
            return Err(exit_code::USAGE);
        }
        let checks: Vec<_> = results
            .iter()
            .map(|(name, _, result)| (*name, result.clone()))
            .collect();
        Some(super::or_usage(agents_probe::run(
            &config,
            targets,
            &checks,
            args.timeout,
        ))?)
    } else {
        None
    };
    let roles_of = |name: &str| -> Vec<&str> {
        config
            .agents
            .iter()
            .filter(|(_, choice)| choice.profile.as_deref() == Some(name))
            .map(|(role, _)| role.as_str())
            .collect()
    };
    let value: Vec<_> = results
        .iter()
        .map(|(name, profile, result)| {
            let probes = probed.as_ref().map(|(probed, contained)| {
                probed
                    .iter()
                    .filter(|one| &one.probe.profile == *name)
                    .map(|one| agents_probe::probe_json(one, *contained))
                    .collect::<Vec<_>>()
            });
            json!({
                "profile": name,
                "program": profile.program,
                "available": result.available,
                "version": result.version,
                "missing_credentials": result.missing_credentials,
                "detail": result.detail,
                "roles": roles_of(name),
                "probe": probes,
            })
        })
        .collect();
    output::print(args.format.format(), &value, || {
        let header = [
            "profile",
            "program",
            "installed",
            "version",
            "roles",
            "note",
        ];
        let mut text = output::table_of(&header, &results, |(name, profile, result)| {
            vec![
                (*name).clone(),
                profile.program.clone().unwrap_or_default(),
                if result.available { "yes" } else { "no" }.to_owned(),
                result.version.clone().unwrap_or_default(),
                roles_of(name).join(", "),
                needs(result).unwrap_or_else(|| result.detail.clone().unwrap_or_default()),
            ]
        });
        text.push_str(&containment_line());
        if let Some((probed, contained)) = &probed {
            text.push_str(&agents_probe::table(probed, *contained, args.timeout));
        }
        text
    });
    Ok(refusal(
        &config,
        &results,
        probed.as_ref().map(|(probed, _)| probed.as_slice()),
    ))
}

/// Checks each profile (`baton_executor::profile::check`): one
/// `--version` each, side by side, so a slow CLI delays none of the others.
pub(crate) fn check_profiles<'a>(
    profiles: impl Iterator<Item = (&'a String, &'a Profile)>,
) -> Vec<(&'a String, &'a Profile, CheckResult)> {
    std::thread::scope(|scope| {
        let checks: Vec<_> = profiles
            .map(|(name, profile)| {
                let check = scope.spawn(|| baton_executor::profile::check(profile));
                (name, profile, check)
            })
            .collect();
        checks
            .into_iter()
            .map(|(name, profile, check)| {
                let result = check.join().unwrap_or_else(|_| CheckResult {
                    detail: Some("the check failed".to_owned()),
                    ..CheckResult::default()
                });
                (name, profile, result)
            })
            .collect()
    })
}

/// What a profile still needs before its CLI can answer: one of its
/// credential variables, when none is set. A CLI may be logged in through
/// its own files, so this is advice, not a refusal.
pub(crate) fn needs(result: &CheckResult) -> Option<String> {
    (!result.credential_set && !result.missing_credentials.is_empty()).then(|| {
        format!(
            "set {} (or log in with the CLI itself)",
            result.missing_credentials.join(" or ")
        )
    })
}

/// Exit 3, saying why, when a role's profile cannot run here or a probe
/// failed; else success.
fn refusal(
    config: &baton_executor::profile::Config,
    results: &[(&String, &Profile, CheckResult)],
    probed: Option<&[Probed]>,
) -> u8 {
    // A profile whose probe ran is judged by its probe.
    let probed_ran = |name: &str| {
        probed.is_some_and(|probed| {
            probed
                .iter()
                .any(|one| one.probe.profile == name && one.not_run.is_none())
        })
    };
    let broken: Vec<String> = config
        .agents
        .iter()
        .filter_map(|(role, choice)| {
            let name = choice.profile.as_deref()?;
            let (_, _, result) = results.iter().find(|(profile, _, _)| *profile == name)?;
            (!result.available && !probed_ran(name))
                .then(|| format!("[agents.{role}] uses `{name}`"))
        })
        .collect();
    let failed = probed.map(agents_probe::failures).unwrap_or_default();
    if !broken.is_empty() {
        output::stderr_line(&format!(
            "error: a role's agent cannot run here: {} (install its CLI, or map the role to a profile that is installed)",
            broken.join("; ")
        ));
    }
    if !failed.is_empty() {
        output::stderr_line(&format!(
            "error: the probe of {} failed (its detail says why; the CLI's own settings, credentials or server are the place to look)",
            failed.join(", ")
        ));
    }
    if broken.is_empty() && failed.is_empty() {
        exit_code::SUCCESS
    } else {
        exit_code::REFUSED
    }
}

/// How agents are kept from writing where they may not, here.
fn containment_line() -> String {
    match super::containment::contain_check() {
        Ok(_) => "agents: contained (none can write `.baton/`, a read-only one's writes outside its workspace never reach the repository, and no process outlives its stage)\n".to_owned(),
        Err(reason) => format!(
            "agents: not contained ({reason}): read-only stages are compared before and after, and agents can write `.baton/`\n"
        ),
    }
}
