-- The governance ledger (docs/governance.md): what happened in one piece of agent
-- work, with its evidence. A scope is a run, a task or a free agent session.
-- Order within a scope is `seq`, assigned from the scope's counter row in
-- the same transaction as the event: freshness is decided by this order,
-- never by `recorded_at`.
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
