-- People's tokens for `baton serve`: the SHA-256 of each (the token itself
-- is shown once and never stored), under the name that is recorded as who
-- decided what the token was used for.
CREATE TABLE tokens (
    name       TEXT PRIMARY KEY,
    sha256     TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
