//! The fake model server, driven over raw TCP in each protocol.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use baton_test_support::model_server::{Mode, ModelServer, WRONG_CONTENT, fake_content};
use serde_json::{Value, json};

/// An answer as read off the wire.
#[derive(Debug)]
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("{error}: {}", self.body))
    }

    /// The `data:` payloads of an event stream, `[DONE]` left out.
    fn events(&self) -> Vec<Value> {
        let data = self
            .body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "));
        data.filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).expect("JSON event data"))
            .collect()
    }
}

fn request_bytes(method: &str, path: &str, body: &str, close: bool) -> Vec<u8> {
    let connection = if close { "close" } else { "keep-alive" };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Connection: {connection}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    [head.as_bytes(), body.as_bytes()].concat()
}

fn connect(server: &ModelServer) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    stream
}

fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("an answer");
    let text = String::from_utf8(bytes).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status");
    Reply {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

fn send(server: &ModelServer, method: &str, path: &str, body: &str) -> Reply {
    let mut stream = connect(server);
    stream
        .write_all(&request_bytes(method, path, body, true))
        .expect("sent");
    read_reply(&mut stream)
}

fn post(server: &ModelServer, path: &str, body: &Value) -> Reply {
    send(server, "POST", path, &body.to_string())
}

/// A prompt listing one file to write, in a directory that does not exist.
fn listed_file() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("x/a.md").display().to_string();
    let prompt = format!("# Task\n\nWrite it.\n\n## Files to write\n\n- {path}\n");
    (dir, path, prompt)
}

fn claude_tools() -> Value {
    json!([
        {"name": "Read", "input_schema": {"properties": {"file_path": {}, "offset": {}}}},
        {"name": "Write", "input_schema": {"properties": {"file_path": {}, "content": {}}}},
        {"name": "Bash", "input_schema": {"properties": {"command": {}, "description": {}}}},
    ])
}

#[test]
fn anthropic_writes_the_listed_file_then_finishes() {
    let server = ModelServer::start();
    let (_dir, path, prompt) = listed_file();
    let user = json!({"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>\ncontext\n</system-reminder>\n"},
        {"type": "text", "text": prompt},
    ]});
    let first = json!({"model": "m", "stream": true, "tools": claude_tools(), "messages": [user]});
    let reply = post(&server, "/v1/messages?beta=true", &first);
    assert!(
        reply.head.contains("content-type: text/event-stream"),
        "{}",
        reply.head
    );
    let events = reply.events();
    assert_eq!(events[1]["content_block"]["name"], "Write");
    let input: Value =
        serde_json::from_str(events[2]["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(
        input,
        json!({"file_path": path, "content": fake_content(&path)})
    );
    assert_eq!(events[3]["type"], "content_block_stop");
    assert_eq!(events[4]["delta"]["stop_reason"], "tool_use");
    assert_eq!(
        events[0]["message"]["usage"]["cache_read_input_tokens"],
        100
    );

    let call = json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "Write", "input": input}]});
    let result = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]});
    let second = json!({"model": "m", "tools": claude_tools(), "messages": [user, call, result]});
    let reply = post(&server, "/v1/messages", &second).json();
    assert_eq!(reply["content"], json!([{"type": "text", "text": "Done."}]));
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(reply["usage"]["input_tokens"], 1234);
    assert_eq!(server.user_prompts(), [prompt.clone(), prompt]);
}

#[test]
fn an_existing_file_is_read_before_it_is_written() {
    let server = ModelServer::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("old.md"), "old\n").expect("written");
    // The relative path is resolved against the working directory the
    // CLI's context names.
    let context = format!("Primary working directory: {}", dir.path().display());
    let path = dir.path().join("old.md").display().to_string();
    let user = json!({"role": "user", "content": "FAKE: write old.md\nFAKE: shell echo hi > x"});
    let mut messages = vec![user];
    let mut calls = Vec::new();
    for _ in 0..4 {
        let body = json!({"system": context, "tools": claude_tools(), "messages": messages});
        let reply = post(&server, "/v1/messages", &body).json();
        let block = reply["content"][0].clone();
        calls.push(block["name"].as_str().unwrap_or("text").to_owned());
        if block["type"] == "tool_use" {
            calls.push(block["input"].to_string());
        }
        messages.push(json!({"role": "assistant", "content": [block]}));
        messages
            .push(json!({"role": "user", "content": [{"type": "tool_result", "content": "ok"}]}));
    }
    let expected_write = json!({"file_path": path, "content": fake_content("old.md")});
    let expected_shell =
        json!({"command": "echo hi > x", "description": "a step of the fake model"});
    assert_eq!(
        calls,
        [
            "Read",
            &json!({"file_path": path}).to_string(),
            "Write",
            &expected_write.to_string(),
            "Bash",
            &expected_shell.to_string(),
            "text",
        ]
    );
}

