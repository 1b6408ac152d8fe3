-- The agent session an attempt continued instead of starting a new one (a
-- correction that resumed the session of the work it corrects), or NULL.
ALTER TABLE usage ADD COLUMN resumed_session TEXT;
