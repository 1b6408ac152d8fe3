//! The Gemini API (`POST /v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent`), as Gemini CLI calls it.

use serde_json::{Map, Value, json};

use super::answer::{Answer, CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS};
use super::conversation::{Conversation, Tool};
use super::http::Sse;
use super::script::{self, Reply};

/// The conversation in a `generateContent` request.
pub(super) fn conversation(body: &Value) -> Conversation {
    let mut conversation = Conversation::default();
    conversation.content(&body["systemInstruction"]["parts"], false);
    for content in body["contents"].as_array().into_iter().flatten() {
        let parts = &content["parts"];
        if content["role"] == "model" {
            let calls = parts.as_array().into_iter().flatten();
            let names = calls.filter_map(|part| part["functionCall"]["name"].as_str());
            conversation.calls.extend(names.map(str::to_owned));
        } else {
            conversation.content(parts, true);
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        let declarations = tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten();
        let tools = declarations.filter_map(|declaration| {
            let schema = match &declaration["parametersJsonSchema"] {
                Value::Null => &declaration["parameters"],
                schema => schema,
            };
            Tool::function(&declaration["name"], schema)
        });
        conversation.tools.extend(tools);
    }
    conversation
}

/// The answer: one candidate. `stream` is for `:streamGenerateContent`,
/// `sse` for its `alt=sse` form (else the stream is a JSON array).
pub(super) fn answer(body: &Value, conversation: &Conversation, stream: bool, sse: bool) -> Answer {
    let config = &body["generationConfig"];
    let part = if conversation.tools.is_empty() && config["responseMimeType"] == "application/json"
    {
        // Side calls (model routing, next-speaker checks) parse their JSON.
        let schema = match &config["responseJsonSchema"] {
            Value::Null => &config["responseSchema"],
            schema => schema,
        };
        json!({"text": side_answer(schema).to_string()})
    } else {
        match script::next(conversation) {
            Reply::Call(call) => {
                json!({"functionCall": {"name": call.name, "args": call.input.to_value()}})
            }
            Reply::Text(text) => json!({"text": text}),
        }
    };
    let response = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": INPUT_TOKENS,
            "candidatesTokenCount": OUTPUT_TOKENS,
            "cachedContentTokenCount": CACHED_TOKENS,
            "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS,
        },
        "modelVersion": "fake-model",
    });
    match (stream, sse) {
        (true, true) => {
            let mut events = Sse::default();
            events.event(None, &response);
            Answer::Stream(events)
        }
        (true, false) => Answer::Json(json!([response])),
        (false, _) => Answer::Json(response),
    }
}

/// A JSON answer for a side call: the fields its schema asks for, with
/// values that send Gemini CLI on its way (the user speaks next, the
/// flash model, the lowest complexity).
fn side_answer(schema: &Value) -> Value {
    let known = json!({
        "next_speaker": "user", "model_choice": "flash", "complexity_score": 1,
        "reasoning": "fake", "complexity_reasoning": "fake",
    });
    if schema.is_null() {
        return known;
    }
    from_schema(schema, &known)
}

fn from_schema(schema: &Value, known: &Value) -> Value {
    if let Some(first) = schema["enum"].get(0) {
        return first.clone();
    }
    let kind = schema["type"]
        .as_str()
        .unwrap_or("object")
        .to_ascii_lowercase();
    match kind.as_str() {
        "object" => {
            let properties = schema["properties"].as_object().into_iter().flatten();
            let fields = properties.map(|(key, property)| {
                let value = match &known[key] {
                    Value::Null => from_schema(property, known),
                    value => value.clone(),
                };
                (key.clone(), value)
            });
            Value::Object(fields.collect::<Map<_, _>>())
        }
        "array" => json!([]),
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        _ => json!("fake"),
    }
}

/// A Gemini error body.
pub(super) fn error(status: u16, message: &str) -> Value {
    let name = match status {
        400 => "INVALID_ARGUMENT",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        500 => "INTERNAL",
        _ => "UNAVAILABLE",
    };
    json!({"error": {"code": status, "message": message, "status": name}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_answers_fill_the_schema() {
        let schema = json!({"type": "OBJECT", "properties": {
            "complexity_reasoning": {"type": "STRING"},
            "complexity_score": {"type": "INTEGER"},
            "mood": {"type": "STRING", "enum": ["calm", "busy"]},
        }});
        assert_eq!(
            side_answer(&schema),
            json!({"complexity_reasoning": "fake", "complexity_score": 1, "mood": "calm"})
        );
    }
}
