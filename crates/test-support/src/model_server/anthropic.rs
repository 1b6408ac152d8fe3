//! The Anthropic Messages API (`POST /v1/messages`), as Claude Code calls it.

use serde_json::{Value, json};

use super::answer::{Answer, CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, new_id};
use super::conversation::{Conversation, Tool};
use super::http::Sse;
use super::script::{self, Reply};

/// The conversation in a Messages request.
pub(super) fn conversation(body: &Value) -> Conversation {
    let mut conversation = Conversation::default();
    conversation.content(&body["system"], false);
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("");
        if role == "assistant" {
            let blocks = message["content"].as_array().into_iter().flatten();
            let calls = blocks.filter(|block| block["type"] == "tool_use");
            let names = calls.filter_map(|block| block["name"].as_str());
            conversation.calls.extend(names.map(str::to_owned));
        } else {
            conversation.content(&message["content"], role == "user");
        }
    }
    let tools = body["tools"].as_array().into_iter().flatten();
    let tools = tools.filter_map(|tool| Tool::function(&tool["name"], &tool["input_schema"]));
    conversation.tools = tools.collect();
    conversation
}

/// The answer: one message, as an event stream when `stream` is set.
pub(super) fn answer(body: &Value, conversation: &Conversation) -> Answer {
    let (block, stop) = match script::next(conversation) {
        Reply::Call(call) => (
            json!({"type": "tool_use", "id": new_id("toolu_"), "name": call.name,
                   "input": call.input.to_value()}),
            "tool_use",
        ),
        Reply::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
    };
    let usage = json!({
        "input_tokens": INPUT_TOKENS,
        "output_tokens": OUTPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": CACHED_TOKENS,
    });
    let message = json!({
        "id": new_id("msg_"), "type": "message", "role": "assistant",
        "model": body["model"].as_str().unwrap_or("fake-model"),
        "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage,
    });
    if body["stream"] == true {
        Answer::Stream(stream(message))
    } else {
        Answer::Json(message)
    }
}

/// The message as Messages stream events: the message without content,
/// its one block (started empty, then a delta), the stop reason.
fn stream(message: Value) -> Sse {
    let mut sse = Sse::default();
    let block = &message["content"][0];
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    sse.event(
        Some("message_start"),
        &json!({"type": "message_start", "message": start}),
    );
    let (empty, delta) = if block["type"] == "tool_use" {
        (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
        )
    } else {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        )
    };
    let events = [
        (
            "content_block_start",
            json!({"index": 0, "content_block": empty}),
        ),
        ("content_block_delta", json!({"index": 0, "delta": delta})),
        ("content_block_stop", json!({"index": 0})),
        (
            "message_delta",
            json!({"delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
                   "usage": {"output_tokens": OUTPUT_TOKENS}}),
        ),
        ("message_stop", json!({})),
    ];
    for (name, mut data) in events {
        data["type"] = json!(name);
        sse.event(Some(name), &data);
    }
    sse
}

/// An Anthropic error body.
pub(super) fn error(status: u16, message: &str) -> Value {
    let kind = match status {
        429 => "rate_limit_error",
        529 => "overloaded_error",
        400 => "invalid_request_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
