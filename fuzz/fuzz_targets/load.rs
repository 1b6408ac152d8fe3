//! YAML text → a loaded workflow or located errors (`baton_workflow::fuzz::load`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_workflow::fuzz::load(data));
