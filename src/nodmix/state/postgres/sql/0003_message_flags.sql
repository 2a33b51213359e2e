-- Each transcript entry says whether it is a top-level message, so session listings count
-- messages with an index-only count instead of reading and decoding every entry's body.
ALTER TABLE nodmix_transcript_entries ADD COLUMN message boolean NOT NULL DEFAULT false;

-- Entries written before this migration: flag them from their stored JSON. A body that is not
-- JSON (a line kept as it was read from a damaged file) stays unflagged, as listings on files
-- skip such a line too.
DO $$
DECLARE
    r record;
    doc jsonb;
BEGIN
    FOR r IN SELECT transcript_id, seq, body FROM nodmix_transcript_entries LOOP
        BEGIN
            doc := convert_from(r.body, 'UTF8')::jsonb;
        EXCEPTION WHEN others THEN
            CONTINUE;
        END;
        IF jsonb_typeof(doc) = 'object' AND doc ->> 'type' = 'message'
                AND doc ->> 'parentToolCallId' IS NULL THEN
            UPDATE nodmix_transcript_entries SET message = true
                WHERE transcript_id = r.transcript_id AND seq = r.seq;
        END IF;
    END LOOP;
END $$;
