//! `baton serve` as a person and a script meet it: a real server process
//! on a free port of a scratch project, asked over plain HTTP.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use baton_test_support::http::{Response, request};
use serde_json::Value;

use crate::baton;
use crate::serving::{HEADER, Server, cli_json, gate_workflow, project, spawn_run, token};

/// The headers every answer carries, whatever its status.
fn assert_secured(response: &Response) {
    let csp = response
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("no CSP: {response:?}"));
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(response.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(response.header("referrer-policy"), Some("same-origin"));
    assert_eq!(response.header("x-frame-options"), Some("DENY"));
}

#[test]
fn the_api_answers_with_what_the_cli_prints_as_json() {
    let dir = project(&gate_workflow());
    let outcome = cli_json(dir.path(), &["run", "wf.yaml", "--json"]);
    assert_eq!(outcome["status"], "awaiting_human");
    let run = outcome["run_id"].as_str().expect("run_id");
    let server = Server::start(dir.path());

    let runs = server.get("/api/runs");
    assert_eq!(runs.status, 200, "{runs:?}");
    assert_secured(&runs);
    assert_eq!(
        runs.json(),
        cli_json(dir.path(), &["runs", "--format", "json"])
    );

    let status = server.get(&format!("/api/runs/{run}"));
    assert_eq!(status.status, 200, "{status:?}");
    assert_eq!(
        status.json(),
        cli_json(dir.path(), &["status", run, "--format", "json"])
    );

    let log = server.get(&format!("/api/runs/{run}/stages/review/log"));
    assert_eq!(log.status, 200, "{log:?}");
    assert!(log.body.contains("reviewed-here"), "{log:?}");

    for path in [
        "/api/runs/no-such-run".to_owned(),
        format!("/api/runs/{run}/stages/no-such-stage/log"),
    ] {
        let missing = server.get(&path);
        assert_eq!(missing.status, 404, "{missing:?}");
        assert!(missing.json()["error"].is_string(), "{missing:?}");
        assert_secured(&missing);
    }
}

