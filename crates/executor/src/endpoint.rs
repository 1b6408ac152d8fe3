//! OpenAI-compatible chat endpoints (`kind = "openai-chat"` profiles): vLLM,
//! llama.cpp's `llama-server`, Ollama, LM Studio (docs/agents.md).
//!
//! No process runs. baton POSTs `{base_url}/chat/completions` with the
//! rendered prompt and asks for a structured answer, `{"files": [{"path",
//! "content"}], "summary"}` (`response_format: json_schema`), then writes
//! the files itself. Only the stage's declared outputs may be written: a
//! path that is not declared, climbs out with `..`, is absolute outside the
//! workspace, or passes through a symlink fails the attempt, naming the
//! path, before anything is written.
//!
//! The raw response body goes to the attempt's stdout log, so the usage
//! parser reads `usage.prompt_tokens` / `completion_tokens` from it exactly
//! as it reads a CLI's output. Response types are tolerant: every field is
//! optional, because servers differ in what they send.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

/// The most bytes of a response kept (and written to the log).
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// One chat request for one attempt.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// `http://127.0.0.1:8000/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The model to ask for (servers require the field; some ignore it).
    pub model: Option<String>,
    /// The variable holding a bearer token, when the server wants one. It
    /// is read here, as the executor reads a process's `env_passthrough`.
    pub api_key_env: Option<String>,
    /// The rendered prompt.
    pub prompt: String,
    /// The stage's workspace; answers are written inside it.
    pub workspace: PathBuf,
    /// Workspace-relative paths the stage declares; a path ending in `/` is
    /// a directory whose files may all be written.
    pub allowed: Vec<String>,
    /// Where the response body goes (the attempt's stdout log).
    pub response_log: PathBuf,
    /// Bound on the whole exchange.
    pub wall_timeout: Duration,
}

/// A successful exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatOutcome {
    /// Workspace-relative paths written, in answer order.
    pub written: Vec<String>,
    /// The model's summary, if it gave one.
    pub summary: Option<String>,
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// The server could not be reached or the transfer broke.
    #[error("cannot reach {url}: {source}")]
    Unreachable {
        /// The URL.
        url: String,
        /// The client's error.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error status.
    #[error("the endpoint answered HTTP {status}: {message}")]
    Status {
        /// The status code.
        status: u16,
        /// The server's message (`error.message`, else the body's start).
        message: String,
    },
    /// The answer is not the requested JSON.
    #[error("the endpoint's answer is not the requested JSON ({0})")]
    BadAnswer(String),
    /// The answer names a file the stage may not write.
    #[error("the endpoint's answer writes {path}, which is refused: {why}")]
    RefusedPath {
        /// The path as given.
        path: String,
        /// Why.
        why: &'static str,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The wall timeout passed; the request was dropped.
    #[error("timed out after {0:.1?}; the request was abandoned")]
    Timeout(Duration),
    /// The attempt was cancelled; the request was dropped.
    #[error("cancelled")]
    Cancelled,
}

/// The JSON Schema of the answer baton asks for.
pub fn answer_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "content": {"type": "string"}
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }
            },
            "summary": {"type": "string"}
        },
        "required": ["files", "summary"],
        "additionalProperties": false
    })
}

/// Sends the request, checks the answer and writes its files. Dropping the
/// future (on timeout or cancel) closes the connection.
///
/// # Errors
///
/// See [`EndpointError`]; on any error no file has been written.
pub async fn chat(
    request: &ChatRequest,
    mut cancel: watch::Receiver<bool>,
) -> Result<ChatOutcome, EndpointError> {
    let exchange = async {
        let body = post(request).await?;
        let answer = parse_answer(&body)?;
        write_files(&request.workspace, &request.allowed, answer)
    };
    let cancelled = async {
        while !*cancel.borrow_and_update() {
            if cancel.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        result = tokio::time::timeout(request.wall_timeout, exchange) => {
            result.unwrap_or(Err(EndpointError::Timeout(request.wall_timeout)))
        }
        () = cancelled => Err(EndpointError::Cancelled),
    }
}

async fn post(request: &ChatRequest) -> Result<String, EndpointError> {
    let url = format!(
        "{}/chat/completions",
        request.base_url.trim_end_matches('/')
    );
    let unreachable = |source| EndpointError::Unreachable {
        url: url.clone(),
        source,
    };
    let body = json!({
        "model": request.model.as_deref().unwrap_or("default"),
        "messages": [
            {"role": "system", "content": "You are run by baton, a workflow engine. Do the task, then answer with JSON only: every file to write, as {\"path\", \"content\"} with the paths listed under \"Files to write\", and a one-paragraph summary."},
            {"role": "user", "content": request.prompt},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "baton_answer", "strict": true, "schema": answer_schema()}
        }
    });
    let (status, text) = exchange(&url, &body, request.api_key_env.as_deref())
        .await
        .map_err(unreachable)?;
    // The log is for reading usage and for people; failing to write it
    // must not fail a good answer.
    if let Some(parent) = request.response_log.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let _ = std::fs::write(&request.response_log, &text);
    if !status.is_success() {
        return Err(EndpointError::Status {
            status: status.as_u16(),
            message: error_message(&text),
        });
    }
    Ok(text)
}

