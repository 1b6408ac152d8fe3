//! The committed fuzz corpora (`fuzz/corpus/`), replayed through the checks
//! the fuzz targets run, so every past finding stays fixed on the stable
//! toolchain.

use baton_test_support::replay_fuzz_corpus;

#[test]
fn load_corpus_passes_its_check() {
    replay_fuzz_corpus("load", baton_workflow::fuzz::load);
}

#[test]
fn compile_corpus_passes_its_check() {
    replay_fuzz_corpus("compile", baton_workflow::fuzz::compile);
}

#[test]
fn placeholders_corpus_passes_the_template_check() {
    replay_fuzz_corpus("placeholders", baton_workflow::fuzz::template);
}
