//! Finding processes by what they carry in their environment, read straight
//! from `/proc` (not through baton's own code, which the tests check).

/// Live processes (zombies excluded) whose environment holds `name=value`.
#[must_use]
pub fn processes_with_env(name: &str, value: &str) -> Vec<u32> {
    let needle = format!("{name}={value}").into_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let state = stat
                    .rsplit(')')
                    .next()
                    .and_then(|rest| rest.split_whitespace().next());
                state.is_some_and(|state| state != "Z")
            });
            alive
                && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                    environ
                        .split(|byte| *byte == 0)
                        .any(|entry| entry == needle)
                })
        })
        .collect()
}

/// How many live processes carry run `run_id`'s marker (`BATON_RUN_ID`).
#[must_use]
pub fn processes_of_run(run_id: &str) -> usize {
    processes_with_env("BATON_RUN_ID", run_id).len()
}
