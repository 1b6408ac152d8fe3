//! The OpenAI Responses API (`POST /v1/responses`), as Codex calls it.

use serde_json::{Value, json};

use super::answer::{Answer, CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, new_id, unix_time};
use super::conversation::{Conversation, Tool};
use super::http::Sse;
use super::script::{self, Reply};
use super::tools::Input;

/// The conversation in a Responses request.
pub(super) fn conversation(body: &Value) -> Conversation {
    let mut conversation = Conversation::default();
    conversation.content(&body["instructions"], false);
    if let Some(text) = body["input"].as_str() {
        conversation.user_text(text);
    }
    for item in body["input"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("function_call" | "custom_tool_call") => {
                let name = item["name"].as_str().unwrap_or("");
                conversation.calls.push(name.to_owned());
            }
            Some("message") | None => match item["role"].as_str() {
                Some("user") => conversation.content(&item["content"], true),
                Some("system" | "developer") => conversation.content(&item["content"], false),
                _ => {}
            },
            _ => {}
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        let offered = match tool["type"].as_str() {
            Some("function") => Tool::function(&tool["name"], &tool["parameters"]),
            Some("custom") => Tool::function(&tool["name"], &Value::Null).map(|tool| Tool {
                custom: true,
                ..tool
            }),
            _ => None,
        };
        conversation.tools.extend(offered);
    }
    conversation
}

/// The answer: one response with one output item, streamed when asked.
pub(super) fn answer(body: &Value, conversation: &Conversation) -> Answer {
    let item = match script::next(conversation) {
        Reply::Call(call) => {
            let call_id = new_id("call_");
            match call.input {
                Input::Text(input) => json!({
                    "type": "custom_tool_call", "id": new_id("ctc_"), "call_id": call_id,
                    "name": call.name, "input": input, "status": "completed",
                }),
                Input::Json(arguments) => json!({
                    "type": "function_call", "id": new_id("fc_"), "call_id": call_id,
                    "name": call.name, "arguments": arguments.to_string(), "status": "completed",
                }),
            }
        }
        Reply::Text(text) => json!({
            "type": "message", "id": new_id("msg_"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
    };
    let response = json!({
        "id": new_id("resp_"), "object": "response", "created_at": unix_time(),
        "status": "completed", "model": body["model"].as_str().unwrap_or("fake-model"),
        "output": [item],
        "usage": {
            "input_tokens": INPUT_TOKENS,
            "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        },
    });
    if body["stream"] == true {
        Answer::Stream(stream(response))
    } else {
        Answer::Json(response)
    }
}

/// The response as stream events: created (in progress, empty), the item
/// added (with a text delta for a message) and done, then completed.
fn stream(response: Value) -> Sse {
    let mut sse = Sse::default();
    let item = &response["output"][0];
    let mut created = response.clone();
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    created["usage"] = Value::Null;
    let mut events = vec![
        ("response.created", json!({"response": created})),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        ),
    ];
    if item["type"] == "message" {
        events.push((
            "response.output_text.delta",
            json!({"item_id": item["id"], "output_index": 0, "content_index": 0,
                   "delta": item["content"][0]["text"]}),
        ));
    }
    events.push((
        "response.output_item.done",
        json!({"output_index": 0, "item": item}),
    ));
    events.push(("response.completed", json!({"response": response})));
    for (name, mut data) in events {
        data["type"] = json!(name);
        sse.event(Some(name), &data);
    }
    sse
}
