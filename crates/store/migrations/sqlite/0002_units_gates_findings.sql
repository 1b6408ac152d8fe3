-- Work inside a stage (fan-out children, validators, corrections), human
-- gate decisions, and validation findings.

-- One unit of work inside a stage: a fan-out child, a validator, a
-- correction. Units survive a crash and a resume after failure, so finished
-- children are not rerun and a correction cycle's count is not reset; a
-- rerun of the stage clears them.
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

-- A decision on a gate, bound to the stage attempt and the hash of the
-- artifact decided on: the key makes concurrent decisions on one artifact
-- yield exactly one row.
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

-- Findings of one validation cycle of a stage, in the reference format.
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
