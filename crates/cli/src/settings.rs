//! Settings read from the environment, in one place.

use std::path::{Path, PathBuf};

/// `BATON_DATABASE_URL`: where the store is. Unset or empty: the embedded
/// SQLite file `.baton/baton.db` in the project.
pub(crate) const DATABASE_URL: &str = "BATON_DATABASE_URL";

/// `BATON_PROJECT`: the project directory, instead of the one found from
/// the current directory (`--project` wins over it).
const PROJECT: &str = "BATON_PROJECT";

/// Whether `TERM` says the terminal draws nothing but plain lines.
pub(crate) fn terminal_is_dumb() -> bool {
    std::env::var_os("TERM").is_some_and(|term| term == "dumb")
}

/// `BATON_FAILPOINT`: the named point crash tests make baton abort at (see
/// the engine's `failpoint` module), if set and not empty.
pub(crate) fn failpoint() -> Option<String> {
    var_os("BATON_FAILPOINT").map(|point| point.to_string_lossy().into_owned())
}

/// What `BATON_CGROUPS` asks for: a cgroup of its own for each stage's
/// process where the machine allows it (`auto`, unset or empty: the
/// default), the same with a warning where it does not (`on`), or never
/// (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cgroups {
    Auto,
    On,
    Off,
}

/// `BATON_CGROUPS`, or why its value is refused.
pub(crate) fn cgroups() -> Result<Cgroups, String> {
    match var("BATON_CGROUPS").as_deref() {
        None | Some("auto") => Ok(Cgroups::Auto),
        Some("on") => Ok(Cgroups::On),
        Some("off") => Ok(Cgroups::Off),
        Some(other) => Err(format!(
            "BATON_CGROUPS={other}: expected `auto` (the default), `on` or `off`"
        )),
    }
}

/// The `PATH` baton was started with, where agent CLIs are looked for.
pub(crate) fn path() -> Option<std::ffi::OsString> {
    std::env::var_os("PATH")
}

/// A duration in milliseconds a variable overrides (the worker's timings;
/// suites shorten them), if it is set to a whole number.
pub(crate) fn millis(name: &str) -> Option<std::time::Duration> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map(std::time::Duration::from_millis)
}

/// A variable's value as the system holds it, if it is set and not empty.
fn var_os(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}

/// A variable's value, trimmed, if it is set and not blank.
fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// What `baton mcp` learns from its environment: the run and stage of the
/// stage process that started it (`BATON_RUN_ID`, `BATON_STAGE`, set by
/// baton for every stage and passed on by the agent CLI), and a person's
/// token (`BATON_TOKEN`).
pub(crate) fn mcp_context() -> baton_server::mcp::StdioContext {
    baton_server::mcp::StdioContext {
        stage: var("BATON_RUN_ID").zip(var("BATON_STAGE")),
        token: var("BATON_TOKEN"),
    }
}

/// The project of the stage whose process started this one
/// (`BATON_PROJECT_DIR`, which baton sets with `BATON_RUN_ID` for every
/// stage), if it is one.
pub(crate) fn stage_project_dir() -> Option<PathBuf> {
    var_os("BATON_RUN_ID")?;
    var_os("BATON_PROJECT_DIR").map(PathBuf::from)
}

/// The project directory `BATON_PROJECT` names, if set and not empty.
pub(crate) fn project_from_env() -> Option<PathBuf> {
    var_os(PROJECT).map(PathBuf::from)
}

/// Who listens to baton's spans, as the environment says.
#[derive(Debug, Default)]
pub(crate) struct Observability {
    /// `BATON_LOG`: which spans to print to stderr, as `target=level`
    /// directives (`baton=info`), if set and not empty.
    pub(crate) log: Option<String>,
    /// Where spans go over OpenTelemetry, if anywhere.
    pub(crate) otlp: Option<Otlp>,
}

