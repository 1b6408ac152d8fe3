//! `GET /api/runs/{run}/events` followed as a plain client does it: a
//! `status` event with the whole object, then `delta` events with what
//! changed, which rebuild exactly what `GET /api/runs/{run}` answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::project::wait_bounded;
use crate::serving::{HEADER, Server, project, spawn_run};

/// How long anything here may take on a busy machine.
const LIMIT: Duration = Duration::from_secs(90);

/// A follower of a run's events over one HTTP connection.
struct Follower {
    reader: BufReader<TcpStream>,
    /// Decoded body not yet split into events.
    pending: String,
}

impl Follower {
    /// Connects, sending `extra` header lines, and reads the response head.
    fn connect(server: &Server, run: &str, extra: &str) -> Follower {
        let mut stream = TcpStream::connect(&server.address).expect("connect");
        stream.set_read_timeout(Some(LIMIT)).expect("a timeout");
        write!(
            stream,
            "GET /api/runs/{run}/events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n{extra}\r\n",
            server.address
        )
        .expect("send");
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).expect("read") > 0, "{head}");
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("text/event-stream"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("transfer-encoding: chunked"),
            "{head}"
        );
        Follower {
            reader,
            pending: String::new(),
        }
    }

    /// The next event's name and data (keep-alive comments skipped).
    fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let event: String = self.pending.drain(..end + 2).collect();
                let mut name = "message";
                let mut data = None;
                for line in event.lines() {
                    if let Some(value) = line.strip_prefix("event: ") {
                        name = value;
                    } else if let Some(value) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(value).expect("data is JSON"));
                    }
                }
                if let Some(data) = data {
                    return (name.to_owned(), data);
                }
                continue;
            }
            self.read_chunk();
        }
    }

    /// One chunk of the chunked body into `pending`.
    fn read_chunk(&mut self) {
        let mut size = String::new();
        assert!(
            self.reader.read_line(&mut size).expect("read") > 0,
            "the stream ended"
        );
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        assert!(size > 0, "the stream ended");
        let mut chunk = vec![0; size + 2];
        self.reader.read_exact(&mut chunk).expect("a whole chunk");
        chunk.truncate(size);
        self.pending
            .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
    }
}

/// A status object rebuilt from events, as a plain client would.
#[derive(Default)]
struct Rebuilt {
    status: Option<Value>,
    /// The number of stages each `delta` carried.
    deltas: Vec<usize>,
}

impl Rebuilt {
    fn apply(&mut self, name: &str, mut data: Value) {
        match name {
            "status" => self.status = Some(data),
            "delta" => {
                let mut status = self.status.take().expect("a delta after a status");
                let changed = data["stages"].take();
                let changed = changed.as_array().expect("a delta's stages");
                self.deltas.push(changed.len());
                let stages = status["stages"].as_array_mut().expect("stages");
                for stage in changed {
                    let at = stages
                        .iter()
                        .position(|known| known["stage"] == stage["stage"])
                        .unwrap_or_else(|| panic!("a delta of an unknown stage: {stage}"));
                    stages[at] = stage.clone();
                }
                data["stages"] = status["stages"].take();
                self.status = Some(data);
            }
            other => panic!("an unexpected event {other}"),
        }
    }

    fn stage_status(&self, stage: &str) -> Option<&str> {
        self.status.as_ref()?["stages"]
            .as_array()?
            .iter()
            .find(|entry| entry["stage"] == stage)?["status"]
            .as_str()
    }
}

/// A stage `hold` that runs until `flag` exists, three that follow it and
/// one beside it that ends at once.
fn held_workflow(flag: &std::path::Path) -> String {
    let stage = |name: &str, script: &str, after: &str| {
        format!(
            "  - name: {name}\n    kind: execute\n    description: d\n    executor: inline\n    \
             script: {script}\n    depends_on: [{after}]\n"
        )
    };
    let hold = format!(
        "\"while [ ! -e '{}' ]; do sleep 0.05; done\"",
        flag.display()
    );
    [
        HEADER.to_owned(),
        stage("hold", &hold, ""),
        stage("beside", "\"true\"", ""),
        stage("next1", "\"sleep 0.3\"", "hold"),
        stage("next2", "\"true\"", "hold"),
        stage("last", "\"sleep 0.3\"", "next1, next2"),
    ]
    .concat()
}

/// Reads `follower`'s events into `rebuilt` until `done` says so.
fn follow_until(
    follower: &mut Follower,
    rebuilt: &mut Rebuilt,
    what: &str,
    done: impl Fn(&Rebuilt) -> bool,
) {
    let start = Instant::now();
    while !done(rebuilt) {
        assert!(start.elapsed() < LIMIT, "timed out waiting for {what}");
        let (name, data) = follower.next();
        rebuilt.apply(&name, data);
    }
}

#[test]
fn a_client_applying_deltas_ends_with_the_status_the_api_answers() {
    let flag_dir = tempfile::tempdir().expect("temp dir");
    let flag = flag_dir.path().join("go");
    let dir = project(&held_workflow(&flag));
    let server = Server::start(dir.path());
    let mut run = spawn_run(dir.path());
    let run_id = server.newest_run_once("running");

    let mut follower = Follower::connect(&server, &run_id, "");
    let (name, first) = follower.next();
    assert_eq!(name, "status", "the first event is the whole object");
    let mut rebuilt = Rebuilt::default();
    rebuilt.apply(&name, first);
    follow_until(
        &mut follower,
        &mut rebuilt,
        "hold running, beside done",
        |rebuilt| {
            rebuilt.stage_status("hold") == Some("running")
                && rebuilt.stage_status("beside") == Some("success")
        },
    );

    // A reconnecting client (EventSource sends the last id it saw) starts
    // over from the whole object.
    let mut again = Follower::connect(&server, &run_id, "Last-Event-ID: 1\r\n");
    let (name, whole) = again.next();
    assert_eq!(name, "status");
    assert_eq!(whole["stages"].as_array().map(Vec::len), Some(5), "{whole}");
    drop(again);

    std::fs::write(&flag, "").expect("release the held stage");
    let code = wait_bounded(&mut run, "baton run", LIMIT);
    assert_eq!(code, 0, "the run succeeds");
    let answered = server.get(&format!("/api/runs/{run_id}")).json();
    assert_eq!(answered["status"], "success", "{answered}");
    // Events are read at most every 250 ms and only the latest read is
    // sent, but the last one is never lost: the client ends where the
    // store did (a timeout here names what it got).
    let start = Instant::now();
    while rebuilt.status.as_ref() != Some(&answered) {
        assert!(
            start.elapsed() < LIMIT,
            "rebuilt {:?}\nanswered {answered}",
            rebuilt.status
        );
        let (name, data) = follower.next();
        rebuilt.apply(&name, data);
    }
    // Once `beside` ended, no delta named it again: each carried only what
    // changed, never the whole list.
    assert!(!rebuilt.deltas.is_empty(), "some events were deltas");
    assert!(
        rebuilt.deltas.iter().all(|&stages| stages < 5),
        "{:?}",
        rebuilt.deltas
    );
}
