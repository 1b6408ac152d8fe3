//! `VERDICT.md` → a verdict that reads back the same, and its follow-up names
//! (`baton_lifecycle::fuzz::verdict`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_lifecycle::fuzz::verdict(data));