#[test]
fn writes_need_a_valid_token_and_every_request_the_server_s_own_host() {
    let dir = project(&gate_workflow());
    let run = cli_json(dir.path(), &["run", "wf.yaml", "--json"])["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();
    let alice = token(dir.path(), "alice");
    let server = Server::start(dir.path());
    let approve = format!("/api/runs/{run}/gates/review/approve");

    let anonymous = server.post(&approve, &[], "");
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert!(anonymous.json()["error"].is_string());
    assert_secured(&anonymous);
    let forged = server.post(&approve, &[("Authorization", "Bearer baton_00")], "");
    assert_eq!(forged.status, 401, "{forged:?}");

    let bearer = format!("Bearer {alice}");
    let rebound = request(
        &server.address,
        "GET",
        "/api/runs",
        &[("Host", "attacker.example")],
        "",
    );
    assert_eq!(rebound.status, 403, "{rebound:?}");
    assert_secured(&rebound);
    let port = server.address.rsplit(':').next().expect("a port");
    let wrong_port = request(
        &server.address,
        "GET",
        "/",
        &[(
            "Host",
            &format!("localhost:{}", port.parse::<u16>().unwrap() ^ 1),
        )],
        "",
    );
    assert_eq!(wrong_port.status, 403, "{wrong_port:?}");
    let by_name = request(
        &server.address,
        "GET",
        "/api/runs",
        &[("Host", &format!("localhost:{port}"))],
        "",
    );
    assert_eq!(by_name.status, 200, "{by_name:?}");

    let cross_site = server.post(
        &approve,
        &[
            ("Authorization", &bearer),
            ("Origin", "http://attacker.example"),
        ],
        "",
    );
    assert_eq!(cross_site.status, 403, "{cross_site:?}");
    // Refused, nothing was recorded.
    let gates = &cli_json(dir.path(), &["status", &run, "--json"])["gates"];
    assert_eq!(gates[0]["status"], "awaiting", "{gates}");

    // Once revoked, the token opens nothing.
    assert_eq!(baton(dir.path(), &["token", "revoke", "alice"]).code, 0);
    let revoked = server.post(&approve, &[("Authorization", &bearer)], "");
    assert_eq!(revoked.status, 401, "{revoked:?}");
}

#[test]
fn a_gate_approved_through_the_api_lets_the_waiting_run_succeed() {
    let dir = project(&gate_workflow());
    let alice = token(dir.path(), "alice");
    let server = Server::start(dir.path());
    let waiting = spawn_run(dir.path());
    let run = server.newest_run_once("awaiting_human");

    let origin = format!("http://{}", server.address);
    let bearer = format!("Bearer {alice}");
    let approve = format!("/api/runs/{run}/gates/review/approve");
    let approved = server.post(
        &approve,
        &[
            ("Authorization", &bearer),
            ("Origin", &origin),
            ("Content-Type", "application/json"),
        ],
        r#"{"comment": "looks right"}"#,
    );
    assert_eq!(approved.status, 200, "{approved:?}");
    let decision = approved.json();
    assert_eq!(decision["decision"], "approve");
    assert_eq!(decision["decided_by"], "alice");
    assert_eq!(decision["comment"], "looks right");
    assert_eq!(decision["run_id"], run.as_str());

    let output = waiting.wait_with_output().expect("the run ends");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let outcome: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(outcome["status"], "success");
    let status = server.get(&format!("/api/runs/{run}")).json();
    assert_eq!(status["status"], "success");
    assert_eq!(status["gates"][0]["decided_by"], "alice");
    assert_eq!(status["gates"][0]["comment"], "looks right");

    let again = server.post(&approve, &[("Authorization", &bearer)], "");
    assert_eq!(again.status, 409, "{again:?}");
    assert!(
        again.json()["error"]
            .as_str()
            .is_some_and(|error| error.contains("alice")),
        "{again:?}"
    );
}

#[test]
fn a_push_back_through_the_api_runs_the_gate_s_stage_again_for_the_waiting_run() {
    let workflow = gate_workflow().replace(
        "      echo reviewed-here\n",
        "      echo \"reviewed-here attempt $BATON_ATTEMPT: ${BATON_PUSH_BACK:-first}\" >> \"$BATON_PROJECT_DIR/seen.txt\"\n",
    );
    let dir = project(&workflow);
    let alice = token(dir.path(), "alice");
    let server = Server::start(dir.path());
    let waiting = spawn_run(dir.path());
    let run = server.newest_run_once("awaiting_human");
    let bearer = format!("Bearer {alice}");
    let push_back = format!("/api/runs/{run}/gates/review/push-back");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
    ];

    let bare = server.post(&push_back, &headers, "");
    assert_eq!(bare.status, 400, "{bare:?}");
    let pushed = server.post(&push_back, &headers, r#"{"comment": "add the index"}"#);
    assert_eq!(pushed.status, 200, "{pushed:?}");
    assert_eq!(pushed.json()["decision"], "push_back");
    assert_eq!(pushed.json()["decided_by"], "alice");

    // The waiting run runs the stage again, the comment in its environment,
    // and waits at the gate for a decision on what it wrote this time.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = server.get(&format!("/api/runs/{run}")).json();
        let gate = &status["gates"][0];
        if status["stages"][0]["attempts"] == 2
            && gate["status"] == "awaiting"
            && status["status"] == "awaiting_human"
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stage did not run again: {status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = std::fs::read_to_string(dir.path().join("seen.txt")).expect("the script ran");
    assert_eq!(
        seen,
        "reviewed-here attempt 1: first\nreviewed-here attempt 2: add the index\n"
    );
    let approve = format!("/api/runs/{run}/gates/review/approve");
    assert_eq!(server.post(&approve, &headers, "").status, 200);
    let output = waiting.wait_with_output().expect("the run ends");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_stage_s_page_shows_its_outputs_prompt_findings_and_log_as_text() {
    let fake = std::path::Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    let profile = |name: &str, env: &str| {
        format!(
            "[profiles.{name}]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n{env}\n",
            fake.display()
        )
    };
    let workflow = format!(
        "{HEADER}  - name: plan
    kind: execute
    description: d
    executor: inline
    script: |
      echo '<script>alert(1)</script> from-the-log'
      printf '%s' '[{{\"id\": \"<b>x</b>\"}}]' > outputs/plan.json
    writes_to: [plan.json]
    validation: {{strategy: unit}}
  - name: draft
    kind: execute
    description: Write the draft.
    agent: {{role: writer}}
    writes_to: [draft.md]
  - name: leak
    kind: execute
    description: d
    executor: inline
    script: ln -s /etc/passwd outputs/leak.txt
    writes_to: [leak.txt]
    required: false
"
    );
    let dir = project(&workflow);
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "[agents.default]\nprofile = \"fake\"\n\n[agents.validator]\nprofile = \"validator\"\n\n{}{}",
            profile("fake", ""),
            profile("validator", "env = { BATON_FAKE_AGENT = \"findings minor\" }")
        ),
    )
    .expect("write baton.toml");
    let run = baton(dir.path(), &["run", "wf.yaml", "--json"]);
    let outcome: Value = serde_json::from_str(&run.stdout).expect("json");
    let id = outcome["run_id"].as_str().expect("run id").to_owned();
    let server = Server::start(dir.path());

    let run_page = server.get(&format!("/runs/{id}"));
    assert!(
        run_page
            .body
            .contains(&format!("href=\"/runs/{id}/stages/plan\"")),
        "the stages table links each stage: {}",
        run_page.body
    );
    let plan = server.get(&format!("/runs/{id}/stages/plan"));
    assert_eq!(plan.status, 200, "{plan:?}");
    assert_secured(&plan);
    for shown in [
        "&lt;script&gt;alert(1)&lt;/script&gt; from-the-log",
        "[{&quot;id&quot;: &quot;&lt;b&gt;x&lt;/b&gt;&quot;}]",
        "<tr class=\"finding finding-minor\">",
    ] {
        assert!(plan.body.contains(shown), "{shown} in {}", plan.body);
    }
    assert!(!plan.body.contains("<script>alert"), "{}", plan.body);
    let draft = server.get(&format!("/runs/{id}/stages/draft"));
    assert!(
        draft.body.contains("<summary>The prompt</summary>")
            && draft.body.contains("You are the `draft` stage"),
        "{}",
        draft.body
    );
    let leak = server.get(&format!("/runs/{id}/stages/leak"));
    assert!(
        leak.body.contains("leads outside the workspace"),
        "{}",
        leak.body
    );
    assert!(!leak.body.contains("root:"), "{}", leak.body);
    assert_eq!(server.get(&format!("/runs/{id}/stages/nope")).status, 404);
}

#[test]
fn the_queue_page_counts_jobs_by_status_and_the_api_lists_them_as_the_cli_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let enqueue = |args: &[&str]| {
        let mut all = vec!["queue", "enqueue"];
        all.extend_from_slice(args);
        assert_eq!(baton(dir.path(), &all).code, 0, "{all:?}");
    };
    enqueue(&["--script", "true", "--count", "3"]);
    enqueue(&["--script", "true", "--queue", "<b>q</b>"]);
    let worked = baton(dir.path(), &["worker", "--once"]);
    assert_eq!(worked.code, 0, "{}", worked.stderr);
    let server = Server::start(dir.path());

    let listed = server.get("/api/queue").json();
    assert_eq!(
        listed,
        cli_json(dir.path(), &["queue", "list", "--format", "json"])
    );
    assert_eq!(listed.as_array().map(Vec::len), Some(4), "{listed}");
    let succeeded = server.get("/api/queue?status=succeeded&limit=2").json();
    assert_eq!(
        succeeded,
        cli_json(
            dir.path(),
            &[
                "queue",
                "list",
                "--status",
                "succeeded",
                "--limit",
                "2",
                "--format",
                "json"
            ]
        )
    );
    assert_eq!(server.get("/api/queue?status=nonsense").status, 400);
    assert_eq!(server.get("/api/queue?limit=0").status, 400);

    let page = server.get("/queue");
    assert_eq!(page.status, 200, "{page:?}");
    assert_secured(&page);
    let row = |queue: &str| {
        let start = page
            .body
            .find(&format!("<tr><td>{queue}</td>"))
            .unwrap_or_else(|| panic!("{queue} in {}", page.body));
        page.body[start..]
            .split("</tr>")
            .next()
            .expect("a row")
            .to_owned()
    };
    assert!(
        row("default").contains("<td data-count=\"succeeded\">3</td>"),
        "{}",
        row("default")
    );
    let hostile = row("&lt;b&gt;q&lt;/b&gt;");
    assert!(
        hostile.contains("<td data-count=\"available\">1</td>"),
        "{hostile}"
    );
    assert!(!page.body.contains("<b>q</b>"), "{}", page.body);
}

