//! The queue against a PostgreSQL cluster of the test's own, so that
//! restarting it or cutting its connections disturbs no other test:
//!
//! * a restart in the middle of a run (`pg_ctl restart -m fast`, later
//!   a crash by `-m immediate` and 14 s down, past the lease and the
//!   store's 10 s wait for a connection, then a start
//!   that recovers from the WAL), the workers' backends
//!   terminated (`pg_terminate_backend`) and a worker paused past its lease:
//!   the workers ride it out, and afterwards every job succeeded exactly
//!   once, none is lost, no stale outcome was recorded, every side effect
//!   happened;
//! * several hosts: two groups of `baton worker` processes, each its own
//!   process group and working directory (and, where `ip netns` works, its
//!   own network namespace reaching PostgreSQL over a veth pair), working a
//!   queue fan-out that `baton run --no-local-worker` drives from a third
//!   directory.
//!
//! The cluster is made with the binaries of `BATON_TEST_PG_BIN` (run as
//! `BATON_TEST_PG_USER` when set: PostgreSQL refuses root), which
//! `scripts/lib/postgres.sh` exports; without them the tests fail, unless
//! `BATON_TEST_SKIP` lists `postgres`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::project::HEADER;
use crate::queue::{Suite, TIMINGS, Workers, check_succeeded, read_lines, signal};

/// A program, not yet started.
fn program(name: impl AsRef<std::ffi::OsStr>) -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests run a PostgreSQL cluster, namespaces and workers of their own"
    )]
    Command::new(name)
}

fn succeed(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what}: {error}"));
    assert!(
        output.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A throw-away PostgreSQL cluster, stopped and removed on drop.
struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    user: Option<String>,
    port: u16,
}

