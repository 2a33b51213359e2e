-- Pre-compaction checkpoints: the session's transcript before a compaction changed it
-- (compressed exactly as the file store keeps it), so any replica can roll a session back.
CREATE TABLE nodmix_checkpoints (
    agent_id     text NOT NULL,
    id           text NOT NULL,
    session_key  text NOT NULL,
    created_at   bigint NOT NULL,
    info         bytea NOT NULL,
    body         bytea NOT NULL,
    PRIMARY KEY (agent_id, id)
);
CREATE INDEX nodmix_checkpoints_session ON nodmix_checkpoints (agent_id, session_key, created_at);
