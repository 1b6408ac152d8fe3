-- A run's documents (plan, params, sources, options) move out of the runs
-- row into a table of their own. A plan is large (hundreds of kilobytes for
-- a thousand stages), and the runs row is read and written on every commit
-- of a drive — the lease epoch fences each one. With the documents inline,
-- SQLite walked the whole overflow chain of the plan to reach the lease
-- columns behind it, on every commit.
CREATE TABLE run_documents (
    run_id  TEXT PRIMARY KEY REFERENCES runs (run_id),
    plan    TEXT NOT NULL,
    params  TEXT NOT NULL,
    sources TEXT NOT NULL,
    options TEXT NOT NULL
);

INSERT INTO run_documents (run_id, plan, params, sources, options)
    SELECT run_id, plan, params, sources, options FROM runs;

ALTER TABLE runs DROP COLUMN plan;
ALTER TABLE runs DROP COLUMN params;
ALTER TABLE runs DROP COLUMN sources;
ALTER TABLE runs DROP COLUMN options;
