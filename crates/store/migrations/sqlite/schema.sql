-- The schema every migration in this directory builds, in one script: a
-- new store is created from it, which takes a fraction of the time replaying
-- the history does (0006's DROP COLUMNs re-read the whole schema each). An
-- existing store replays the migrations it lacks. Each statement is the text
-- SQLite keeps for the object after the migrations, so that a test can check
-- that both ways end in the same schema; a new migration must be added here
-- too, or that test fails.

CREATE TABLE runs (
    run_id        TEXT PRIMARY KEY,
    workflow      TEXT NOT NULL,
    workflow_path TEXT NOT NULL,
    workspace     TEXT NOT NULL,
    status        TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    finished_at   BIGINT,
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

CREATE TABLE units (
    run_id      TEXT NOT NULL,
    idx         BIGINT NOT NULL,
    unit_key    TEXT NOT NULL,
    ordinal     BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    cycle       BIGINT NOT NULL DEFAULT 0,
    label       TEXT NOT NULL,
    spec        TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    BIGINT NOT NULL DEFAULT 0,
    started_at  BIGINT,
    finished_at BIGINT,
    exit_code   BIGINT,
    error       TEXT,
    artifacts   TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (run_id, idx, unit_key)
);

CREATE TABLE gate_decisions (
    run_id     TEXT NOT NULL,
    idx        BIGINT NOT NULL,
    attempt    BIGINT NOT NULL,
    sha256     TEXT NOT NULL,
    decision   TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    decided_at BIGINT NOT NULL,
    comment    TEXT,
    PRIMARY KEY (run_id, idx, attempt, sha256)
);

CREATE TABLE findings (
    run_id     TEXT NOT NULL,
    idx        BIGINT NOT NULL,
    cycle      BIGINT NOT NULL,
    position   BIGINT NOT NULL,
    finding_id TEXT NOT NULL,
    status     TEXT NOT NULL,
    severity   TEXT NOT NULL,
    category   TEXT NOT NULL,
    claim      TEXT NOT NULL,
    expected   TEXT NOT NULL,
    actual     TEXT NOT NULL,
    source     TEXT NOT NULL,
    fix        TEXT NOT NULL,
    PRIMARY KEY (run_id, idx, cycle, position)
);

CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    queue           TEXT NOT NULL,
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    priority        BIGINT NOT NULL,
    status          TEXT NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    max_attempts    BIGINT NOT NULL,
    deferrals       BIGINT NOT NULL DEFAULT 0,
    not_before      BIGINT NOT NULL,
    lease_owner     TEXT,
    lease_epoch     BIGINT NOT NULL DEFAULT 0,
    lease_until     BIGINT NOT NULL DEFAULT 0,
    result          TEXT,
    error           TEXT,
    idempotency_key TEXT UNIQUE,
    created_at      BIGINT NOT NULL,
    started_at      BIGINT,
    finished_at     BIGINT
);

CREATE INDEX jobs_claimable ON jobs (queue, priority, not_before, id)
    WHERE status IN ('available', 'failed');

CREATE INDEX jobs_running ON jobs (lease_until) WHERE status = 'running';

CREATE INDEX jobs_status ON jobs (status, queue);

CREATE TABLE queue_counters (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);

CREATE TABLE usage (
    run_id             TEXT NOT NULL,
    idx                BIGINT NOT NULL,
    unit_key           TEXT NOT NULL,
    attempt            BIGINT NOT NULL,
    input_tokens       BIGINT,
    output_tokens      BIGINT,
    cache_read_tokens  BIGINT,
    cache_write_tokens BIGINT,
    cost_microusd      BIGINT,
    turns              BIGINT,
    session_id         TEXT,
    model              TEXT, resumed_session TEXT,
    PRIMARY KEY (run_id, idx, unit_key, attempt)
);

CREATE TABLE ledger_scopes (
    scope_kind  TEXT NOT NULL,
    scope_key   TEXT NOT NULL,
    last_seq    BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (scope_kind, scope_key)
);

CREATE TABLE ledger_events (
    scope_kind  TEXT NOT NULL,
    scope_key   TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    profile     TEXT NOT NULL,
    model       TEXT,
    session     TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (scope_kind, scope_key, seq)
);

CREATE TABLE run_documents (
    run_id  TEXT PRIMARY KEY REFERENCES runs (run_id),
    plan    TEXT NOT NULL,
    params  TEXT NOT NULL,
    sources TEXT NOT NULL,
    options TEXT NOT NULL
);

CREATE TABLE tokens (
    name       TEXT PRIMARY KEY,
    sha256     TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

CREATE TABLE gate_outputs (
    run_id    TEXT NOT NULL,
    idx       BIGINT NOT NULL,
    attempt   BIGINT NOT NULL,
    sha256    TEXT NOT NULL,
    path      TEXT NOT NULL,
    file_sha256 TEXT NOT NULL,
    content   TEXT,
    truncated BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, idx, attempt, sha256, path)
);
