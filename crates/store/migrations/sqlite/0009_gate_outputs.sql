-- What a gate decision was made on: each output of the gate's artifact as
-- it was then, its hash and the start of its text (64 KiB at most, less
-- once the decision's outputs hold 1 MiB; `truncated` says so), so that a
-- gate waiting again shows what changed since. Decisions recorded before
-- this table have no rows here.
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
