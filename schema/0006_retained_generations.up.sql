-- Generations that outlive the reaper. The keys an attempt derives for
-- foreign calls are computed from the key's generation, which lives on the
-- key's row; were the reaper to delete the row, the key's next use would
-- be generation 1 again, with the first use's derived keys. So the row of
-- a key whose attempts derived a key is never deleted whole: the reaper
-- empties it (no fingerprint, no response) and marks it 'expired', which
-- keeps only its identity and generation. Rows whose attempts derived no
-- key are deleted as before: reusing their generation numbers repeats no
-- key anyone was sent.

-- derived is true once any attempt on the key has derived a key. Rows
-- written before this migration may have: they count as derived.
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS derived boolean NOT NULL DEFAULT true;
ALTER TABLE idempotency_keys ALTER COLUMN derived SET DEFAULT false;

ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_status_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_status_check
    CHECK (status IN ('in_flight', 'completed', 'expired'));

-- What a claim requires of the key's row, written once for every claim:
-- the engine decided on the claim from a read of the row, and the claim
-- holds only while the row is still as read. A new use needs no row
-- (expect_attempt 0) or the terminal row read, past its TTL; a takeover
-- needs the in-flight row read, past its lease. found is false when the
-- key has no row.
CREATE OR REPLACE FUNCTION idemgen_claimable(found boolean, row_status text, row_locked_until timestamptz,
    row_expires_at timestamptz, row_attempt integer, expect_attempt integer, takeover boolean)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN NOT found THEN expect_attempt = 0 AND NOT takeover
        WHEN row_attempt <> expect_attempt THEN false
        WHEN takeover THEN row_status = 'in_flight' AND row_locked_until <= now()
        ELSE row_status IN ('completed', 'expired') AND row_expires_at <= now()
    END
$$;

-- idemgen_claim of migration 0005, on idemgen_claimable.
CREATE OR REPLACE FUNCTION idemgen_claim(lock_id bigint, idle_timeout_ms bigint,
    key_scope text, key_operation text, key_key text, expect_attempt integer, takeover boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    k idempotency_keys%ROWTYPE;
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') = lock_id::text
       OR NOT pg_try_advisory_xact_lock(lock_id) THEN
        RAISE EXCEPTION 'idemgen: the key is held by another attempt' USING ERRCODE = 'IG409';
    END IF;
    PERFORM set_config('idle_in_transaction_session_timeout', idle_timeout_ms::text, true);
    SELECT * INTO k FROM idempotency_keys AS r
    WHERE r.scope = key_scope AND r.operation = key_operation AND r.key = key_key;
    IF NOT idemgen_claimable(FOUND, k.status, k.locked_until, k.expires_at, k.attempt, expect_attempt, takeover) THEN
        RAISE EXCEPTION 'idemgen: the key is not free as it was read' USING ERRCODE = 'IG409';
    END IF;
END
$$;
