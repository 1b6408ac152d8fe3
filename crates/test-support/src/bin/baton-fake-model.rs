//! `baton-fake-model`: the fake model server on its own, for running the
//! real agent CLIs by hand against it.
//!
//! `baton-fake-model [--port N] [--mode M] [--fail-after N] [--log FILE]`
//! listens on 127.0.0.1 (port 0, the default, picks a free one), prints
//! `http://127.0.0.1:PORT` on one line, and serves until killed. `--mode`
//! makes every model call fail: `500`, `429`, `529` (or another status),
//! `hang`, `garbage` or `drop`; with `--fail-after N`, only the one call
//! after the first N fails that way. `--log` (or `$BATON_FAKE_MODEL_LOG`)
//! appends every request to a file as JSON lines.

use std::path::PathBuf;

use baton_test_support::model_server::{Mode, ModelServer, Options};

fn main() {
    let mut options = Options::default();
    let mut mode = Mode::Ok;
    let mut fail_after = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        let parsed = match (arg.as_str(), value) {
            ("--port", Some(port)) => port
                .parse()
                .map(|port| options.port = port)
                .map_err(|_| port),
            ("--mode", Some(text)) => text.parse().map(|parsed| mode = parsed),
            ("--fail-after", Some(count)) => count
                .parse()
                .map(|count| fail_after = Some(count))
                .map_err(|_| count),
            ("--log", Some(path)) => {
                options.log = Some(PathBuf::from(path));
                Ok(())
            }
            _ => Err(format!("unknown argument {arg:?}")),
        };
        if let Err(message) = parsed {
            #[expect(clippy::print_stderr, reason = "a command-line tool reports its usage")]
            {
                eprintln!(
                    "baton-fake-model: {message}\nusage: baton-fake-model [--port N] [--mode M] [--fail-after N] [--log FILE]"
                );
            }
            std::process::exit(2);
        }
    }
    let server = ModelServer::start_with(options);
    match fail_after {
        Some(ok) => server.fail_after(ok, 1, mode),
        None => server.set_mode(mode),
    }
    #[expect(clippy::print_stdout, reason = "the caller reads the address")]
    {
        println!("{}", server.base_url());
    }
    loop {
        std::thread::park();
    }
}
