//! A gate on the run's page: its list edited through the page's forms as
//! the person logged in, and its outputs' changes since the last decision
//! shown on the page, by the API and by `baton gate show`.

use baton_test_support::http::{Response, request};
use serde_json::Value;

use crate::baton;
use crate::serving::{HEADER, Server, cli_json, project, token};

/// A gate `review` writing a markdown list whose second item names its
/// attempt, so a second attempt changes one line.
fn listing_workflow() -> String {
    format!(
        "{HEADER}  - name: review
    kind: execute
    description: d
    executor: inline
    script: |
      printf -- \"# Plan\\n\\n- step one\\n- step $BATON_ATTEMPT\\n\" > outputs/plan.md
    writes_to: [outputs/plan.md]
    human_gate: true
  - name: after
    kind: execute
    description: d
    executor: inline
    script: cp outputs/plan.md outputs/final.md
    depends_on: [review]
    writes_to: [outputs/final.md]
"
    )
}

/// Logs `name`'s token in; the cookie to send.
fn log_in(server: &Server, token: &str) -> String {
    let origin = format!("http://{}", server.address);
    let form = [
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Origin", origin.as_str()),
    ];
    let login = server.post("/login", &form, &format!("token={token}"));
    assert_eq!(login.status, 303, "{login:?}");
    let cookie = login.header("set-cookie").expect("a cookie");
    cookie.split(';').next().expect("name=value").to_owned()
}

/// Posts the page's item form `body` with `cookie` (if any), as the page's
/// own origin.
fn post_form(server: &Server, path: &str, cookie: Option<&str>, body: &str) -> Response {
    let origin = format!("http://{}", server.address);
    let mut headers = vec![
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Origin", origin.as_str()),
    ];
    if let Some(cookie) = cookie {
        headers.push(("Cookie", cookie));
    }
    server.post(path, &headers, body)
}

