//! The committed `placeholders` fuzz corpus (`fuzz/corpus/placeholders`),
//! replayed through the check the fuzz target runs on `shell::substitute`.

use baton_test_support::replay_fuzz_corpus;

#[test]
fn placeholders_corpus_passes_the_substitute_check() {
    replay_fuzz_corpus("placeholders", baton_executor::fuzz::placeholders);
}