impl Cluster {
    /// A cluster listening on 127.0.0.1 and `listen` (trusting `trust`, a
    /// CIDR), or `None` (the test skips) when no PostgreSQL is at hand
    /// outside CI.
    fn start(test: &str, listen: &[String], trust: Option<&str>) -> Option<Cluster> {
        let Some(bin) = std::env::var_os("BATON_TEST_PG_BIN").filter(|bin| !bin.is_empty()) else {
            baton_test_support::needs::missing(
                baton_test_support::needs::Need::Postgres,
                &format!(
                    "PostgreSQL's binaries for a cluster of its own ({test}; BATON_TEST_PG_BIN)"
                ),
            );
            return None;
        };
        let user = std::env::var("BATON_TEST_PG_USER")
            .ok()
            .filter(|user| !user.is_empty());
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::create_dir(dir.path().join("sock")).expect("socket directory");
        let mut cluster = Cluster {
            dir,
            bin: PathBuf::from(bin),
            user,
            port: 0,
        };
        if let Some(user) = &cluster.user {
            succeed(
                program("chown").args(["-R", user]).arg(cluster.dir.path()),
                "chown the cluster's directory",
            );
        }
        let data = cluster.data();
        succeed(
            cluster
                .tool("initdb")
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    "baton",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                ])
                .args(["--no-sync", "--no-instructions"]),
            "initdb",
        );
        if let Some(trust) = trust {
            let mut hba = std::fs::read_to_string(data.join("pg_hba.conf")).expect("pg_hba.conf");
            hba.push_str(&format!("host all all {trust} trust\n"));
            std::fs::write(data.join("pg_hba.conf"), hba).expect("pg_hba.conf");
        }
        let base = std::fs::read_to_string(data.join("postgresql.conf")).expect("postgresql.conf");
        let addresses = std::iter::once("127.0.0.1".to_owned())
            .chain(listen.iter().cloned())
            .collect::<Vec<_>>()
            .join(",");
        // `fsync` off is safe here (the OS does not crash), but commits
        // stay synchronous: an immediate stop (a crash of the server) must
        // not lose acknowledged commits, or a lost claim is claimed again
        // under the same epoch.
        for attempt in 1..=5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("a free port")
                .port();
            std::fs::write(
                data.join("postgresql.conf"),
                format!(
                    "{base}\nlisten_addresses = '{addresses}'\nport = {port}\nunix_socket_directories = '{}'\nfsync = off\nfull_page_writes = off\nmax_connections = 100\n",
                    cluster.dir.path().join("sock").display()
                ),
            )
            .expect("postgresql.conf");
            let started = cluster
                .pg_ctl(&[
                    "-l",
                    &cluster.log().to_string_lossy(),
                    "-w",
                    "-t",
                    "60",
                    "start",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if started {
                cluster.port = port;
                return Some(cluster);
            }
            assert!(
                attempt < 5,
                "PostgreSQL did not start: {}",
                std::fs::read_to_string(cluster.log()).unwrap_or_default()
            );
        }
        unreachable!()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The store's URL through `host`.
    fn url(&self, host: &str) -> String {
        format!("postgres://baton@{host}:{}/postgres", self.port)
    }

    /// A PostgreSQL program, run as the cluster's user.
    fn tool(&self, name: &str) -> Command {
        let path = self.bin.join(name);
        match &self.user {
            Some(user) => {
                let mut command = program("runuser");
                command.args(["-u", user, "--"]).arg(path);
                command
            }
            None => program(path),
        }
    }

    fn pg_ctl(&self, args: &[&str]) -> Command {
        let mut command = self.tool("pg_ctl");
        command.arg("-D").arg(self.data()).args(args);
        command
    }

    /// Restarts the server (`mode`: `fast` or `immediate`); returns how
    /// long it took.
    fn restart(&self, mode: &str) -> Duration {
        let started = Instant::now();
        succeed(
            &mut self.pg_ctl(&[
                "-l",
                &self.log().to_string_lossy(),
                "-m",
                mode,
                "-w",
                "-t",
                "60",
                "restart",
            ]),
            &format!("pg_ctl restart -m {mode}"),
        );
        started.elapsed()
    }

    /// Crashes the server (`pg_ctl stop -m immediate`: no checkpoint, the
    /// next start recovers from the WAL) and starts it again after `down`.
    fn crash_for(&self, down: Duration) {
        succeed(
            &mut self.pg_ctl(&["-m", "immediate", "-w", "stop"]),
            "pg_ctl stop -m immediate",
        );
        std::thread::sleep(down);
        succeed(
            &mut self.pg_ctl(&[
                "-l",
                &self.log().to_string_lossy(),
                "-w",
                "-t",
                "60",
                "start",
            ]),
            "pg_ctl start",
        );
    }

    /// Runs `sql`; returns its output's rows.
    fn psql(&self, sql: &str) -> String {
        let output = self
            .tool("psql")
            .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"])
            .args(["-d", &self.url("127.0.0.1"), "-c", sql])
            .output()
            .expect("psql");
        assert!(
            output.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .pg_ctl(&["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Waits for `succeeded` to reach `target`, failing after `limit`.
fn wait_until(suite: &Suite, target: usize, started: Instant, limit: Duration) {
    loop {
        if suite
            .try_count("succeeded")
            .is_some_and(|done| done >= target)
        {
            return;
        }
        assert!(
            started.elapsed() < limit,
            "the queue did not reach {target} succeeded jobs in {limit:?} ({:?})",
            suite.try_count("succeeded")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn queue_survives_a_postgres_restart_and_terminated_backends() {
    const JOBS: usize = 1500;
    const WORKERS: usize = 4;
    let Some(cluster) = Cluster::start("the PostgreSQL restart test", &[], None) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let suite = Suite {
        dir: dir.path().to_owned(),
        database_url: Some(cluster.url("127.0.0.1")),
        queue: "restart".to_owned(),
    };
    let script = format!(
        "echo \"$BATON_JOB_ID $BATON_JOB_EPOCH $BATON_WORKER_PID\" >> {}/\"$BATON_JOB_ID\"; sleep 0.0$((RANDOM % 5))",
        out.display()
    );
    let count = JOBS.to_string();
    let enqueued = suite.json(&[
        "queue",
        "enqueue",
        "--queue",
        &suite.queue,
        "--script",
        &script,
        "--max-attempts",
        "50",
        "--count",
        &count,
        "--json",
    ]);
    assert_eq!(enqueued["created"].as_u64(), Some(JOBS as u64));

    let limit = Duration::from_secs(240);
    let started = Instant::now();
    let pool = Workers::start(&suite, WORKERS);

    // A pause past the lease first: the fence must reject its late outcomes.
    wait_until(&suite, JOBS / 10, started, limit);
    let paused = pool[0].id();
    signal(paused, "-STOP");
    std::thread::sleep(Duration::from_millis(4500));
    signal(paused, "-CONT");

    wait_until(&suite, JOBS * 3 / 10, started, limit);
    let fast = cluster.restart("fast");

    wait_until(&suite, JOBS * 5 / 10, started, limit);
    let terminated = cluster.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
    );
    let terminated: u64 = terminated.trim().parse().expect("a count");

    wait_until(&suite, JOBS * 7 / 10, started, limit);
    // Down for longer than the lease: the workers give up their jobs
    // (they may run elsewhere by now) and the reaper hands them out again.
    // And for longer than the store waits for a connection (10 s): a claim
    // or an outcome begun in the outage's first seconds fails, whether or
    // not a query was under way when the server went down.
    let down = Duration::from_secs(14);
    cluster.crash_for(down);

    wait_until(&suite, JOBS, started, limit);
    let elapsed = started.elapsed();

    let mut reports = Vec::new();
    for (_, output) in pool.stop() {
        assert!(
            output.status.success(),
            "a worker did not survive the restarts: {:?}",
            output.status
        );
        reports.push(serde_json::from_slice::<Value>(&output.stdout).expect("report"));
    }
    let sum = |field: &str| -> u64 {
        reports
            .iter()
            .map(|report| report[field].as_u64().unwrap_or(0))
            .sum()
    };

    let all = suite.json(&["queue", "list", "--queue", &suite.queue, "--json"]);
    let all = all.as_array().expect("a list");
    assert_eq!(all.len(), JOBS, "lost or unexpected jobs");
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    for job in all {
        let id = job["id"].as_i64().unwrap();
        assert!(seen.insert(id), "job {id} listed twice");
        duplicates += check_succeeded(job, &read_lines(&out.join(id.to_string()))).len();
    }
    let stale = sum("stale");
    let store_errors = sum("store_errors");
    eprintln!(
        "postgres restart: {JOBS} jobs, {WORKERS} workers, {:.1} s; restart -m fast {:.1} s, crashed (-m immediate) and down {:.1} s, {terminated} backends terminated, 1 pause past the lease; {} claims, {stale} stale completions rejected, {} leases lost, {store_errors} store errors retried, {duplicates} duplicate executions",
        elapsed.as_secs_f64(),
        fast.as_secs_f64(),
        down.as_secs_f64(),
        sum("claimed"),
        sum("lost"),
    );
    assert!(terminated > 0, "no worker backend was terminated");
    assert!(
        store_errors > 0,
        "the workers report no store error across the database's outage"
    );
    assert!(
        stale > 0,
        "the paused worker's late outcomes were never rejected: the fence did not run"
    );
}

/// Network namespaces, each reaching the host over a veth pair; deleted
/// on drop.
struct Namespaces {
    names: Vec<String>,
    /// The host's address on each pair: where PostgreSQL listens.
    hosts: Vec<String>,
    subnet: String,
}

impl Namespaces {
    /// `count` namespaces, or why there are none (no `ip`, no privilege).
    fn create(count: usize) -> Result<Namespaces, String> {
        let tag = std::process::id() % 100_000;
        let octet = std::process::id() % 200 + 20;
        let mut namespaces = Namespaces {
            names: Vec::new(),
            hosts: Vec::new(),
            subnet: format!("10.213.{octet}.0/24"),
        };
        for index in 0..count {
            let name = format!("baton-{tag}-{index}");
            let ip = |args: &[&str]| -> Result<(), String> {
                let output = program("ip")
                    .args(args)
                    .output()
                    .map_err(|error| format!("ip {}: {error}", args.join(" ")))?;
                if output.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "ip {}: {}",
                        args.join(" "),
                        String::from_utf8_lossy(&output.stderr).trim()
                    ))
                }
            };
            ip(&["netns", "add", &name])?;
            namespaces.names.push(name.clone());
            let host_side = format!("bh{tag}x{index}");
            let inner_side = format!("bn{tag}x{index}");
            let host = format!("10.213.{octet}.{}", index * 4 + 1);
            let inner = format!("10.213.{octet}.{}", index * 4 + 2);
            ip(&[
                "link",
                "add",
                &host_side,
                "type",
                "veth",
                "peer",
                "name",
                &inner_side,
                "netns",
                &name,
            ])?;
            ip(&["addr", "add", &format!("{host}/30"), "dev", &host_side])?;
            ip(&["link", "set", &host_side, "up"])?;
            let inside = ["netns", "exec", name.as_str()];
            ip(&[
                &inside[..],
                &[
                    "ip",
                    "addr",
                    "add",
                    &format!("{inner}/30"),
                    "dev",
                    &inner_side,
                ],
            ]
            .concat())?;
            ip(&[&inside[..], &["ip", "link", "set", &inner_side, "up"]].concat())?;
            ip(&[&inside[..], &["ip", "link", "set", "lo", "up"]].concat())?;
            namespaces.hosts.push(host);
        }
        Ok(namespaces)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the pair, and so the pair.
        for name in &self.names {
            let _ = program("ip").args(["netns", "del", name]).status();
        }
    }
}

/// One simulated host: a working directory and its workers.
struct Host {
    dir: tempfile::TempDir,
    namespace: Option<String>,
    database_url: String,
    workers: Vec<Child>,
}

impl Host {
    fn baton(&self, args: &[&str]) -> Command {
        let baton = env!("CARGO_BIN_EXE_baton");
        let mut command = match &self.namespace {
            Some(name) => {
                let mut command = program("ip");
                command.args(["netns", "exec", name, baton]);
                command
            }
            None => program(baton),
        };
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("BATON_DATABASE_URL", &self.database_url)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        for (name, value) in TIMINGS {
            command.env(name, value);
        }
        // Nothing here is meant to lose a lease: a longer one keeps "each
        // job ran once" true on a loaded machine.
        command.env("BATON_WORKER_LEASE_MS", "10000");
        command
    }

    fn start_worker(&mut self) {
        // Its own process group: a tree of its own, not the test's.
        let child = self
            .baton(&["worker", "--concurrency", "2", "--json"])
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a worker");
        self.workers.push(child);
    }

    /// Stops the workers; returns their reports.
    fn stop(&mut self) -> Vec<Value> {
        for child in &self.workers {
            signal(child.id(), "-TERM");
        }
        self.workers
            .drain(..)
            .map(|child| {
                let output = child.wait_with_output().expect("worker exits");
                assert!(output.status.success(), "a worker failed at SIGTERM");
                serde_json::from_slice(&output.stdout).expect("report")
            })
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for child in &mut self.workers {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn workers_on_two_simulated_hosts_work_one_runs_queue_fan_out() {
    const ITEMS: usize = 48;
    let namespaces = match Namespaces::create(2) {
        Ok(namespaces) => Some(namespaces),
        Err(why) => {
            eprintln!(
                "network namespaces unavailable ({why}): the two hosts are separate process groups and directories on the host's network"
            );
            None
        }
    };
    let listen = namespaces
        .as_ref()
        .map_or_else(Vec::new, |namespaces| namespaces.hosts.clone());
    let trust = namespaces
        .as_ref()
        .map(|namespaces| namespaces.subnet.clone());
    let Some(cluster) = Cluster::start("the multi-host test", &listen, trust.as_deref()) else {
        return;
    };
    let local = cluster.url("127.0.0.1");

    let mut hosts: Vec<Host> = (0..2)
        .map(|index| Host {
            dir: tempfile::tempdir().expect("a host's directory"),
            namespace: namespaces
                .as_ref()
                .map(|namespaces| namespaces.names[index].clone()),
            database_url: namespaces.as_ref().map_or_else(
                || local.clone(),
                |namespaces| cluster.url(&namespaces.hosts[index]),
            ),
            workers: Vec::new(),
        })
        .collect();
    if let Some(namespaces) = &namespaces {
        // Inside a namespace the host's loopback is out of reach: the
        // workers really go through the pair.
        let connects = |address: &str| {
            program("ip")
                .args(["netns", "exec", &namespaces.names[0], "bash", "-c"])
                .arg(format!("exec 3<>/dev/tcp/{address}/{}", cluster.port))
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        };
        assert!(
            !connects("127.0.0.1"),
            "the host's loopback was reachable from a namespace"
        );
        assert!(
            connects(&namespaces.hosts[0]),
            "PostgreSQL unreachable over the veth pair"
        );
    }
    for host in &mut hosts {
        host.start_worker();
        host.start_worker();
    }

    // The driver, in a third directory, leaves every job to the hosts.
    let driver = tempfile::tempdir().expect("the driver's directory");
    let runs = driver.path().join("ran");
    std::fs::create_dir(&runs).unwrap();
    let items: Vec<Value> = (0..ITEMS)
        .map(|index| json!({"id": format!("i{index}")}))
        .collect();
    std::fs::write(
        driver.path().join("items.json"),
        json!({ "items": items }).to_string(),
    )
    .unwrap();
    std::fs::write(
        driver.path().join("wf.yaml"),
        format!(
            "{HEADER}  - name: src\n    kind: execute\n    description: d\n    executor: inline\n    script: 'cp \"$BATON_PROJECT_DIR/items.json\" outputs/src.json'\n    writes_to: [src.json]\n  - name: fan\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [src]\n    script: 'true'\n    writes_to: ['fan-{{id}}.txt']\n    fan_out: {{source: src, field: items, key: id, mode: worker_queue, script: 'echo \"$BATON_WORKER_PID\" >> {}/\"$BATON_ITEM_NAME\"; echo ran; printf %s {{id}} > \"outputs/fan-$BATON_ITEM_NAME.txt\"; sleep 0.1'}}\n",
            runs.display()
        ),
    )
    .unwrap();
    let driver_host = Host {
        dir: driver,
        namespace: None,
        database_url: local,
        workers: Vec::new(),
    };
    let started = Instant::now();
    let mut run = driver_host
        .baton(&["run", "wf.yaml", "--no-local-worker", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton run starts");
    let code = crate::project::wait_bounded(&mut run, "baton run", Duration::from_secs(180));
    let elapsed = started.elapsed();
    let output = run.wait_with_output().expect("run output");
    assert_eq!(
        code,
        0,
        "baton run: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let reports: Vec<Vec<Value>> = hosts.iter_mut().map(Host::stop).collect();

    // Each job ran once, by a worker of one host, whose own directory
    // holds its logs.
    let pids: Vec<HashSet<u32>> = reports
        .iter()
        .map(|reports| {
            reports
                .iter()
                .map(|report| owner_pid(report["worker"].as_str().expect("worker")))
                .collect()
        })
        .collect();
    let listed = driver_host
        .baton(&["queue", "list", "--json"])
        .output()
        .expect("list");
    let jobs: Value = serde_json::from_slice(&listed.stdout).expect("jobs");
    let jobs = jobs.as_array().expect("jobs");
    assert_eq!(jobs.len(), ITEMS, "one job per item");
    let mut per_host: BTreeMap<usize, usize> = BTreeMap::new();
    let mut keys = HashMap::new();
    for job in jobs {
        let id = job["id"].as_i64().expect("id");
        assert_eq!(job["kind"], "workflow_stage", "{job}");
        assert_eq!(job["status"], "succeeded", "{job}");
        assert_eq!(job["attempts"], 1, "{job}");
        let worker = job["result"]["worker"].as_str().expect("the job's worker");
        let pid = owner_pid(worker);
        let host = pids
            .iter()
            .position(|pids| pids.contains(&pid))
            .unwrap_or_else(|| panic!("job {id} ran by {worker}, no worker of either host"));
        *per_host.entry(host).or_default() += 1;
        let logs = |host: &Host| host.dir.path().join(".baton/jobs").join(id.to_string());
        assert!(logs(&hosts[host]).is_dir(), "job {id}: no logs on its host");
        assert!(
            !logs(&hosts[1 - host]).exists(),
            "job {id}: logs on the other host"
        );
        let item = job["payload"]["env"]["BATON_ITEM_NAME"]
            .as_str()
            .expect("the job's item")
            .to_owned();
        let lines = std::fs::read_to_string(runs.join(&item)).unwrap_or_default();
        assert_eq!(
            lines.lines().collect::<Vec<_>>(),
            [pid.to_string()],
            "item {item} ran once"
        );
        assert!(keys.insert(item, id).is_none(), "two jobs for one item");
    }
    assert_eq!(per_host.len(), 2, "both hosts did work: {per_host:?}");
    eprintln!(
        "two hosts ({}): {ITEMS} jobs of one run in {:.1} s, {} and {} by each host, each run once",
        if namespaces.is_some() {
            "network namespaces over veth pairs"
        } else {
            "separate process groups and directories"
        },
        elapsed.as_secs_f64(),
        per_host[&0],
        per_host[&1]
    );
}

/// The pid in a worker's name `host:pid:tag`.
fn owner_pid(owner: &str) -> u32 {
    owner
        .split(':')
        .nth(1)
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("worker name {owner}"))
}