/// The `gate_output_edited` events' `by`, oldest first.
fn edited_by(dir: &std::path::Path, run: &str) -> Vec<String> {
    let location = dir.join(".baton/baton.db");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let store = baton_store::Store::open(&location.to_string_lossy())
                .await
                .expect("store");
            store.events(run, 0).await.expect("events")
        })
        .into_iter()
        .filter(|event| event.kind == "gate_output_edited")
        .map(|event| {
            let detail: Value = serde_json::from_str(&event.detail).expect("json");
            detail["by"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[test]
fn a_gate_s_list_is_edited_through_the_page_s_forms_as_the_person_logged_in() {
    let dir = project(&listing_workflow());
    let run = cli_json(dir.path(), &["run", "wf.yaml", "--json"])["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();
    let bob = token(dir.path(), "bob");
    let server = Server::start(dir.path());
    let cookie = log_in(&server, &bob);
    let items = format!("/runs/{run}/gates/review/items");
    let action = format!("action=\"{items}\"");

    let anonymous = server.get(&format!("/runs/{run}"));
    assert!(anonymous.body.contains("step one"), "{}", anonymous.body);
    assert!(!anonymous.body.contains(&action), "{}", anonymous.body);
    let page = request(
        &server.address,
        "GET",
        &format!("/runs/{run}"),
        &[("Cookie", &cookie)],
        "",
    );
    assert!(page.body.contains(&action), "{}", page.body);
    assert!(page.body.contains(">Drop</button>"), "{}", page.body);
    assert!(
        page.body
            .contains("None to show: the gate waits for its first decision."),
        "{}",
        page.body
    );

    // Without the cookie, or from another site's page, nothing changes.
    let refused = post_form(&server, &items, None, "action=drop&n=1");
    assert_eq!(refused.status, 401, "{refused:?}");
    let cross_site = server.post(
        &items,
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Origin", "http://attacker.example"),
            ("Cookie", &cookie),
        ],
        "action=drop&n=1",
    );
    assert_eq!(cross_site.status, 403, "{cross_site:?}");
    let bad = post_form(&server, &items, Some(&cookie), "action=drop&n=9");
    assert_eq!(bad.status, 409, "{bad:?}");
    assert!(bad.body.contains("there is no item 9"), "{}", bad.body);
    assert!(edited_by(dir.path(), &run).is_empty());

    for body in [
        "action=drop&n=1",
        "action=edit&n=1&field=text&value=step+TWO",
        "action=add&text=%3Cb%3Ebold%3C%2Fb%3E",
    ] {
        let edited = post_form(&server, &items, Some(&cookie), body);
        assert_eq!(edited.status, 303, "{body}: {edited:?}");
        assert_eq!(
            edited.header("location"),
            Some(format!("/runs/{run}").as_str())
        );
    }
    let shown = cli_json(
        dir.path(),
        &["gate", "show", &run, "review", "--format", "json"],
    );
    assert_eq!(
        shown["outputs"][0]["list"]["items"],
        serde_json::json!(["step TWO", "<b>bold</b>"])
    );
    assert_eq!(edited_by(dir.path(), &run), ["bob", "bob", "bob"]);
    let page = request(
        &server.address,
        "GET",
        &format!("/runs/{run}"),
        &[("Cookie", &cookie)],
        "",
    );
    assert!(
        page.body.contains("&lt;b&gt;bold&lt;/b&gt;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<b>bold"), "{}", page.body);
    assert!(!page.body.contains("step one"), "{}", page.body);
}

#[test]
fn after_a_push_back_the_page_api_and_cli_show_what_changed_since() {
    let dir = project(&listing_workflow());
    let run = cli_json(dir.path(), &["run", "wf.yaml", "--json"])["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();
    let alice = token(dir.path(), "alice");
    let server = Server::start(dir.path());
    let bearer = format!("Bearer {alice}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
    ];
    let gate = format!("/api/runs/{run}/gates/review");
    let first = server.get(&gate).json();
    assert_eq!(first["since_decision"], Value::Null, "{first}");
    assert_eq!(first["outputs"][0]["diff"], Value::Null, "{first}");

    let pushed = server.post(
        &format!("{gate}/push-back"),
        &headers,
        r#"{"comment": "number it"}"#,
    );
    assert_eq!(pushed.status, 200, "{pushed:?}");
    let resumed = baton(dir.path(), &["resume", &run]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);

    let again = server.get(&gate).json();
    assert_eq!(again["status"], "awaiting", "{again}");
    assert_eq!(again["since_decision"]["decision"], "push_back", "{again}");
    assert_eq!(again["since_decision"]["decided_by"], "alice", "{again}");
    assert_eq!(again["since_decision"]["attempt"], 1, "{again}");
    let diff = &again["outputs"][0]["diff"];
    assert_eq!(diff["change"], "changed", "{again}");
    let unified = diff["unified"].as_str().expect("a diff");
    assert!(unified.contains("\n-- step 1\n+- step 2\n"), "{unified}");
    assert!(!unified.contains("-- step one"), "{unified}");
    assert_eq!(
        again,
        cli_json(
            dir.path(),
            &["gate", "show", &run, "review", "--format", "json"]
        )
    );
    let text = baton(dir.path(), &["gate", "show", &run, "review"]);
    assert!(
        text.stdout.contains("changes since the push back by alice"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("+- step 2"), "{}", text.stdout);

    let page = server.get(&format!("/runs/{run}"));
    assert!(
        page.body.contains("Changes since the last decision"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<span class=\"del\">-- step 1</span>"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<span class=\"add\">+- step 2</span>"),
        "{}",
        page.body
    );

    // Approved, then the list edited: the approval is stale and the page
    // asks again, showing the edit against what was approved.
    assert_eq!(
        server.post(&format!("{gate}/approve"), &headers, "").status,
        200
    );
    let edited = server.post(&format!("{gate}/items"), &headers, r#"{"drop": 1}"#);
    assert_eq!(edited.status, 200, "{edited:?}");
    let stale = server.get(&gate).json();
    assert_eq!(stale["status"], "stale", "{stale}");
    assert_eq!(stale["since_decision"]["decision"], "approve", "{stale}");
    let unified = stale["outputs"][0]["diff"]["unified"]
        .as_str()
        .expect("a diff");
    assert!(unified.contains("\n-- step one\n"), "{unified}");
    let page = server.get(&format!("/runs/{run}"));
    assert!(
        page.body.contains("<span class=\"del\">-- step one</span>"),
        "{}",
        page.body
    );
}
