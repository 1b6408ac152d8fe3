//! YAML text → a consistent plan or located errors (`baton_workflow::fuzz::compile`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_workflow::fuzz::compile(data));
