//! Loading profiles and agent roles from `baton.toml`, merged over the
//! built-in profiles.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Error;
use super::schema::{Kind, Profile};

/// The built-in profiles, as TOML.
const BUILTIN: &str = include_str!("builtin.toml");

/// Profiles, role assignments and prices, resolved.
///
/// There is no fallback profile: a role without `[agents.<role>]` or
/// `[agents.default]` is an error ([`Error::NoAgent`]), so a project never
/// runs an agent nobody chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Every profile by name: built-in ones, overridden or extended by
    /// `[profiles.*]`.
    pub profiles: BTreeMap<String, Profile>,
    /// `[agents.<role>]` entries by role; `default` covers other roles.
    pub agents: BTreeMap<String, AgentChoice>,
    /// `[pricing]`: USD per million tokens by model, for CLIs that report
    /// tokens but not dollars.
    pub pricing: BTreeMap<String, Price>,
    /// `[governance]`: the governance rules (docs/governance.md) that a project may tune.
    pub governance: Governance,
    /// `[notify]`: where a run's gates and ends are announced.
    pub notify: crate::notify::Settings,
}

/// The `[governance]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Governance {
    /// `self_review = "allow"` lets a validator run under the identity that
    /// produced what it validates (recorded as a waiver); the default,
    /// `"refuse"`, stops the run.
    pub self_review: SelfReview,
    /// Commands (prefixes) a hooked agent session counts as validation;
    /// `None` keeps the defaults.
    pub test_commands: Option<Vec<String>>,
}

/// Whether a validator may share the producer's identity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SelfReview {
    /// Refused: the run stops with a message naming the setting.
    #[default]
    Refuse,
    /// Allowed, and recorded as a waiver in the run's ledger.
    Allow,
}

/// One `[agents.<role>]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentChoice {
    /// The profile's name.
    pub profile: Option<String>,
    /// The model to request.
    pub model: Option<String>,
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached input tokens.
    pub input: f64,
    /// Cached input tokens (billed as `input` when absent).
    pub cached_input: Option<f64>,
    /// Output tokens.
    pub output: f64,
}

/// The agent a role resolves to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Agent<'c> {
    /// The profile's name.
    pub profile_name: &'c str,
    /// The profile.
    pub profile: &'c Profile,
    /// The model, when one is configured.
    pub model: Option<&'c str>,
}

impl Config {
    /// The built-in profiles with no roles and no prices.
    pub fn builtin() -> Config {
        Config::from_toml("").expect("the built-in profiles are valid")
    }

    /// Reads the `[profiles]`, `[agents]`, `[pricing]`, `[governance]` and
    /// `[notify]` tables of a
    /// `baton.toml`; other tables are ignored (they belong to other
    /// settings).
    ///
    /// # Errors
    ///
    /// Invalid TOML, a profile or agent entry with unknown or mistyped
    /// fields, an unknown or circular `extends`, a CLI profile without
    /// `program`, or an `[agents.*]` entry naming an unknown profile.
    pub fn from_toml(text: &str) -> Result<Config, Error> {
        let document: toml::Table =
            toml::from_str(text).map_err(|source| Error::Toml { source })?;
        Config::from_table(&document)
    }

    /// Like [`Config::from_toml`], from an already parsed document.
    ///
    /// # Errors
    ///
    /// As [`Config::from_toml`].
    pub fn from_table(document: &toml::Table) -> Result<Config, Error> {
        let builtin: toml::Table = toml::from_str(BUILTIN).expect("builtin.toml is valid TOML");
        let builtin = sub_table(&builtin, "profiles")?.expect("builtin.toml has [profiles]");
        let user = sub_table(document, "profiles")?.unwrap_or_default();

        let mut names: Vec<&String> = builtin.keys().chain(user.keys()).collect();
        names.sort();
        names.dedup();
        let mut profiles = BTreeMap::new();
        for name in names {
            let table = merged_profile(name, &builtin, &user, &mut Vec::new())?;
            let profile: Profile =
                toml::Value::Table(table)
                    .try_into()
                    .map_err(|source| Error::Invalid {
                        name: name.clone(),
                        source,
                    })?;
            validate(name, &profile)?;
            profiles.insert(name.clone(), profile);
        }

        let mut agents = BTreeMap::new();
        for (role, value) in sub_table(document, "agents")?.unwrap_or_default() {
            let choice: AgentChoice = value.try_into().map_err(|source| Error::InvalidAgent {
                role: role.clone(),
                source,
            })?;
            if let Some(name) = &choice.profile
                && !profiles.contains_key(name)
            {
                return Err(Error::UnknownProfile {
                    name: name.clone(),
                    used_by: format!("[agents.{role}]"),
                });
            }
            agents.insert(role, choice);
        }

        let pricing = match document.get("pricing") {
            None => BTreeMap::new(),
            Some(value) => value.clone().try_into().map_err(|source| Error::Invalid {
                name: "pricing".to_owned(),
                source,
            })?,
        };
        let governance = match document.get("governance") {
            None => Governance::default(),
            Some(value) => value.clone().try_into().map_err(|source| Error::Invalid {
                name: "governance".to_owned(),
                source,
            })?,
        };
        let notify = match document.get("notify") {
            None => crate::notify::Settings::default(),
            Some(value) => value.clone().try_into().map_err(|source| Error::Invalid {
                name: "notify".to_owned(),
                source,
            })?,
        };
        Ok(Config {
            profiles,
            agents,
            pricing,
            governance,
            notify,
        })
    }

