//! `baton agents check`.

use serde_json::json;

use crate::args::{Format, FormatOnly};
use crate::{exit_code, output, settings};

/// Probes every profile (built-in and from `baton.toml`).
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
                            format!("set {}", result.missing_credentials.join(", "))
                        },
                    ]
                })
                .collect();
            output::table(&["profile", "program", "usable", "version", "note"], &rows)
        }
    };
    output::stdout(&text);
    exit_code::SUCCESS
}