#[test]
fn responses_write_through_the_shell_or_a_patch() {
    let server = ModelServer::start();
    let (_dir, path, prompt) = listed_file();
    let user = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]});
    let shell = json!({"type": "function", "name": "exec_command", "parameters": {"properties": {"cmd": {}}}});
    let body = json!({"model": "m", "stream": true, "tools": [shell], "input": [user]});
    let events = post(&server, "/v1/responses", &body).events();
    let names: Vec<&str> = events
        .iter()
        .filter_map(|event| event["type"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let item = &events[3]["response"]["output"][0];
    assert_eq!(item["name"], "exec_command");
    let arguments: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    let command = arguments["cmd"].as_str().expect("a command");
    assert!(
        command.contains(&format!("cat > '{path}' <<'BATON_FAKE_EOF'\n")),
        "{command}"
    );
    assert_eq!(
        events[3]["response"]["usage"]["input_tokens_details"]["cached_tokens"],
        100
    );

    let patch = json!({"type": "custom", "name": "apply_patch"});
    let body = json!({"tools": [shell, patch], "input": [user]});
    let item = post(&server, "/v1/responses", &body).json()["output"][0].clone();
    assert_eq!(item["type"], "custom_tool_call");
    let expected = format!(
        "*** Begin Patch\n*** Add File: {path}\n+written by the fake model: {path}\n*** End Patch\n"
    );
    assert_eq!(item["input"], expected);

    let output = json!({"type": "function_call_output", "call_id": "c", "output": "ok"});
    let call =
        json!({"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": ""});
    let body = json!({"tools": [shell, patch], "input": [user, call, output]});
    let item = post(&server, "/v1/responses", &body).json()["output"][0].clone();
    assert_eq!(item["content"][0]["text"], "Done.");
}

fn opencode_tools() -> Value {
    let write =
        json!({"name": "write", "parameters": {"properties": {"content": {}, "filePath": {}}}});
    json!([{"type": "function", "function": write}])
}

#[test]
fn chat_completions_stream_a_tool_call_with_usage() {
    let server = ModelServer::start();
    let (_dir, path, prompt) = listed_file();
    let messages =
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}]);
    let body = json!({"stream": true, "stream_options": {"include_usage": true},
                      "tools": opencode_tools(), "messages": messages});
    let events = post(&server, "/v1/chat/completions", &body).events();
    let call = &events[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "write");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        arguments,
        json!({"filePath": path, "content": fake_content(&path)})
    );
    assert_eq!(events[2]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        events[3]["usage"]["prompt_tokens_details"]["cached_tokens"],
        100
    );

    let mut history = messages.as_array().unwrap().clone();
    history.push(json!({"role": "assistant", "tool_calls": [{"function": {"name": "write"}}]}));
    history.push(json!({"role": "tool", "content": "Wrote file successfully."}));
    let body = json!({"tools": opencode_tools(), "messages": history});
    let reply = post(&server, "/v1/chat/completions", &body).json();
    assert_eq!(reply["choices"][0]["message"]["content"], "Done.");
    assert_eq!(reply["usage"]["completion_tokens"], 56);
}