    /// The profile called `name`.
    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    /// The agent for `role`: `[agents.<role>]`, with missing fields taken
    /// from `[agents.default]`. The default's model is inherited only when
    /// the role keeps the default's profile: a model name means nothing to
    /// another CLI.
    ///
    /// # Errors
    ///
    /// [`Error::NoAgent`] when neither entry names a profile.
    pub fn agent(&self, role: &str) -> Result<Agent<'_>, Error> {
        let default = self.agents.get("default");
        let own = self.agents.get(role);
        let profile_name = own
            .and_then(|choice| choice.profile.as_deref())
            .or_else(|| default.and_then(|choice| choice.profile.as_deref()))
            .ok_or_else(|| Error::NoAgent {
                role: role.to_owned(),
            })?;
        let same_profile_as_default =
            default.and_then(|choice| choice.profile.as_deref()) == Some(profile_name);
        let model = own.and_then(|choice| choice.model.as_deref()).or_else(|| {
            default
                .filter(|_| same_profile_as_default)
                .and_then(|choice| choice.model.as_deref())
        });
        let (profile_name, profile) = self
            .profiles
            .get_key_value(profile_name)
            .expect("agent entries were checked against the profiles");
        Ok(Agent {
            profile_name,
            profile,
            model,
        })
    }
}

fn sub_table(table: &toml::Table, key: &str) -> Result<Option<toml::Table>, Error> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::Table(inner)) => Ok(Some(inner.clone())),
        Some(_) => Err(Error::NotATable {
            key: key.to_owned(),
        }),
    }
}

/// The TOML table of profile `name`: the user's table merged over its base,
/// which is the profile named by `extends`, else the built-in profile of the
/// same name, else nothing.
fn merged_profile(
    name: &str,
    builtin: &toml::Table,
    user: &toml::Table,
    chain: &mut Vec<String>,
) -> Result<toml::Table, Error> {
    if chain.iter().any(|seen| seen == name) {
        chain.push(name.to_owned());
        return Err(Error::ExtendsCycle {
            cycle: chain.join(" -> "),
        });
    }
    chain.push(name.to_owned());
    let own = match user.get(name) {
        None => None,
        Some(toml::Value::Table(table)) => Some(table),
        Some(_) => {
            return Err(Error::NotATable {
                key: format!("profiles.{name}"),
            });
        }
    };
    let extends = own.and_then(|table| table.get("extends"));
    let mut base = match extends {
        Some(toml::Value::String(parent)) => {
            if !builtin.contains_key(parent) && !user.contains_key(parent) {
                return Err(Error::UnknownProfile {
                    name: parent.clone(),
                    used_by: format!("[profiles.{name}] extends"),
                });
            }
            if parent == name {
                // `[profiles.claude] extends = "claude"` means the built-in.
                builtin_table(builtin, name)
            } else {
                merged_profile(parent, builtin, user, chain)?
            }
        }
        // A non-string `extends` is reported by deserialization.
        Some(_) | None => builtin_table(builtin, name),
    };
    if let Some(own) = own {
        merge(&mut base, own);
    }
    chain.pop();
    Ok(base)
}

fn builtin_table(builtin: &toml::Table, name: &str) -> toml::Table {
    match builtin.get(name) {
        Some(toml::Value::Table(table)) => table.clone(),
        _ => toml::Table::new(),
    }
}

