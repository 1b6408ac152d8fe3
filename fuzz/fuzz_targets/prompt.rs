//! A workflow → every stage's prompt and dispatch file (`baton_engine::fuzz::prompt`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_engine::fuzz::prompt(data));
