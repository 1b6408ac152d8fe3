//! Temporary: until baton-executor's shell module lands.

pub(crate) fn substitute<'v>(script: &str, lookup: impl Fn(&str) -> Option<&'v str>) -> String {
    baton_workflow::template::render(script, |name| lookup(name)).into_owned()
}

pub(crate) fn command_for_script(script: &str) -> (String, Vec<String>) {
    (
        "bash".to_owned(),
        vec![
            "-euo".to_owned(),
            "pipefail".to_owned(),
            "-c".to_owned(),
            script.to_owned(),
        ],
    )
}
