-- The model conversation of each turn (prompt, assistant and tool messages), so a follow-up
-- continues the same conversation, and the commit a turn pushed, so a retried turn can tell
-- its work already landed.
ALTER TABLE turns ADD COLUMN messages jsonb;
ALTER TABLE turns ADD COLUMN commit_sha text;
