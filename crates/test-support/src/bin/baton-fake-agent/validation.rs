//! The stand-in agent as validator, challenger and corrector: directives
//! that write findings, challenges and corrections logs in the formats
//! baton's validation reads (docs/validation.md).

use std::path::{Path, PathBuf};

use super::output::{json_string, write_file};

/// `findings <spec>`: writes findings to every listed file.
///
/// `pass` (one PASS), `minor` (one minor FAIL), `critical` (one critical
/// FAIL), `critical-until <n>` (a critical FAIL until the workspace's
/// `validation/corrections-applied.json` has at least `n` entries, then a
/// PASS), `invalid` (text that is not JSON), `no-status` (a finding
/// without a status).
pub(crate) fn findings(spec: &str, files: &[String]) -> Result<(), String> {
    let (kind, argument) = spec
        .split_once(char::is_whitespace)
        .map_or((spec, ""), |(kind, rest)| (kind, rest.trim()));
    for file in files {
        let name = Path::new(file)
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = match kind {
            "pass" => finding("PASS", "info", &name),
            "minor" => finding("FAIL", "minor", &name),
            "critical" => finding("FAIL", "critical", &name),
            "critical-until" => {
                let wanted: usize = argument
                    .parse()
                    .map_err(|_| format!("`{argument}` is not a count"))?;
                if applied_corrections() >= wanted {
                    finding("PASS", "info", &name)
                } else {
                    finding("FAIL", "critical", &name)
                }
            }
            "invalid" => "this is not JSON\n".to_owned(),
            "no-status" => format!(
                "[{{\"id\":\"F1\",\"severity\":\"minor\",\"claim\":{}}}]\n",
                json_string(&name)
            ),
            _ => {
                return Err(format!(
                    "unknown findings `{kind}` (pass, minor, critical, critical-until <n>, invalid, no-status)"
                ));
            }
        };
        write_file(Path::new(file), &text)?;
    }
    Ok(())
}

fn finding(status: &str, severity: &str, name: &str) -> String {
    let claim = json_string(&format!("{name} is right"));
    format!(
        "[{{\"id\":\"F1\",\"status\":\"{status}\",\"claim\":{claim},\"expected\":\"right\",\"actual\":\"{}\",\"severity\":\"{severity}\",\"category\":\"accuracy\",\"source\":\"baton-fake-agent\",\"fix\":\"correct it\"}}]\n",
        if status == "PASS" { "right" } else { "wrong" }
    )
}

/// Entries in the workspace's `validation/corrections-applied.json`.
fn applied_corrections() -> usize {
    let workspace = std::env::var_os("BATON_WORKSPACE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let text = std::fs::read_to_string(workspace.join("validation/corrections-applied.json"))
        .unwrap_or_default();
    // One `"finding_id"` per entry: enough for a stand-in without a JSON parser.
    text.matches("\"finding_id\"").count()
}

/// `challenges <n>`: writes `n` challenges to every listed file.
pub(crate) fn challenges(count: &str, files: &[String]) -> Result<(), String> {
    let count: usize = count
        .parse()
        .map_err(|_| format!("`{count}` is not a count"))?;
    let items: Vec<String> = (1..=count)
        .map(|n| {
            format!(
                "{{\"id\":\"C{n}\",\"claim\":\"claim {n}\",\"challenge\":\"claim {n} may be wrong\",\"source\":\"baton-fake-agent\"}}"
            )
        })
        .collect();
    for file in files {
        write_file(Path::new(file), &format!("[{}]\n", items.join(",")))?;
    }
    Ok(())
}

/// `correct`: logs a change for every finding the prompt asks to fix
/// (each `"id": "…"` under `## Findings to fix`) in every listed file. A
/// prompt without that section is not a correction: nothing is written, so
/// one profile can both produce (`write-listed`) and correct.
pub(crate) fn correct(prompt: &str, files: &[String]) -> Result<(), String> {
    if !prompt
        .lines()
        .any(|line| line.trim() == "## Findings to fix")
    {
        return Ok(());
    }
    let ids: Vec<&str> = prompt
        .lines()
        .skip_while(|line| line.trim() != "## Findings to fix")
        .take_while(|line| !line.starts_with("## Corrections log"))
        .filter_map(|line| line.trim().strip_prefix("\"id\": \""))
        .filter_map(|rest| rest.split_once('"').map(|(id, _)| id))
        .collect();
    let entries: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(
                "{{\"finding_id\":{},\"change\":\"fixed by baton-fake-agent\"}}",
                json_string(id)
            )
        })
        .collect();
    for file in files {
        write_file(Path::new(file), &format!("[{}]\n", entries.join(",")))?;
    }
    Ok(())
}
