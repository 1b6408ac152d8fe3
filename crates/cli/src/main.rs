//! The `baton` binary: see `baton --help`.

fn main() -> std::process::ExitCode {
    baton_cli::main()
}
