-- Back to migration 0005's idemgen_claim; emptied rows are deleted, as
-- the reaper did before.
CREATE OR REPLACE FUNCTION idemgen_claim(lock_id bigint, idle_timeout_ms bigint,
    key_scope text, key_operation text, key_key text, expect_attempt integer, takeover boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') = lock_id::text
       OR NOT pg_try_advisory_xact_lock(lock_id) THEN
        RAISE EXCEPTION 'idemgen: the key is held by another attempt' USING ERRCODE = 'IG409';
    END IF;
    PERFORM set_config('idle_in_transaction_session_timeout', idle_timeout_ms::text, true);
    IF coalesce((SELECT CASE WHEN takeover AND k.status = 'in_flight' AND k.locked_until <= now() THEN k.attempt
                             WHEN NOT takeover AND k.status = 'completed' AND k.expires_at <= now() THEN k.attempt
                             ELSE -1 END
                 FROM idempotency_keys AS k
                 WHERE k.scope = key_scope AND k.operation = key_operation AND k.key = key_key), 0) <> expect_attempt THEN
        RAISE EXCEPTION 'idemgen: the key is not free as it was read' USING ERRCODE = 'IG409';
    END IF;
END
$$;

DROP FUNCTION IF EXISTS idemgen_claimable(boolean, text, timestamptz, timestamptz, integer, integer, boolean);
DELETE FROM idempotency_keys WHERE status = 'expired';
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_status_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_status_check
    CHECK (status IN ('in_flight', 'completed'));
ALTER TABLE idempotency_keys DROP COLUMN IF EXISTS derived;