#[test]
fn structured_chat_requests_get_the_files_as_json() {
    let server = ModelServer::start();
    let (_dir, path, prompt) = listed_file();
    let body = json!({"messages": [{"role": "user", "content": prompt}],
                      "response_format": {"type": "json_schema", "json_schema": {}}});
    let reply = post(&server, "/v1/chat/completions", &body).json();
    let content = reply["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    let answer: Value = serde_json::from_str(content).expect("JSON content");
    assert_eq!(
        answer["files"],
        json!([{"path": path, "content": fake_content(&path)}])
    );
    assert!(answer["summary"].is_string());
}

#[test]
fn gemini_calls_write_file_and_answers_side_calls_with_json() {
    let server = ModelServer::start();
    let (_dir, path, prompt) = listed_file();
    let write = json!({"name": "write_file", "parametersJsonSchema": {"properties": {"file_path": {}, "content": {}}}});
    let user = json!({"role": "user", "parts": [{"text": "<session_context>\nx\n</session_context>"}, {"text": prompt}]});
    let body = json!({"contents": [user], "tools": [{"functionDeclarations": [write]}]});
    let reply = post(
        &server,
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        &body,
    );
    let events = reply.events();
    let part = &events[0]["candidates"][0]["content"]["parts"][0];
    assert_eq!(
        part["functionCall"],
        json!({"name": "write_file", "args": {"file_path": path, "content": fake_content(&path)}})
    );
    assert_eq!(events[0]["usageMetadata"]["cachedContentTokenCount"], 100);

    let call = json!({"role": "model", "parts": [part]});
    let result = json!({"role": "user", "parts": [{"functionResponse": {"name": "write_file", "response": {}}}]});
    let body =
        json!({"contents": [user, call, result], "tools": [{"functionDeclarations": [write]}]});
    let reply = post(&server, "/v1beta/models/m:generateContent", &body).json();
    assert_eq!(
        reply["candidates"][0]["content"]["parts"][0]["text"],
        "Done."
    );

    let schema = json!({"type": "OBJECT", "properties": {"complexity_score": {"type": "INTEGER"}}});
    let config = json!({"responseMimeType": "application/json", "responseJsonSchema": schema});
    let body = json!({"contents": [user], "generationConfig": config});
    let reply = post(&server, "/v1beta/models/m:generateContent", &body).json();
    let text = reply["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .expect("text");
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"complexity_score": 1})
    );
    assert_eq!(
        post(&server, "/v1beta/models/m:countTokens", &json!({})).json()["totalTokens"],
        42
    );
}

