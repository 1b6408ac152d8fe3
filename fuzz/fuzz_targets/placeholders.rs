//! `{name}` rendering: the template round trip (`baton_workflow::fuzz::template`)
//! and values that never become shell code (`baton_executor::fuzz::placeholders`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    baton_workflow::fuzz::template(data);
    baton_executor::fuzz::placeholders(data);
});
