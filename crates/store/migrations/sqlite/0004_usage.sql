-- What each agent attempt consumed, as read from its output: one row per
-- stage attempt (unit_key '') or unit attempt. Cost is in millionths of a
-- USD so that rows stay exact integers on both backends.
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
    model              TEXT,
    PRIMARY KEY (run_id, idx, unit_key, attempt)
);