/// An OpenTelemetry collector to send spans to (OTLP over HTTP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Otlp {
    /// `BATON_OTLP_ENDPOINT`: the collector's base URL; spans go to its
    /// `/v1/traces`.
    Baton(String),
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`:
    /// the exporter reads them itself, as every OpenTelemetry SDK does.
    Standard,
}

/// `BATON_OTLP_ENDPOINT`, for the warning of a build without OpenTelemetry.
pub(crate) const OTLP_ENDPOINT: &str = "BATON_OTLP_ENDPOINT";

/// What `BATON_LOG` and the OTLP endpoint variables ask for.
pub(crate) fn observability() -> Observability {
    let standard = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .into_iter()
    .any(|name| var(name).is_some());
    let otlp = match var(OTLP_ENDPOINT) {
        Some(url) => Some(Otlp::Baton(url)),
        None => standard.then_some(Otlp::Standard),
    };
    Observability {
        log: var("BATON_LOG"),
        otlp,
    }
}

/// What `BATON_DATABASE_URL` accepts, for the error that refuses a value.
const DATABASE_URL_ACCEPTS: &str = "a postgres:// or postgresql:// URL (PostgreSQL), sqlite://PATH or a plain file path (SQLite), or unset for .baton/baton.db";

/// Where the store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreLocation {
    /// A PostgreSQL connection URL.
    Postgres(String),
    /// A SQLite file.
    Sqlite(PathBuf),
}

impl StoreLocation {
    /// Whether this is the project's own store, `.baton/baton.db`.
    pub(crate) fn is_in_project(&self) -> bool {
        matches!(self, StoreLocation::Sqlite(path) if path.starts_with(crate::project::dir().join(".baton")))
    }

    /// Opens the store here.
    pub(crate) async fn open(&self) -> Result<baton_store::Store, baton_store::Error> {
        match self {
            StoreLocation::Postgres(url) => baton_store::Store::open_postgres(url).await,
            StoreLocation::Sqlite(path) => baton_store::Store::open_sqlite(path).await,
        }
    }
}

/// Where the store is: `BATON_DATABASE_URL`, else `.baton/baton.db` in
/// `project_dir`. A value baton cannot read is refused rather than taken
/// for a file name: that would run against a new, empty store and succeed.
pub(crate) fn store_location(project_dir: &Path) -> Result<StoreLocation, String> {
    let Some(value) = var_os(DATABASE_URL) else {
        return Ok(StoreLocation::Sqlite(
            project_dir.join(".baton").join("baton.db"),
        ));
    };
    let value = value.into_string().map_err(|_| {
        format!("{DATABASE_URL} is not valid UTF-8; set it to {DATABASE_URL_ACCEPTS}")
    })?;
    parse_database_url(&value)
}

/// Reads a non-empty `BATON_DATABASE_URL`. The value is never quoted back:
/// a URL may carry a password.
fn parse_database_url(value: &str) -> Result<StoreLocation, String> {
    if value.trim() != value {
        return Err(format!(
            "{DATABASE_URL} starts or ends with whitespace; remove it (accepted: {DATABASE_URL_ACCEPTS})"
        ));
    }
    let Some((scheme, rest)) = value
        .split_once("://")
        .filter(|(scheme, _)| is_scheme(scheme))
    else {
        return Ok(StoreLocation::Sqlite(PathBuf::from(value)));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "postgres" | "postgresql" => Ok(StoreLocation::Postgres(value.to_owned())),
        "sqlite" if rest.is_empty() => Err(format!(
            "{DATABASE_URL} is sqlite:// with no file path; write sqlite://PATH, e.g. sqlite:///srv/baton.db"
        )),
        "sqlite" => Ok(StoreLocation::Sqlite(PathBuf::from(rest))),
        _ => Err(format!(
            "{DATABASE_URL} has the scheme {scheme}://, which baton cannot use; set it to {DATABASE_URL_ACCEPTS}"
        )),
    }
}

/// A URL scheme (RFC 3986): a letter, then letters, digits, `+`, `-`, `.`.
/// Anything else before `://` is part of a file path.
fn is_scheme(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// The person running baton, for what they decide or record without
/// `--as`: `$USER`, else `$LOGNAME`, else the git user of `project_dir`
/// (`user.name`, else `user.email`), else the operating system's name for
/// this user id, else `unknown`.
pub(crate) async fn person(project_dir: &Path) -> String {
    let from_env = ["USER", "LOGNAME"].into_iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|user| !user.trim().is_empty())
    });
    if let Some(user) = from_env {
        return user;
    }
    if let Some(user) = baton_executor::git::user(project_dir).await {
        return user;
    }
    baton_executor::user::os_user_name().unwrap_or_else(|| "unknown".to_owned())
}

/// The project's `baton.toml`: agent profiles and roles, merged over the
/// built-in profiles. A missing file means the built-in profiles only.
pub(crate) fn agent_config(project_dir: &Path) -> Result<baton_executor::profile::Config, String> {
    Ok(project_agents(project_dir)?.unwrap_or_else(baton_executor::profile::Config::builtin))
}

/// The project's `baton.toml` as [`agent_config`] reads it, or `None`
/// when there is none. Without the file no role has an agent, so a drive
/// needs no profiles: it is spared parsing the built-in ones.
pub(crate) fn project_agents(
    project_dir: &Path,
) -> Result<Option<baton_executor::profile::Config>, String> {
    let path = project_dir.join("baton.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    baton_executor::profile::Config::from_toml(&text)
        .map(Some)
        .map_err(|error| format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(path: &str) -> Result<StoreLocation, String> {
        Ok(StoreLocation::Sqlite(PathBuf::from(path)))
    }

    #[test]
    fn postgres_urls_are_recognised_in_any_letter_case() {
        for url in [
            "postgres://u@h/db",
            "postgresql://u@h/db",
            "POSTGRES://u@h/db",
            "PostgreSQL://u@h/db",
        ] {
            assert_eq!(
                parse_database_url(url),
                Ok(StoreLocation::Postgres(url.to_owned()))
            );
        }
    }

    #[test]
    fn sqlite_urls_and_plain_paths_name_a_sqlite_file() {
        assert_eq!(
            parse_database_url("sqlite:///srv/b.db"),
            sqlite("/srv/b.db")
        );
        assert_eq!(parse_database_url("SQLITE://rel/b.db"), sqlite("rel/b.db"));
        assert_eq!(parse_database_url("/srv/b.db"), sqlite("/srv/b.db"));
        assert_eq!(parse_database_url("b.db"), sqlite("b.db"));
        // Not a scheme: a path that happens to contain `://`.
        assert_eq!(parse_database_url("./a://b.db"), sqlite("./a://b.db"));
    }

    #[test]
    fn other_schemes_and_surrounding_whitespace_are_refused_without_quoting_the_value() {
        for (value, says) in [
            ("mysql://root:pw@h/db", "scheme mysql://"),
            ("sqlite://", "no file path"),
            (" /tmp/x.db", "whitespace"),
            ("postgres://root:pw@h/db\n", "whitespace"),
            ("   ", "whitespace"),
        ] {
            let error = parse_database_url(value).expect_err(value);
            assert!(error.contains(DATABASE_URL), "{error}");
            assert!(error.contains(says), "{error}");
            assert!(!error.contains("pw"), "{error}");
        }
    }
}
