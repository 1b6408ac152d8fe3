-- Runs, their stages, every attempt, recorded output hashes and an
-- append-only event log. Times are milliseconds since the Unix epoch.
CREATE TABLE runs (
    run_id        TEXT PRIMARY KEY,
    workflow      TEXT NOT NULL,
    workflow_path TEXT NOT NULL,
    workspace     TEXT NOT NULL,
    status        TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    finished_at   BIGINT,
    plan          TEXT NOT NULL,
    params        TEXT NOT NULL,
    sources       TEXT NOT NULL,
    options       TEXT NOT NULL,
    error         TEXT,
    lease_owner   TEXT,
    lease_epoch   BIGINT NOT NULL DEFAULT 0,
    lease_until   BIGINT NOT NULL DEFAULT 0,
    cancel_requested BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE stages (
    run_id      TEXT NOT NULL REFERENCES runs (run_id),
    idx         BIGINT NOT NULL,
    name        TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    BIGINT NOT NULL DEFAULT 0,
    started_at  BIGINT,
    finished_at BIGINT,
    error       TEXT,
    note        TEXT,
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE attempts (
    run_id      TEXT NOT NULL,
    idx         BIGINT NOT NULL,
    attempt     BIGINT NOT NULL,
    status      TEXT NOT NULL,
    pid         BIGINT,
    pgid        BIGINT,
    proc_start  BIGINT,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT,
    exit_code   BIGINT,
    error       TEXT,
    PRIMARY KEY (run_id, idx, attempt)
);

CREATE TABLE artifacts (
    run_id TEXT NOT NULL,
    idx    BIGINT NOT NULL,
    path   TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    bytes  BIGINT NOT NULL,
    PRIMARY KEY (run_id, idx, path)
);

CREATE TABLE events (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    at     BIGINT NOT NULL,
    kind   TEXT NOT NULL,
    detail TEXT NOT NULL
);

CREATE INDEX events_by_run ON events (run_id, seq);
