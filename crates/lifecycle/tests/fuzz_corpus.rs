//! The committed `verdict` fuzz corpus (`fuzz/corpus/verdict`), replayed
//! through the check the fuzz target runs.

use baton_test_support::replay_fuzz_corpus;

#[test]
fn verdict_corpus_passes_its_check() {
    replay_fuzz_corpus("verdict", baton_lifecycle::fuzz::verdict);
}
