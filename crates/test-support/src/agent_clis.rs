//! The real agent CLIs (Claude Code, Codex, Gemini CLI, opencode) for
//! end-to-end tests, pointed at a [`ModelServer`] the way a user points them
//! at a gateway.
//!
//! `scripts/test` installs the pinned versions (`scripts/agent-clis.txt`)
//! and exports `BATON_TEST_AGENT_CLIS`, the directory holding the programs.

use std::path::{Path, PathBuf};

use crate::model_server::ModelServer;

/// The four CLIs, by their built-in profile names.
pub const CLIS: [&str; 4] = ["claude", "codex", "gemini", "opencode"];

/// The directory holding the pinned CLIs, or `None` when they are not
/// installed and `BATON_TEST_SKIP` lists `agent-clis` ([`crate::needs`]).
///
/// # Panics
///
/// When they are not installed and not to be skipped.
pub fn agent_clis() -> Option<PathBuf> {
    let dir = std::env::var_os("BATON_TEST_AGENT_CLIS").map(PathBuf::from);
    if let Some(dir) = dir.filter(|dir| CLIS.iter().all(|cli| dir.join(cli).exists())) {
        return Some(dir);
    }
    crate::needs::missing(
        crate::needs::Need::AgentClis,
        "the pinned agent CLIs (BATON_TEST_AGENT_CLIS)",
    );
    None
}

/// Writes under `home` the settings that point Codex, Gemini CLI and
/// opencode at `server` (Claude Code needs only variables), with each CLI's
/// own retries off so a failing model fails fast (opencode has no such
/// setting; the server's `retry-after-ms` keeps its retries short).
///
/// # Panics
///
/// When a file cannot be written.
pub fn configure_home(home: &Path, server: &ModelServer) {
    let base = server.base_url();
    let write = |relative: &str, text: String| {
        let path = home.join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create a directory");
        std::fs::write(&path, text).expect("write a CLI setting");
    };
    write(
        ".codex/config.toml",
        format!(
            "model = \"test-model\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"{base}/v1\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n"
        ),
    );
    write(
        ".gemini/settings.json",
        r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": false}, "general": {"disableAutoUpdate": true, "disableUpdateNag": true, "maxAttempts": 1}, "telemetry": {"enabled": false}}"#.to_owned(),
    );
    write(
        ".config/opencode/opencode.json",
        format!(
            r#"{{"provider": {{"fake": {{"npm": "@ai-sdk/openai-compatible", "name": "Fake", "options": {{"baseURL": "{base}/v1", "apiKey": "sk-fake"}}, "models": {{"test-model": {{"name": "Test model"}}, "other-model": {{"name": "Another model"}}}}}}}}, "model": "fake/test-model", "autoupdate": false, "share": "disabled"}}"#
        ),
    );
}

/// The environment a `baton` process needs to drive the CLIs in `bin`
/// against `server`: `HOME`, `PATH` and each CLI's documented gateway
/// variables.
pub fn environment(home: &Path, bin: &Path, server: &ModelServer) -> Vec<(String, String)> {
    let base = server.base_url();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    vec![
        ("HOME".into(), home.display().to_string()),
        ("PATH".into(), path),
        ("ANTHROPIC_BASE_URL".into(), base.clone()),
        ("ANTHROPIC_API_KEY".into(), "sk-fake".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "0".into()),
        ("OPENAI_API_KEY".into(), "sk-fake".into()),
        ("GOOGLE_GEMINI_BASE_URL".into(), base),
        ("GEMINI_API_KEY".into(), "sk-fake".into()),
    ]
}