#[test]
fn prompts_arrive_byte_for_byte() {
    let server = ModelServer::start();
    let prompt: String = "## Größe — 大きい prompt ✓\n".repeat(8_000);
    assert!(prompt.len() > 200_000);
    let claude = json!({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>x</system-reminder>"}, {"type": "text", "text": prompt}]}]});
    post(&server, "/v1/messages", &claude);
    let codex = json!({"input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}]});
    post(&server, "/v1/responses", &codex);
    post(
        &server,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": prompt}]}),
    );
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": prompt}]}]});
    post(&server, "/v1beta/models/m:generateContent", &gemini);
    let prompts = server.user_prompts();
    assert_eq!(prompts.len(), 4);
    assert!(prompts.iter().all(|arrived| *arrived == prompt));
}

#[test]
fn failures_are_injected_in_each_protocols_shape() {
    let server = ModelServer::start();
    server.set_mode(Mode::Status(500));
    let reply = post(&server, "/v1/messages", &json!({}));
    assert_eq!(reply.status, 500);
    assert_eq!(
        reply.json(),
        json!({"type": "error", "error": {"type": "api_error", "message": "fake internal server error"}})
    );
    server.set_mode(Mode::Status(429));
    let reply = post(&server, "/v1/chat/completions", &json!({}));
    assert_eq!(reply.status, 429);
    assert!(reply.head.contains("retry-after: 1"), "{}", reply.head);
    assert_eq!(reply.json()["error"]["type"], "rate_limit_exceeded");
    let reply = post(
        &server,
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        &json!({}),
    );
    assert_eq!(reply.json()["error"]["status"], "RESOURCE_EXHAUSTED");
    // Listings and token counts are not model calls.
    assert_eq!(send(&server, "GET", "/v1/models", "").status, 200);
    assert_eq!(
        post(&server, "/v1/messages/count_tokens", &json!({})).status,
        200
    );

    server.set_mode(Mode::Garbage);
    let reply = post(&server, "/v1/responses", &json!({}));
    assert_eq!(reply.status, 200);
    assert!(serde_json::from_str::<Value>(&reply.body).is_err());

    server.set_mode(Mode::Drop);
    let mut stream = connect(&server);
    stream
        .write_all(&request_bytes("POST", "/v1/messages", "{}", false))
        .expect("sent");
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    assert!(bytes.is_empty());
    let modes: Vec<Option<Mode>> = server
        .requests()
        .iter()
        .map(|request| request.mode)
        .collect();
    assert_eq!(modes.last(), Some(&Some(Mode::Drop)));
}

/// A conversation continued with a correction prompt: the first write of
/// the file was wrong (as the server was told), the correction's `## Files
/// to correct` rewrites it right, then its log is written as JSON.
#[test]
fn a_continued_conversation_corrects_a_file_written_wrong() {
    let server = ModelServer::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("r.json").display().to_string();
    let log = dir.path().join("c/corrections.json").display().to_string();
    server.write_wrong_first("/r.json");
    let first = json!({"role": "user", "content": format!("## Files to write\n\n- {path}\n")});
    let mut messages = vec![first];
    let mut writes = Vec::new();
    for turn in 0..6 {
        if turn == 2 {
            let correction = format!(
                "Fix it.\n\n## Files to correct\n\n- {path}\n\n## Files to write\n\n- {log}\n"
            );
            messages.push(json!({"role": "user", "content": correction}));
        }
        let body = json!({"tools": claude_tools(), "messages": messages});
        let block = post(&server, "/v1/messages", &body).json()["content"][0].clone();
        if block["name"] == "Write" {
            writes.push(block["input"].clone());
            let input = &block["input"];
            std::fs::create_dir_all(
                std::path::Path::new(input["file_path"].as_str().unwrap())
                    .parent()
                    .unwrap(),
            )
            .unwrap();
            std::fs::write(
                input["file_path"].as_str().unwrap(),
                input["content"].as_str().unwrap(),
            )
            .unwrap();
        }
        messages.push(json!({"role": "assistant", "content": [block]}));
        messages
            .push(json!({"role": "user", "content": [{"type": "tool_result", "content": "ok"}]}));
    }
    assert_eq!(
        writes,
        [
            json!({"file_path": path, "content": WRONG_CONTENT}),
            json!({"file_path": path, "content": fake_content(&path)}),
            json!({"file_path": log, "content": fake_content(&log)}),
        ]
    );
    let object: Value = serde_json::from_str(&fake_content(&path)).expect("JSON");
    assert!(object.is_object(), "{object}");
    let entries: Value = serde_json::from_str(&fake_content(&log)).expect("JSON");
    assert!(entries[0]["finding_id"].is_string() && entries[0]["change"].is_string());
}

#[test]
fn fail_after_lets_some_calls_through_first() {
    let server = ModelServer::start();
    server.fail_after(2, 1, Mode::Status(429));
    let statuses: Vec<u16> = (0..4)
        .map(|_| post(&server, "/v1/chat/completions", &json!({"messages": []})).status)
        .collect();
    assert_eq!(statuses, [200, 200, 429, 200]);
}

#[test]
fn fail_next_fails_that_many_then_recovers() {
    let server = ModelServer::start();
    server.fail_next(2, Mode::Status(429));
    let statuses: Vec<u16> = (0..3)
        .map(|_| post(&server, "/v1/chat/completions", &json!({"messages": []})).status)
        .collect();
    assert_eq!(statuses, [429, 429, 200]);
}

#[test]
fn a_hanging_call_holds_only_its_own_connection() {
    let server = ModelServer::start();
    server.set_mode(Mode::Hang);
    let mut hanging = connect(&server);
    hanging
        .write_all(&request_bytes("POST", "/v1/messages", "{}", true))
        .expect("sent");
    hanging
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("a timeout");
    let mut byte = [0; 1];
    assert!(hanging.read(&mut byte).is_err(), "no answer while hanging");
    assert_eq!(send(&server, "GET", "/models", "").status, 200);
    // Dropping the server releases the hanging connection.
    hanging
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("a timeout");
    drop(server);
    assert!(matches!(hanging.read(&mut byte), Ok(0) | Err(_)));
}

#[test]
fn keep_alive_and_chunked_requests_are_served() {
    let server = ModelServer::start();
    let mut stream = connect(&server);
    let body = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    stream
        .write_all(&request_bytes("POST", "/v1/chat/completions", &body, false))
        .expect("sent");
    let (half, rest) = body.split_at(10);
    let chunked = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         {:x}\r\n{half}\r\n{:x}\r\n{rest}\r\n0\r\n\r\n",
        half.len(),
        rest.len()
    );
    stream.write_all(chunked.as_bytes()).expect("sent");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("two answers");
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert_eq!(server.user_prompts(), ["hi", "hi"]);
    assert_eq!(
        server.requests()[1].body,
        serde_json::from_str::<Value>(&body).unwrap()
    );
}

#[test]
fn requests_are_kept_and_logged() {
    let server = ModelServer::start();
    let reply = send(&server, "GET", "/nowhere", "");
    assert_eq!(reply.status, 404);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nowhere")
    );
    post(&server, "/v1/messages", &json!({"messages": []}));
    let requests = server.requests();
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].mode, None);
    assert_eq!(requests[1].header("content-type"), Some("application/json"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("requests.jsonl");
    server.write_log(&log).expect("written");
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .expect("read")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(lines[1]["path"], "/v1/messages");
    assert_eq!(lines[1]["mode"], "ok");
}
