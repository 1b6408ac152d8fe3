//! The committed `prompt` fuzz corpus (`fuzz/corpus/prompt`), replayed
//! through the check the fuzz target runs.

use baton_test_support::replay_fuzz_corpus;

#[test]
fn prompt_corpus_passes_its_check() {
    replay_fuzz_corpus("prompt", baton_engine::fuzz::prompt);
}
