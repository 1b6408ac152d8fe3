//! Spans over OpenTelemetry: with the `otel` feature a run sends the spans
//! of the run, its stages and their attempts to the collector
//! `BATON_OTLP_ENDPOINT` names (a real HTTP server here, taking OTLP's
//! protobuf), before baton exits; a collector that is down is a warning.
//! Without the feature, the variable gets a one-line warning.

use crate::project::{HEADER, Project, stage};

/// Two stages whose names are unlikely to appear in a span by accident.
fn workflow() -> String {
    format!(
        "{HEADER}{}{}",
        stage("alpha-stage-name", "true", ""),
        stage(
            "omega-stage-name",
            "exit 3",
            "    depends_on: [alpha-stage-name]\n"
        )
    )
}

/// `baton ARGS` in `project` with `variable` set to `value`.
fn baton_with(
    project: &Project,
    args: &[&str],
    (variable, value): (&str, &str),
) -> baton_test_support::Run {
    project
        .command(args)
        .env_remove("BATON_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env(variable, value)
        .output()
        .expect("baton runs")
        .into()
}

/// A port nothing listens on: bound, then given up.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("address").port()
}

#[cfg(feature = "otel")]
mod with_feature {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    use super::{Project, baton_with, closed_port, workflow};
    use crate::project::run_id;

    /// What a request to the collector was: its request line and body.
    type Request = (String, Vec<u8>);

    /// An OTLP/HTTP collector on a free port that keeps every request and
    /// answers each with an empty (valid) protobuf response.
    struct Collector {
        url: String,
        requests: Arc<Mutex<Vec<Request>>>,
    }

    impl Collector {
        fn start() -> Collector {
            let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
            let url = format!("http://{}", listener.local_addr().expect("address"));
            let requests = Arc::new(Mutex::new(Vec::new()));
            let kept = Arc::clone(&requests);
            std::thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let kept = Arc::clone(&kept);
                    std::thread::spawn(move || serve(stream, &kept));
                }
            });
            Collector { url, requests }
        }
    }

    /// Reads the requests of one connection (the exporter keeps it alive)
    /// and answers each.
    fn serve(stream: std::net::TcpStream, kept: &Mutex<Vec<Request>>) {
        let mut reader = BufReader::new(stream);
        loop {
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                return;
            }
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            kept.lock()
                .expect("lock")
                .push((request_line.trim_end().to_owned(), body));
            let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
            if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    }

    fn contains(haystack: &[u8], needle: &str) -> bool {
        haystack
            .windows(needle.len())
            .any(|window| window == needle.as_bytes())
    }

    #[test]
    fn a_run_s_spans_reach_the_collector_before_baton_exits() {
        let collector = Collector::start();
        let project = Project::new();
        project.write("wf.yaml", &workflow());
        let endpoint = ("BATON_OTLP_ENDPOINT", collector.url.as_str());
        let run = baton_with(&project, &["run", "wf.yaml", "--json"], endpoint);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(!run.stderr.contains("warning"), "{}", run.stderr);
        let id = run_id(&run);
        // Taken before baton exited: no waiting here.
        let requests = collector.requests.lock().expect("lock").clone();
        assert!(!requests.is_empty(), "no request reached the collector");
        for (line, _) in &requests {
            assert!(line.starts_with("POST /v1/traces "), "{line}");
        }
        let bodies: Vec<u8> = requests.into_iter().flat_map(|(_, body)| body).collect();
        for expected in [
            id.as_str(),
            "alpha-stage-name",
            "omega-stage-name",
            "baton::attempt",
            "failed",
        ] {
            assert!(contains(&bodies, expected), "no {expected} in the spans");
        }
    }

    #[test]
    fn a_collector_that_is_down_is_a_warning_and_the_run_goes_on() {
        let project = Project::new();
        project.write("wf.yaml", &workflow());
        let url = format!("http://127.0.0.1:{}", closed_port());
        let run = baton_with(&project, &["run", "wf.yaml"], ("BATON_OTLP_ENDPOINT", &url));
        // The run's own result: the second stage fails, nothing else.
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "warning: spans were not all sent to {url}/v1/traces"
            )),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("exited with code 3"), "{}", run.stderr);
    }
}

#[cfg(not(feature = "otel"))]
#[test]
fn without_the_feature_an_otlp_endpoint_is_a_one_line_warning() {
    let project = Project::new();
    project.write("wf.yaml", &workflow());
    let url = format!("http://127.0.0.1:{}", closed_port());
    let run = baton_with(&project, &["run", "wf.yaml"], ("BATON_OTLP_ENDPOINT", &url));
    assert_eq!(run.code, 2, "{}", run.stderr);
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.contains("OpenTelemetry"))
        .collect();
    assert_eq!(
        warnings,
        [
            "baton: warning: BATON_OTLP_ENDPOINT is set, but this baton was built without OpenTelemetry (cargo feature `otel`); no spans are sent"
        ]
    );
}

#[test]
fn baton_log_prints_the_spans_of_the_run_its_stages_and_attempts() {
    let project = Project::new();
    project.write("wf.yaml", &workflow());
    let run = baton_with(
        &project,
        &["run", "wf.yaml", "--json"],
        ("BATON_LOG", "baton=info"),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    let id = crate::project::run_id(&run);
    let closed = |what: &str| {
        run.stderr
            .lines()
            .filter(|line| line.contains(what) && line.contains(": close"))
            .count()
    };
    assert_eq!(closed("baton::run:"), 1, "{}", run.stderr);
    assert_eq!(closed("baton::stage:"), 2, "{}", run.stderr);
    assert_eq!(closed("baton::attempt:"), 2, "{}", run.stderr);
    for expected in [
        format!("run_id={id}"),
        "workflow=t status=failed".to_owned(),
        "stage=alpha-stage-name kind=execute status=success".to_owned(),
        "attempt=1 agent=inline status=failed exit_code=3".to_owned(),
    ] {
        assert!(run.stderr.contains(&expected), "{expected}: {}", run.stderr);
    }
    // Nothing asked for: no span is printed.
    let quiet = project.baton(&["run", "wf.yaml"]);
    assert!(!quiet.stderr.contains("baton::"), "{}", quiet.stderr);
}
