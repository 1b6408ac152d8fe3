-- The durable job queue: one row per job. Times are milliseconds since the
-- Unix epoch. A job is claimed with a lease (owner, epoch, until); every
-- claim bumps the epoch, and a completion counts only with the epoch of
-- the claim it answers, so a worker that lost its lease cannot overwrite
-- the result of the one that took the job over.
CREATE TABLE jobs (
    id              BIGSERIAL PRIMARY KEY,
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

-- What a claim reads: the claimable jobs of one queue in claim order.
CREATE INDEX jobs_claimable ON jobs (queue, priority, not_before, id)
    WHERE status IN ('available', 'failed');
-- What the reaper reads: running jobs by lease expiry.
CREATE INDEX jobs_running ON jobs (lease_until) WHERE status = 'running';
CREATE INDEX jobs_status ON jobs (status, queue);

-- Counters the queue keeps for operators and tests (completions rejected
-- for a stale epoch, leases that expired).
CREATE TABLE queue_counters (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