#[test]
fn a_run_s_governance_is_what_baton_state_summary_prints() {
    let dir = project(&gate_workflow());
    let run = baton(dir.path(), &["run", "wf.yaml", "--json"]);
    let outcome: Value = serde_json::from_str(&run.stdout).expect("json");
    let id = outcome["run_id"].as_str().expect("run id").to_owned();
    let server = Server::start(dir.path());
    let summary = server.get(&format!("/api/runs/{id}/governance"));
    assert_eq!(summary.status, 200, "{summary:?}");
    let expected = cli_json(
        dir.path(),
        &["state", "summary", "--run", &id, "--format", "json"],
    );
    assert_eq!(summary.json(), expected);
    let page = server.get(&format!("/runs/{id}"));
    assert!(
        page.body.contains("<summary>Governance</summary>"),
        "{}",
        page.body
    );
    let field = expected
        .as_object()
        .and_then(|map| map.keys().next())
        .expect("a field");
    assert!(
        page.body.contains(&format!("<tr><th>{field}</th>")),
        "{}",
        page.body
    );
    assert_eq!(server.get("/api/runs/nope/governance").status, 404);
}

#[test]
fn gates_verify_cancel_and_jobs_answer_as_the_cli_prints_them() {
    let dir = project(&gate_workflow());
    let alice = token(dir.path(), "alice");
    let run = baton(dir.path(), &["run", "wf.yaml", "--json"]);
    let outcome: Value = serde_json::from_str(&run.stdout).expect("json");
    let id = outcome["run_id"].as_str().expect("run id").to_owned();
    assert_eq!(
        baton(dir.path(), &["queue", "enqueue", "--script", "true"]).code,
        0
    );
    let server = Server::start(dir.path());
    let cli = |args: &[&str]| cli_json(dir.path(), args);
    assert_eq!(
        server.get(&format!("/api/runs/{id}/gates")).json(),
        cli(&["gate", "list", &id, "--format", "json"])
    );
    assert_eq!(
        server.get(&format!("/api/runs/{id}/gates/review")).json(),
        cli(&["gate", "show", &id, "review", "--format", "json"])
    );
    assert_eq!(
        server.get(&format!("/api/runs/{id}/verify")).json(),
        cli(&["verify", &id, "--format", "json"])
    );
    assert_eq!(
        server.get("/api/queue/1").json(),
        cli(&["queue", "show", "1", "--format", "json"])
    );
    assert_eq!(server.get("/api/queue/999").status, 404);

    let bearer = format!("Bearer {alice}");
    let headers = [("Authorization", bearer.as_str())];
    let items = format!("/api/runs/{id}/gates/review/items");
    let added = server.post(&items, &headers, r#"{"add": "write the migration"}"#);
    assert_eq!(added.status, 200, "{added:?}");
    assert_eq!(added.json()["items"][0], "write the migration", "{added:?}");
    assert_eq!(
        server.post(&items, &headers, r#"{"drop": "one"}"#).status,
        400
    );
    assert_eq!(server.post(&items, &[], r#"{"add": "x"}"#).status, 401);
    let shown = cli(&["gate", "show", &id, "review", "--format", "json"]);
    assert_eq!(
        shown["outputs"][0]["list"]["items"][0],
        "write the migration"
    );

    assert_eq!(
        server
            .post(&format!("/api/runs/{id}/cancel"), &[], "")
            .status,
        401
    );
    let cancelled = server.post(&format!("/api/runs/{id}/cancel"), &headers, "");
    assert_eq!(cancelled.status, 200, "{cancelled:?}");
    assert_eq!(
        cli(&["status", &id, "--format", "json"])["status"],
        "cancelled"
    );
}

#[test]
fn stage_names_and_errors_are_escaped_on_the_run_page() {
    let dir = project(&format!(
        "{HEADER}  - name: \"<script>alert(1)<\\\\x2fscript>\"
    kind: execute
    description: d
    executor: inline
    script: |
      echo '<script>alert(2)</script>' >&2; exit 3
"
    ));
    let outcome = baton(dir.path(), &["run", "wf.yaml", "--json"]);
    let outcome: Value = serde_json::from_str(&outcome.stdout).expect("json");
    assert_eq!(outcome["status"], "failed", "{outcome}");
    let run = outcome["run_id"].as_str().expect("run_id");
    let server = Server::start(dir.path());

    let page = server.get(&format!("/runs/{run}"));
    assert_eq!(page.status, 200, "{page:?}");
    assert_secured(&page);
    assert!(
        page.header("content-type")
            .is_some_and(|kind| kind.starts_with("text/html")),
        "{page:?}"
    );
    // The page's own script is a file (`<script src=…>`); no text a run
    // recorded becomes a script element.
    assert!(!page.body.contains("<script>"), "{}", page.body);
    assert!(!page.body.contains("alert(2)</script>"), "{}", page.body);
    assert!(
        page.body.contains("&lt;script&gt;alert(1)"),
        "the stage name is shown, escaped: {}",
        page.body
    );
    assert!(
        page.body.contains("&lt;script&gt;alert(2)&lt;/script&gt;"),
        "the error is shown, escaped: {}",
        page.body
    );
    let list = server.get("/");
    assert_eq!(list.status, 200, "{list:?}");
    assert!(
        list.body.contains(&format!("href=\"/runs/{run}\"")),
        "{}",
        list.body
    );
}

#[test]
fn a_browser_logs_in_once_then_decides_through_the_page_s_form() {
    let dir = project(&gate_workflow());
    let run = cli_json(dir.path(), &["run", "wf.yaml", "--json"])["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();
    let bob = token(dir.path(), "bob");
    let server = Server::start(dir.path());
    let origin = format!("http://{}", server.address);
    let form = [
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Origin", origin.as_str()),
    ];

    let refused = server.post("/login", &form, "token=baton_00");
    assert_eq!(refused.status, 401, "{refused:?}");
    assert_eq!(refused.header("set-cookie"), None);
    let login = server.post("/login", &form, &format!("token={bob}"));
    assert_eq!(login.status, 303, "{login:?}");
    let cookie = login.header("set-cookie").expect("a cookie");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let cookie = cookie.split(';').next().expect("name=value");
    assert_eq!(cookie, format!("baton_token={bob}"));

    let action = format!("action=\"/runs/{run}/gates/review\"");
    let anonymous = server.get(&format!("/runs/{run}"));
    assert!(!anonymous.body.contains(&action), "{}", anonymous.body);
    assert!(
        anonymous.body.contains("href=\"/login\""),
        "{}",
        anonymous.body
    );
    let page = request(
        &server.address,
        "GET",
        &format!("/runs/{run}"),
        &[("Cookie", cookie)],
        "",
    );
    assert!(page.body.contains(&action), "{}", page.body);
    assert!(page.body.contains("you decide as bob"), "{}", page.body);

    let decide = format!("/runs/{run}/gates/review");
    let body = "decision=reject&comment=wrong+scope";
    let without = server.post(&decide, &form, body);
    assert_eq!(without.status, 401, "{without:?}");
    let with = [form[0], form[1], ("Cookie", cookie)];
    let decided = server.post(&decide, &with, body);
    assert_eq!(decided.status, 303, "{decided:?}");
    assert_eq!(
        decided.header("location"),
        Some(format!("/runs/{run}").as_str())
    );
    let status = cli_json(dir.path(), &["status", &run, "--json"]);
    assert_eq!(status["status"], "rejected");
    assert_eq!(status["gates"][0]["decided_by"], "bob");
    assert_eq!(status["gates"][0]["comment"], "wrong scope");
    let page = server.get(&format!("/runs/{run}"));
    assert!(!page.body.contains(&action), "no form once decided");
}

#[test]
fn the_events_stream_opens_with_the_run_s_status_object() {
    use std::io::Write;

    let dir = project(&gate_workflow());
    let run = cli_json(dir.path(), &["run", "wf.yaml", "--json"])["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();
    let server = Server::start(dir.path());
    let mut stream = std::net::TcpStream::connect(&server.address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a timeout");
    write!(
        stream,
        "GET /api/runs/{run}/events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        server.address
    )
    .expect("send");
    // The stream never ends: read up to the end of its first event.
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let data = loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("read") > 0,
            "the stream ended: {head}"
        );
        head.push_str(&line);
        if let Some(data) = line.strip_prefix("data: ") {
            break data.trim().to_owned();
        }
    };
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    assert!(head.contains("event: status"), "{head}");
    let event: Value = serde_json::from_str(&data).expect("the event is JSON");
    assert_eq!(event, server.get(&format!("/api/runs/{run}")).json());
}
