//! The runs list of `baton serve`, as a page and through the API: the
//! filters `baton runs` takes, with the same answers.

use crate::baton;
use crate::serving::{HEADER, Server, cli_json, project};

/// A workflow named `name` whose one stage exits with `code`.
fn workflow(name: &str, code: u8) -> String {
    HEADER.replace("name: t\n", &format!("name: {name}\n"))
        + &format!(
            "  - name: only
    kind: execute
    description: d
    executor: inline
    script: exit {code}
"
        )
}

#[test]
fn the_runs_page_and_api_filter_the_runs_as_baton_runs_does() {
    let dir = project(&workflow("build", 0));
    std::fs::write(dir.path().join("fails.yaml"), workflow("check", 3)).expect("write");
    for file in ["wf.yaml", "fails.yaml", "wf.yaml"] {
        baton(dir.path(), &["run", file]);
    }
    let server = Server::start(dir.path());

    for (query, flags) in [
        ("", vec![]),
        ("?status=failed", vec!["--status", "failed"]),
        (
            "?workflow=build&limit=1",
            vec!["--workflow", "build", "--limit", "1"],
        ),
        (
            "?since=1d&status=success",
            vec!["--since", "1d", "--status", "success"],
        ),
        (
            "?workflow=nothing-by-this-name",
            vec!["--workflow", "nothing-by-this-name"],
        ),
    ] {
        let answer = server.get(&format!("/api/runs{query}"));
        assert_eq!(answer.status, 200, "{query}: {answer:?}");
        let mut args = vec!["runs", "--format", "json"];
        args.extend(flags);
        assert_eq!(answer.json(), cli_json(dir.path(), &args), "{query}");
    }
    let failed = cli_json(dir.path(), &["runs", "--status", "failed", "--json"]);
    assert_eq!(failed.as_array().map(Vec::len), Some(1), "{failed}");
    let failed_id = failed[0]["run_id"].as_str().expect("run_id");
    let built = cli_json(dir.path(), &["runs", "--workflow", "build", "--json"]);
    assert_eq!(built.as_array().map(Vec::len), Some(2), "{built}");

    for query in [
        "?status=sideways",
        "?since=yesterday",
        "?limit=-1",
        "?colour=red",
    ] {
        let refused = server.get(&format!("/api/runs{query}"));
        assert_eq!(refused.status, 400, "{query}: {refused:?}");
        let page = server.get(&format!("/{query}"));
        assert_eq!(page.status, 400, "{query}: {page:?}");
    }
    let refused = server.get("/api/runs?status=sideways");
    let message = refused.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("awaiting_human"),
        "names the statuses: {message}"
    );

    let page = server.get("/?status=failed");
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains(failed_id), "{}", page.body);
    for run in built.as_array().expect("runs") {
        let id = run["run_id"].as_str().expect("run_id");
        assert!(!page.body.contains(id), "{id} is not failed: {}", page.body);
    }
    assert!(
        page.body.contains("<option selected>failed</option>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("<th>cost</th>"), "{}", page.body);

    let hostile = server.get("/?workflow=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E");
    assert_eq!(hostile.status, 200, "{hostile:?}");
    assert!(!hostile.body.contains("<script>alert"), "{}", hostile.body);
    assert!(
        hostile.body.contains("&quot;&gt;&lt;script&gt;"),
        "{}",
        hostile.body
    );
    assert!(hostile.body.contains("No run matches"), "{}", hostile.body);
}

/// A project whose `wf.yaml` is `text`, run once, and a server of it.
fn run_and_serve(text: &str) -> (tempfile::TempDir, String, Server) {
    let dir = project(text);
    baton(dir.path(), &["run", "wf.yaml"]);
    let run = cli_json(dir.path(), &["runs", "--json"])[0]["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();
    let server = Server::start(dir.path());
    (dir, run, server)
}

#[test]
fn a_big_run_s_page_counts_its_stages_pages_its_table_and_draws_its_plan_apart() {
    let mut text = HEADER.to_owned();
    for at in 0..150 {
        // One stage skipped, so the counts and the cells have two states.
        let when = if at == 120 {
            "    when: '\"a\" contains \"b\"'\n"
        } else {
            ""
        };
        text.push_str(&format!(
            "  - name: s{at:03}\n    kind: execute\n    description: d\n    executor: inline\n    script: 'true'\n{when}"
        ));
    }
    let (_dir, run, server) = run_and_serve(&text);

    let first = server.get(&format!("/runs/{run}"));
    assert_eq!(first.status, 200, "{first:?}");
    assert!(
        first
            .body
            .contains(">150 stages: 149 success, 1 skipped</p>"),
        "{}",
        first.body
    );
    assert!(first.body.contains("stages 1–100 of 150"), "{}", first.body);
    assert!(
        first
            .body
            .contains(&format!("href=\"/runs/{run}?from=100\">next 100</a>")),
        "{}",
        first.body
    );
    assert!(!first.body.contains("previous 100"), "{}", first.body);
    assert_eq!(first.body.matches("data-stage-status=").count(), 100);
    assert!(first.body.contains("data-stage-status=\"s099\""));
    assert!(!first.body.contains("data-stage-status=\"s100\""));
    assert!(!first.body.contains("<svg"), "no drawing of 150 boxes here");
    assert!(
        first
            .body
            .contains(&format!("<a href=\"/runs/{run}/plan\">")),
        "{}",
        first.body
    );

    let second = server.get(&format!("/runs/{run}?from=100"));
    assert_eq!(second.status, 200, "{second:?}");
    assert!(
        second.body.contains("stages 101–150 of 150"),
        "{}",
        second.body
    );
    assert!(
        second
            .body
            .contains(&format!("href=\"/runs/{run}?from=0\">previous 100</a>")),
        "{}",
        second.body
    );
    assert!(!second.body.contains("next 100"), "{}", second.body);
    assert_eq!(second.body.matches("data-stage-status=").count(), 50);
    assert!(
        second
            .body
            .contains("data-stage-status=\"s120\"><span class=\"status status-skipped\">")
    );

    let plan = server.get(&format!("/runs/{run}/plan"));
    assert_eq!(plan.status, 200, "{plan:?}");
    assert_eq!(plan.body.matches("<g class=\"node").count(), 150);
    assert!(
        plan.body
            .contains("<g class=\"node node-skipped\" data-stage=\"s120\">")
    );
    assert!(
        plan.body.contains(&format!("data-run=\"{run}\"")),
        "live.js follows it"
    );
    assert!(
        plan.body
            .contains(&format!("<a href=\"/runs/{run}\">the run's page</a>")),
        "{}",
        plan.body
    );

    for query in ["?from=150", "?from=-1", "?from=many"] {
        let refused = server.get(&format!("/runs/{run}{query}"));
        assert_eq!(refused.status, 400, "{query}: {refused:?}");
    }
    let missing = server.get("/runs/no-such-run/plan");
    assert_eq!(missing.status, 404, "{missing:?}");
}

#[test]
fn a_small_run_s_page_draws_its_plan_and_shows_every_stage_unpaged() {
    let (_dir, run, server) = run_and_serve(&workflow("build", 0));
    let page = server.get(&format!("/runs/{run}"));
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.body.contains(">1 stage: 1 success</p>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("<svg class=\"dag\""), "{}", page.body);
    assert!(!page.body.contains("class=\"pager\""), "{}", page.body);
}

/// Pages link the stylesheet and the script by a digest of their text;
/// asked for at that address they may be kept for good, at any other they
/// are looked at again.
#[test]
fn pages_link_their_assets_by_digest_and_browsers_may_keep_them() {
    let dir = project(&workflow("build", 0));
    let server = Server::start(dir.path());
    let page = server.get("/").body;
    for (file, content_type) in [
        ("style.css", "text/css; charset=utf-8"),
        ("live.js", "text/javascript; charset=utf-8"),
    ] {
        let start = format!("/assets/{file}?v=");
        let at = page
            .find(&start)
            .unwrap_or_else(|| panic!("{file}: {page}"));
        let linked = &page[at..];
        let linked = &linked[..linked.find('"').expect("quoted")];
        assert_eq!(linked.len(), start.len() + 16, "{linked}");
        for (path, cache) in [
            (linked, "public, max-age=31536000, immutable"),
            (&format!("/assets/{file}"), "no-cache"),
            (&format!("{start}0000000000000000"), "no-cache"),
        ] {
            let asset = server.get(path);
            assert_eq!(asset.status, 200, "{path}");
            assert_eq!(asset.header("content-type"), Some(content_type), "{path}");
            assert_eq!(asset.header("cache-control"), Some(cache), "{path}");
        }
    }
}