/// Merges `over` into `base`: tables key by key, anything else replaced.
fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(base_table)), toml::Value::Table(over_table)) => {
                merge(base_table, over_table);
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

fn validate(name: &str, profile: &Profile) -> Result<(), Error> {
    let missing = |field| Error::MissingField {
        name: name.to_owned(),
        field,
    };
    match profile.kind {
        Kind::Cli if profile.program.as_deref().is_none_or(str::is_empty) => {
            Err(missing("program"))
        }
        Kind::OpenaiChat if profile.base_url.is_none() => Err(missing("base_url")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::profile::{Capability, PromptVia};

    #[test]
    fn builtin_profiles_load() {
        let config = Config::builtin();
        let names: Vec<&str> = config.profiles.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "aider",
                "claude",
                "codex",
                "gemini",
                "goose",
                "local-llm",
                "opencode",
            ]
        );
        let claude = config.profile("claude").unwrap();
        assert_eq!(claude.limits.wall, Some(Duration::from_secs(3600)));
        assert_eq!(claude.prompt.via, PromptVia::Stdin);
        assert!(claude.capabilities.contains(&Capability::JsonSchema));
        let local = config.profile("local-llm").unwrap();
        assert_eq!(local.kind, Kind::OpenaiChat);
        assert_eq!(local.base_url.as_deref(), Some("http://127.0.0.1:8000/v1"));
        assert_eq!(
            config.profile("gemini").unwrap().output.as_ref().unwrap()["format"].as_str(),
            Some("json")
        );
    }

    #[test]
    fn user_tables_override_and_extend() {
        let config = Config::from_toml(
            r#"
            [server]
            port = 1

            [profiles.claude]
            limits = { wall = "30m" }
            options = { model = ["--model", "{value}", "--fallback-model", "sonnet"] }

            [profiles.claude-bedrock]
            extends = "claude"
            env = { CLAUDE_CODE_USE_BEDROCK = "1" }

            [profiles.mine]
            program = "my-agent"
            args = ["--headless"]
            prompt = { via = "arg", flag = "--prompt" }
            "#,
        )
        .unwrap();
        let claude = config.profile("claude").unwrap();
        assert_eq!(claude.limits.wall, Some(Duration::from_secs(1800)));
        assert_eq!(claude.limits.idle, Some(Duration::from_secs(900)), "kept");
        assert_eq!(claude.options["model"].len(), 4);
        assert!(
            claude.options.contains_key("session_id"),
            "other options kept"
        );
        let bedrock = config.profile("claude-bedrock").unwrap();
        assert_eq!(bedrock.program.as_deref(), Some("claude"));
        assert_eq!(
            bedrock.limits.wall,
            Some(Duration::from_secs(1800)),
            "from the user's claude"
        );
        assert_eq!(bedrock.env["CLAUDE_CODE_USE_BEDROCK"], "1");
        assert_eq!(bedrock.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
        let mine = config.profile("mine").unwrap();
        assert_eq!(mine.prompt.via, PromptVia::Arg);
        assert_eq!(mine.success.exit_codes, [0]);
    }

    #[test]
    fn roles_resolve_with_defaults() {
        let config = Config::from_toml(
            r#"
            [agents.default]
            profile = "claude"
            model = "sonnet"

            [agents.reviewer]
            profile = "codex"

            [agents.planner]
            model = "opus"

            [pricing]
            "gpt-5.2-codex" = { input = 1.25, cached_input = 0.125, output = 10.0 }
            "#,
        )
        .unwrap();
        let check = |role: &str, profile: &str, model: Option<&str>| {
            let agent = config.agent(role).unwrap();
            assert_eq!(
                (agent.profile_name, agent.model),
                (profile, model),
                "{role}"
            );
        };
        check("code-writer", "claude", Some("sonnet"));
        check("reviewer", "codex", None);
        check("planner", "claude", Some("opus"));
        assert_eq!(config.pricing["gpt-5.2-codex"].output, 10.0);
        assert!(matches!(
            Config::builtin().agent("x"),
            Err(Error::NoAgent { role }) if role == "x"
        ));
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let error = |text: &str| Config::from_toml(text).unwrap_err().to_string();
        assert_eq!(
            error("[profiles.a]\nextends = \"b\"\n[profiles.b]\nextends = \"a\"\n"),
            "profiles extend each other in a cycle: a -> b -> a"
        );
        assert_eq!(
            error("[profiles.a]\nextends = \"nope\"\n"),
            "unknown profile `nope` (used by [profiles.a] extends)"
        );
        assert_eq!(
            error("[profiles.a]\nargs = []\n"),
            "profile `a` has no `program`"
        );
        assert_eq!(
            error("[profiles.claude]\nprogam = \"x\"\n"),
            "invalid profile `claude`"
        );
        assert_eq!(
            error("[agents.default]\nprofile = \"nope\"\n"),
            "unknown profile `nope` (used by [agents.default])"
        );
        assert_eq!(
            error("profiles = 1"),
            "`profiles` in baton.toml must be a table"
        );
        assert!(matches!(
            Config::from_toml("[profiles.claude]\nlimits = { wall = \"soon\" }\n"),
            Err(Error::Invalid { .. })
        ));
    }

    #[test]
    fn resuming_is_turned_off_or_reshaped_in_baton_toml() {
        let builtin = Config::builtin();
        for name in ["claude", "codex", "gemini", "opencode"] {
            assert!(builtin.profile(name).unwrap().resumes().is_some(), "{name}");
        }
        for name in ["aider", "goose", "local-llm"] {
            assert!(builtin.profile(name).unwrap().resumes().is_none(), "{name}");
        }
        let config = Config::from_toml(
            r#"
            [profiles.claude]
            capabilities = ["json_schema", "budget", "hooks", "mcp"]

            [profiles.gemini.resume]
            args = ["--resume", "{session}", "--debug"]
            "#,
        )
        .unwrap();
        assert!(config.profile("claude").unwrap().resumes().is_none());
        let gemini = config.profile("gemini").unwrap().resumes().unwrap();
        assert_eq!(gemini.args.len(), 3);
        assert_eq!(gemini.not_found, ["Error resuming session"], "kept");
    }
}
