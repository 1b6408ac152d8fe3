//! The `baton` binary: see `baton --help`.

fn main() -> std::process::ExitCode {
    baton_executor::sys::limit_malloc_arenas();
    baton_cli::main()
}
