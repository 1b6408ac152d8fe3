//! OpenAI Chat Completions (`POST /v1/chat/completions`), as opencode and
//! baton's own `openai-chat` profiles call it.

use serde_json::{Value, json};

use super::answer::{Answer, CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, new_id, unix_time};
use super::conversation::{Conversation, Tool};
use super::http::Sse;
use super::script::{self, Reply};

/// The conversation in a Chat Completions request.
pub(super) fn conversation(body: &Value) -> Conversation {
    let mut conversation = Conversation::default();
    for message in body["messages"].as_array().into_iter().flatten() {
        match message["role"].as_str() {
            Some("user") => conversation.content(&message["content"], true),
            Some("system" | "developer") => conversation.content(&message["content"], false),
            Some("assistant") => {
                let calls = message["tool_calls"].as_array().into_iter().flatten();
                let names = calls.filter_map(|call| call["function"]["name"].as_str());
                conversation.calls.extend(names.map(str::to_owned));
            }
            _ => {}
        }
    }
    let tools = body["tools"].as_array().into_iter().flatten();
    let tools = tools.filter_map(|tool| {
        let function = &tool["function"];
        Tool::function(&function["name"], &function["parameters"])
    });
    conversation.tools = tools.collect();
    conversation
}

/// The answer: a completion, streamed as chunks when asked. A request for
/// JSON output (`response_format`) gets baton's structured answer: every
/// file the prompt asks for, and a summary.
pub(super) fn answer(body: &Value, conversation: &Conversation) -> Answer {
    let structured = matches!(
        body["response_format"]["type"].as_str(),
        Some("json_schema" | "json_object")
    );
    let (message, finish) = if structured {
        let files = script::files(&conversation.text);
        let summary = format!("the fake model wrote {} files", files.len());
        let files: Vec<Value> = files
            .into_iter()
            .map(|(path, content)| json!({"path": path, "content": content}))
            .collect();
        let content = json!({"files": files, "summary": summary}).to_string();
        (json!({"role": "assistant", "content": content}), "stop")
    } else {
        match script::next(conversation) {
            Reply::Call(call) => (
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": new_id("call_"), "type": "function",
                    "function": {"name": call.name, "arguments": call.input.to_json_text()},
                }]}),
                "tool_calls",
            ),
            Reply::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        }
    };
    let usage = json!({
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
    });
    let base = json!({
        "id": new_id("chatcmpl-"), "created": unix_time(),
        "model": body["model"].as_str().unwrap_or("fake-model"),
    });
    if body["stream"] != true {
        let mut completion = base;
        completion["object"] = json!("chat.completion");
        completion["choices"] = json!([{"index": 0, "message": message, "finish_reason": finish}]);
        completion["usage"] = usage;
        return Answer::Json(completion);
    }
    let with_usage = body["stream_options"]["include_usage"] == true;
    Answer::Stream(stream(base, &message, finish, with_usage.then_some(usage)))
}

/// The completion as chunks: the role, the content or the tool call, the
/// finish reason, the usage (when asked for), then `[DONE]`.
fn stream(base: Value, message: &Value, finish: &str, usage: Option<Value>) -> Sse {
    let chunk = |choices: Value| {
        let mut chunk = base.clone();
        chunk["object"] = json!("chat.completion.chunk");
        chunk["choices"] = choices;
        chunk
    };
    let delta = |delta: Value, finish: Value| {
        chunk(json!([{"index": 0, "delta": delta, "finish_reason": finish}]))
    };
    let mut sse = Sse::default();
    sse.event(
        None,
        &delta(json!({"role": "assistant", "content": ""}), Value::Null),
    );
    let body = if let Some(call) = message["tool_calls"].get(0) {
        let mut call = call.clone();
        call["index"] = json!(0);
        json!({"tool_calls": [call]})
    } else {
        json!({"content": message["content"]})
    };
    sse.event(None, &delta(body, Value::Null));
    sse.event(None, &delta(json!({}), json!(finish)));
    if let Some(usage) = usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage;
        sse.event(None, &last);
    }
    sse.data("[DONE]");
    sse
}

/// An OpenAI error body (Chat Completions and Responses share it).
pub(super) fn error(status: u16, message: &str) -> Value {
    let kind = match status {
        429 => "rate_limit_exceeded",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}