/// One short chat request with `prompt` and nothing else (`baton agents
/// check --probe`): the answer's body, which the profile's `[output]`
/// rules read usage from. The whole exchange is bounded by `timeout`.
///
/// # Errors
///
/// The server is unreachable or slow, or answers an error status.
pub async fn probe(
    base_url: &str,
    model: Option<&str>,
    api_key_env: Option<&str>,
    prompt: &str,
    timeout: Duration,
) -> Result<String, EndpointError> {
    let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
    let body = json!({
        "model": model.unwrap_or("default"),
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 8,
    });
    let answer = async {
        let (status, text) = exchange(&url, &body, api_key_env).await.map_err(|source| {
            EndpointError::Unreachable {
                url: url.clone(),
                source,
            }
        })?;
        if status.is_success() {
            Ok(text)
        } else {
            Err(EndpointError::Status {
                status: status.as_u16(),
                message: error_message(&text),
            })
        }
    };
    tokio::time::timeout(timeout, answer)
        .await
        .unwrap_or(Err(EndpointError::Timeout(timeout)))
}

/// POSTs `body` as JSON to `url` (with the key from `api_key_env` as a
/// bearer token, when set) and reads the answer, at most
/// `MAX_RESPONSE_BYTES` of it.
async fn exchange(
    url: &str,
    body: &serde_json::Value,
    api_key_env: Option<&str>,
) -> Result<(reqwest::StatusCode, String), reqwest::Error> {
    let mut builder = reqwest::Client::new().post(url).json(body);
    let key = api_key_env.and_then(crate::environment::text);
    if let Some(key) = key {
        builder = builder.bearer_auth(key);
    }
    let mut response = builder.send().await?;
    let status = response.status();
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_RESPONSE_BYTES.saturating_sub(bytes.len());
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

/// `error.message`, `error` or `message` of a JSON error body, else the
/// body's first 300 characters.
fn error_message(body: &str) -> String {
    let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let found = json.as_ref().and_then(|json| {
        ["/error/message", "/error", "/message", "/detail"]
            .iter()
            .find_map(|pointer| json.pointer(pointer).and_then(serde_json::Value::as_str))
    });
    let text = found.unwrap_or(body).trim();
    let short: String = text.chars().take(300).collect();
    if short.is_empty() {
        "(empty body)".to_owned()
    } else {
        short
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Completion {
    choices: Vec<Choice>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    message: Message,
}

#[derive(Debug, Default, Deserialize)]
struct Message {
    content: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Answer {
    files: Vec<AnswerFile>,
    summary: Option<String>,
}

#[derive(Debug, Deserialize)]
struct AnswerFile {
    path: String,
    #[serde(default)]
    content: String,
}

fn parse_answer(body: &str) -> Result<Answer, EndpointError> {
    let completion: Completion = serde_json::from_str(body)
        .map_err(|error| EndpointError::BadAnswer(format!("the body is not JSON: {error}")))?;
    let content = completion
        .choices
        .into_iter()
        .next()
        .and_then(|choice| choice.message.content)
        .ok_or_else(|| EndpointError::BadAnswer("no choices[0].message.content".to_owned()))?;
    // Servers without structured output often wrap JSON in a code fence.
    let trimmed = content.trim();
    let unfenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(trimmed);
    serde_json::from_str(unfenced.trim())
        .map_err(|error| EndpointError::BadAnswer(format!("the message content: {error}")))
}

/// Checks every path, then writes every file (so a refused path leaves the
/// workspace untouched).
fn write_files(
    workspace: &Path,
    allowed: &[String],
    answer: Answer,
) -> Result<ChatOutcome, EndpointError> {
    let mut checked = Vec::new();
    for file in answer.files {
        let relative = contained(workspace, allowed, &file.path)?;
        checked.push((relative, file.content));
    }
    let mut written = Vec::new();
    for (relative, content) in checked {
        crate::file::write_atomic(&workspace.join(&relative), content.as_bytes()).map_err(
            |source| EndpointError::Write {
                path: relative.clone(),
                source,
            },
        )?;
        written.push(relative);
    }
    Ok(ChatOutcome {
        written,
        summary: answer.summary,
    })
}

/// The workspace-relative path `given` names, if the stage may write it.
pub(crate) fn contained(
    workspace: &Path,
    allowed: &[String],
    given: &str,
) -> Result<String, EndpointError> {
    let refuse = |why| EndpointError::RefusedPath {
        path: given.to_owned(),
        why,
    };
    let path = Path::new(given);
    if path
        .components()
        .any(|component| matches!(component, Component::ParentDir))
    {
        return Err(refuse("`..` is not allowed"));
    }
    let relative = if path.is_absolute() {
        // The prompt lists outputs by absolute path, so an answer may too.
        path.strip_prefix(workspace)
            .map_err(|_| refuse("an absolute path outside the workspace"))?
    } else {
        path
    };
    let relative: PathBuf = relative
        .components()
        .filter(|component| matches!(component, Component::Normal(_)))
        .collect();
    let text = relative.to_string_lossy().into_owned();
    let declared = |candidate: &str| {
        allowed.iter().any(|allowed| {
            allowed == candidate
                || (allowed.ends_with('/') && candidate.starts_with(allowed.as_str()))
        })
    };
    let text = if declared(&text) {
        text
    } else if declared(&format!("outputs/{text}")) {
        format!("outputs/{text}")
    } else {
        return Err(refuse("not one of the stage's declared outputs"));
    };
    // Every existing step from the workspace down must be a real directory
    // (and the file itself not a link): a symlink could lead anywhere.
    let mut current = workspace.to_path_buf();
    for component in Path::new(&text).components() {
        current.push(component);
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                return Err(refuse("it passes through a symlink"));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(text)
}

/// `GET {base_url}/models`, for `baton agents check`: the model ids the
/// server lists, or why it could not be asked.
///
/// # Errors
///
/// The server is unreachable, slow, answers an error status, or not JSON.
pub async fn models(
    base_url: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let mut builder = reqwest::Client::new().get(&url).timeout(timeout);
    if let Some(key) = api_key {
        builder = builder.bearer_auth(key);
    }
    let response = builder
        .send()
        .await
        .map_err(|error| format!("cannot reach {url}: {error}"))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|error| format!("cannot read the answer of {url}: {error}"))?;
    if !status.is_success() {
        return Err(format!(
            "{url} answered HTTP {}: {}",
            status.as_u16(),
            error_message(&text)
        ));
    }
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|_| format!("{url} did not answer JSON"))?;
    Ok(json
        .pointer("/data")
        .and_then(serde_json::Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(|model| model.get("id").and_then(serde_json::Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_declared_paths_inside_the_workspace() {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path();
        let allowed = vec!["outputs/a.json".to_owned(), "outputs/dir/".to_owned()];
        let ok = |given: &str| contained(root, &allowed, given).unwrap();
        assert_eq!(ok("outputs/a.json"), "outputs/a.json");
        assert_eq!(ok("a.json"), "outputs/a.json");
        assert_eq!(ok("./outputs/a.json"), "outputs/a.json");
        assert_eq!(
            ok(&format!("{}/outputs/a.json", root.display())),
            "outputs/a.json"
        );
        assert_eq!(ok("outputs/dir/x/y.txt"), "outputs/dir/x/y.txt");
        let refused = |given: &str| contained(root, &allowed, given).unwrap_err().to_string();
        assert!(refused("outputs/b.json").contains("not one of the stage's declared outputs"));
        assert!(refused("outputs/dir/../../etc/passwd").contains("`..`"));
        assert!(refused("/etc/passwd").contains("outside the workspace"));
        std::fs::create_dir_all(root.join("outputs")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("outputs/dir")).unwrap();
        assert!(refused("outputs/dir/x.txt").contains("symlink"));
    }

    #[test]
    fn answers_are_read_tolerantly() {
        let body = |content: &str| {
            json!({"choices": [{"message": {"content": content}}], "extra": 1}).to_string()
        };
        let answer = parse_answer(&body(
            "```json\n{\"files\":[{\"path\":\"a\",\"content\":\"x\"}]}\n```",
        ))
        .unwrap();
        assert_eq!(answer.files.len(), 1);
        assert!(parse_answer("{}").is_err());
        assert!(parse_answer(&body("no json here")).is_err());
        assert_eq!(
            error_message(r#"{"error":{"message":"model not loaded"}}"#),
            "model not loaded"
        );
        assert_eq!(error_message("plain failure"), "plain failure");
    }
}
