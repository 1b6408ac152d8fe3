//! The task board in Chromium: a follow-up's card leads to its origin.

use baton_test_support::browser::browser;
use serde_json::json;

use super::Page;
use crate::serve_tasks::{FOLLOW_UPS, board_project};
use crate::serving::Server;

#[test]
fn a_follow_up_s_card_links_to_its_origin_whose_page_lists_it() {
    let Some(browser) = browser() else { return };
    let project = board_project();
    let server = Server::start(project.path());
    let result = Page::start(
        &browser,
        "task_board.mjs",
        &server,
        &[("BATON_FOLLOW_UP", FOLLOW_UPS[0])],
    )
    .finish();
    assert_eq!(
        result["columns"],
        json!([
            "New",
            "Research",
            "Design",
            "Implementation",
            "Bug find",
            "Adversarial",
            "Doc review",
            "Referee"
        ]),
        "{result}"
    );
    assert_eq!(result["column"], "Research", "{result}");
    assert_eq!(result["originHref"], "/tasks/parse-input", "{result}");
    assert_eq!(result["originText"], "parse-input", "{result}");
    assert_eq!(result["pwnedOnBoard"], false, "{result}");
    assert_eq!(result["heading"], "parse-input", "{result}");
    assert_eq!(result["phase"], "Referee", "{result}");
    let mut follow_ups: Vec<String> = result["followUps"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|name| name.as_str().unwrap_or_default().to_owned())
        .collect();
    follow_ups.sort();
    let mut expected = FOLLOW_UPS.map(str::to_owned).to_vec();
    expected.sort();
    assert_eq!(follow_ups, expected, "{result}");
}
