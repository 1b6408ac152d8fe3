use super::*;
use crate::profile::Config;

fn parse(profile: &str, stdout: &str) -> Option<Usage> {
    let config = Config::builtin();
    parse_usage(config.profile(profile).unwrap().output.as_ref(), stdout)
}

#[test]
fn claude_final_result() {
    let stdout = concat!(
        r#"{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5"}"#,
        "\n",
        r#"{"type":"assistant","message":{"usage":{"input_tokens":1,"output_tokens":2}}}"#,
        "\n",
        r#"{"type":"result","is_error":false,"num_turns":3,"session_id":"s-1","total_cost_usd":0.0123,"usage":{"input_tokens":1200,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":80}}"#,
        "\n",
    );
    let usage = parse("claude", stdout).unwrap();
    assert_eq!(usage.input_tokens, Some(1200));
    assert_eq!(usage.output_tokens, Some(80));
    assert_eq!(usage.cache_read_tokens, Some(4000));
    assert_eq!(usage.cache_write_tokens, Some(300));
    assert_eq!(usage.cost_usd, Some(0.0123));
    assert_eq!(usage.turns, Some(3));
    assert_eq!(usage.session_id.as_deref(), Some("s-1"));
}

#[test]
fn codex_events_are_summed_and_priced() {
    let stdout = concat!(
        r#"{"type":"thread.started","thread_id":"t-9"}"#,
        "\n",
        r#"{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":3000,"output_tokens":50}}"#,
        "\n",
        "not json at all\n",
        r#"{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":1000,"output_tokens":30}}"#,
        "\n",
    );
    let mut usage = parse("codex", stdout).unwrap();
    assert_eq!(usage.input_tokens, Some(1200));
    assert_eq!(usage.cache_read_tokens, Some(4000));
    assert_eq!(usage.output_tokens, Some(80));
    assert_eq!(usage.session_id.as_deref(), Some("t-9"));
    assert_eq!(usage.cost_usd, None);
    let config = Config::from_toml(
        "[pricing]\n\"gpt-5.2-codex\" = { input = 1.25, cached_input = 0.125, output = 10.0 }\n",
    )
    .unwrap();
    usage.price(Some("other-model"), &config.pricing);
    assert_eq!(usage.cost_usd, None, "no price for that model");
    usage.price(Some("gpt-5.2-codex"), &config.pricing);
    let cost = usage.cost_usd.unwrap();
    assert!((cost - 0.0028).abs() < 1e-12, "{cost}");
    assert_eq!(usage.model.as_deref(), Some("gpt-5.2-codex"));
}

#[test]
fn gemini_sums_over_models() {
    // `prompt` counts the cached tokens again; `input` does not.
    let stdout = r#"{"session_id":"g","response":"done","stats":{"models":{"a":{"tokens":{"input":990,"prompt":1000,"candidates":50,"cached":10}},"b":{"tokens":{"input":200,"prompt":200,"candidates":30,"cached":0}}}}}"#;
    let usage = parse("gemini", stdout).unwrap();
    assert_eq!(usage.input_tokens, Some(1190));
    assert_eq!(usage.output_tokens, Some(80));
    assert_eq!(usage.cache_read_tokens, Some(10));
    assert_eq!(usage.session_id.as_deref(), Some("g"));
}

#[test]
fn opencode_steps_with_cost() {
    let step = |cost: f64, input: u64| {
        format!(
            r#"{{"type":"step_finish","sessionID":"ses_1","part":{{"cost":{cost},"tokens":{{"input":{input},"output":40,"cache":{{"read":2000,"write":0}}}}}}}}"#
        )
    };
    let stdout = format!(
        "{}\n{}\n{}\n",
        r#"{"type":"text","sessionID":"ses_1","part":{"text":"done"}}"#,
        step(0.002, 700),
        step(0.0022, 500)
    );
    let usage = parse("opencode", &stdout).unwrap();
    assert_eq!(usage.input_tokens, Some(1200));
    assert_eq!(usage.output_tokens, Some(80));
    assert_eq!(usage.cache_read_tokens, Some(4000));
    assert!((usage.cost_usd.unwrap() - 0.0042).abs() < 1e-12);
    assert_eq!(usage.session_id.as_deref(), Some("ses_1"));
}

#[test]
fn aider_text_reports_are_summed() {
    let stdout = "Applied edit.\nTokens: 12k sent, 1.5k received. Cost: $0.05 message, $0.05 session.\n\
                  Tokens: 800 sent, 100 received. Cost: $0.01 message, $0.06 session.\n";
    let usage = parse("aider", stdout).unwrap();
    assert_eq!(usage.input_tokens, Some(12_800));
    assert_eq!(usage.output_tokens, Some(1600));
    assert!((usage.cost_usd.unwrap() - 0.06).abs() < 1e-12);
}

#[test]
fn openai_chat_response() {
    let stdout = r#"{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":55,"completion_tokens":7}}"#;
    let usage = parse("local-llm", stdout).unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (Some(55), Some(7))
    );
}

#[test]
fn malformed_output_yields_nothing() {
    for profile in [
        "claude",
        "codex",
        "gemini",
        "opencode",
        "aider",
        "local-llm",
    ] {
        for stdout in ["", "garbage\n{not json", "{\"type\":\"result\"}", "[1,2,3]"] {
            assert_eq!(parse(profile, stdout), None, "{profile}: {stdout}");
        }
    }
    assert_eq!(parse_usage(None, "Tokens: 1 sent"), None, "no rules");
    // Wrong types are ignored rather than misread.
    let wrong = r#"{"type":"result","total_cost_usd":"lots","usage":{"input_tokens":"many"}}"#;
    assert_eq!(parse("claude", wrong), None);
}

#[test]
fn a_zero_cost_for_spent_tokens_is_priced() {
    let mut usage = Usage {
        input_tokens: Some(1_000_000),
        output_tokens: Some(0),
        cost_usd: Some(0.0),
        ..Usage::default()
    };
    let pricing = BTreeMap::from([(
        "m".to_owned(),
        Price {
            input: 2.0,
            cached_input: None,
            output: 8.0,
        },
    )]);
    usage.price(Some("m"), &pricing);
    assert_eq!(usage.cost_usd, Some(2.0));
    let mut nothing_spent = Usage {
        cost_usd: Some(0.0),
        ..Usage::default()
    };
    nothing_spent.price(Some("m"), &pricing);
    assert_eq!(nothing_spent.cost_usd, Some(0.0));
}

#[test]
fn which_built_in_profiles_report_their_dollars() {
    let config = Config::builtin();
    let reports = |name: &str| reports_cost(config.profiles[name].output.as_ref());
    // Claude and opencode say what a turn cost; Codex leaves it to
    // [pricing], Gemini CLI reports tokens only.
    assert!(reports("claude"));
    assert!(reports("opencode"));
    assert!(!reports("codex"));
    assert!(!reports("gemini"));
    assert!(!reports_cost(None));
}
