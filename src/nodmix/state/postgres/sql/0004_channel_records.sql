-- Append-only records of a channel (WhatsApp's handled message ids): one row per record, so a
-- message adds a row instead of rewriting a document; the owner compacts them when they grow.
CREATE TABLE nodmix_channel_records (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel  text NOT NULL,
    name     text NOT NULL,
    body     bytea NOT NULL
);
CREATE INDEX nodmix_channel_records_by_name ON nodmix_channel_records (channel, name, id);
