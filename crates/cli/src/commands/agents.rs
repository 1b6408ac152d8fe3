//! `baton agents check`.

use serde_json::json;

use crate::args::{Format, FormatOnly};
use crate::{exit_code, output, settings};

/// Probes every profile (built-in and from `baton.toml`). Exits non-zero
/// when a profile a role is mapped to (`[agents.*]`) cannot run here.
pub(crate) fn check(args: &FormatOnly) -> u8 {
    let config = match settings::agent_config(&super::current_dir()) {
        Ok(config) => config,
        Err(error) => {
            output::stderr_line(&format!("error: {error}"));
            return exit_code::USAGE;
        }
    };
    let results: Vec<_> = config
        .profiles
        .iter()
        .map(|(name, profile)| (name, profile, baton_executor::profile::check(profile)))
        .collect();
    let text = match args.format.format() {
        Format::Json | Format::Yaml => {
            let rows: Vec<_> = results
                .iter()
                .map(|(name, profile, result)| {
                    json!({
                        "profile": name,
                        "program": profile.program,
                        "available": result.available,
                        "version": result.version,
                        "missing_credentials": result.missing_credentials,
                        "detail": result.detail,
                    })
                })
                .collect();
            if args.format.format() == Format::Json {
                output::json(&rows)
            } else {
                output::yaml(&rows)
            }
        }
        Format::Table => {
            let rows: Vec<Vec<String>> = results
                .iter()
                .map(|(name, profile, result)| {
                    vec![
                        (*name).clone(),
                        profile.program.clone().unwrap_or_default(),
                        if result.available {
                            "yes".to_owned()
                        } else {
                            "no".to_owned()
                        },
                        result.version.clone().unwrap_or_default(),
                        if result.missing_credentials.is_empty() {
                            result.detail.clone().unwrap_or_default()
                        } else {
                            format!(
                                "set {} (or log in with the CLI itself)",
                                result.missing_credentials.join(" or ")
                            )
                        },
                    ]
                })
                .collect();
            output::table(
                &["profile", "program", "installed", "version", "note"],
                &rows,
            )
        }
    };
    output::stdout(&text);
    if args.format.format() == Format::Table {
        output::stdout(&containment_line());
    }
    let broken: Vec<String> = config
        .agents
        .iter()
        .filter_map(|(role, choice)| {
            let name = choice.profile.as_deref()?;
            let (_, _, result) = results.iter().find(|(profile, _, _)| *profile == name)?;
            (!result.available).then(|| format!("[agents.{role}] uses `{name}`"))
        })
        .collect();
    if broken.is_empty() {
        return exit_code::SUCCESS;
    }
    output::stderr_line(&format!(
        "error: a role's agent cannot run here: {} (install its CLI, or map the role to a profile that is installed)",
        broken.join("; ")
    ));
    exit_code::REFUSED
}

/// How agents are kept from writing where they may not, here.
fn containment_line() -> String {
    match super::run::contain_check() {
        Ok(_) => "agents: contained (none can write `.baton/`, a read-only one's writes outside its workspace never reach the repository, and no process outlives its stage)\n".to_owned(),
        Err(reason) => format!(
            "agents: not contained ({reason}): read-only stages are compared before and after, and agents can write `.baton/`\n"
        ),
    }
}
