-- Nodmix state, version 1. Every table is prefixed `nodmix_` so the schema can share a
-- database. JSON records are stored as bytes exactly as the file backend writes them
-- (`convert_from(body, 'UTF8')::jsonb` reads them in SQL).

-- Replicas and singletons --------------------------------------------------------------------
CREATE TABLE nodmix_replicas (
    id          text PRIMARY KEY,
    host        text NOT NULL,
    pid         integer NOT NULL,
    url         text,
    version     text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE nodmix_leases (
    name         text PRIMARY KEY,
    holder       text NOT NULL,
    epoch        bigint NOT NULL DEFAULT 1,
    acquired_at  timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);

-- Sessions: the index per agent, transcripts and their entries --------------------------------
CREATE TABLE nodmix_session_versions (
    agent_id    text PRIMARY KEY,
    version     bigint NOT NULL DEFAULT 0,
    generation  bigint NOT NULL DEFAULT 0
);

CREATE TABLE nodmix_session_index (
    agent_id  text NOT NULL,
    key       text NOT NULL,
    entry     bytea,            -- NULL: removed (a tombstone, until the index is compacted)
    seq       bigint NOT NULL,  -- the agent's version when this row last changed
    PRIMARY KEY (agent_id, key)
);
CREATE INDEX nodmix_session_index_seq ON nodmix_session_index (agent_id, seq);

CREATE TABLE nodmix_transcripts (
    id          bigserial PRIMARY KEY,
    agent_id    text NOT NULL,
    file_name   text NOT NULL,
    session_id  text NOT NULL,
    session_key text,
    header      bytea NOT NULL,
    status      text NOT NULL DEFAULT 'live',  -- live | archived | deleted
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (agent_id, file_name)
);
CREATE INDEX nodmix_transcripts_session ON nodmix_transcripts (session_id);

CREATE TABLE nodmix_transcript_entries (
    transcript_id  bigint NOT NULL REFERENCES nodmix_transcripts (id) ON DELETE CASCADE,
    seq            integer NOT NULL,
    body           bytea NOT NULL,
    PRIMARY KEY (transcript_id, seq)
);

-- Small documents: jobs, scheduler state, pairing, channel positions, the exec allowlist ------
CREATE TABLE nodmix_documents (
    namespace   text NOT NULL,
    name        text NOT NULL,
    body        bytea NOT NULL,
    version     bigint NOT NULL DEFAULT 1,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);

-- Cron run history and the slots already fired ----------------------------------------------
CREATE TABLE nodmix_cron_runs (
    job_id      text NOT NULL,
    run_id      text NOT NULL,
    started_at  double precision NOT NULL,
    status      text NOT NULL,
    owner       text,
    record      bytea NOT NULL,
    PRIMARY KEY (job_id, run_id)
);
CREATE INDEX nodmix_cron_runs_started ON nodmix_cron_runs (job_id, started_at);
CREATE INDEX nodmix_cron_runs_running ON nodmix_cron_runs (status) WHERE status = 'running';

CREATE TABLE nodmix_cron_slots (
    job_id      text NOT NULL,
    slot_ms     bigint NOT NULL,
    run_id      text NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, slot_ms)
);

-- Channels: messages accepted but not answered, and answered keys -----------------------------
CREATE TABLE nodmix_channel_pending (
    channel      text NOT NULL,
    key          text NOT NULL,
    received_at  double precision NOT NULL,
    message      bytea NOT NULL,
    PRIMARY KEY (channel, key)
);

CREATE TABLE nodmix_channel_answered (
    channel      text NOT NULL,
    key          text NOT NULL,
    answered_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel, key)
);
CREATE INDEX nodmix_channel_answered_at ON nodmix_channel_answered (channel, answered_at);

-- Suspended code-mode runs ---------------------------------------------------------------------
CREATE TABLE nodmix_codemode_runs (
    id           text PRIMARY KEY,
    agent_id     text NOT NULL,
    session_key  text NOT NULL,
    created_at   double precision NOT NULL,
    expires_at   double precision NOT NULL,
    holder       text,            -- the replica that parked it (or resumes it)
    consumed_by  text,            -- the `wait` call resuming it, until its result is recorded
    data         bytea NOT NULL
);

CREATE TABLE nodmix_codemode_ended (
    id          text PRIMARY KEY,
    scope       bytea NOT NULL,
    reason      text NOT NULL,
    ended_at    timestamptz NOT NULL DEFAULT now()
);

-- Subagent runs --------------------------------------------------------------------------------
CREATE TABLE nodmix_subagent_runs (
    id          text PRIMARY KEY,
    created_at  double precision NOT NULL,
    record      bytea NOT NULL
);

-- Events for WebSocket clients of other replicas (payloads too large for NOTIFY) --------------
CREATE TABLE nodmix_events (
    id          bigserial PRIMARY KEY,
    payload     bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per process, rewritten with a synchronous commit when a turn ends: waiting for it
-- makes every earlier (asynchronous) commit of that process durable.
CREATE TABLE nodmix_flushes (
    process  text PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now()
);
