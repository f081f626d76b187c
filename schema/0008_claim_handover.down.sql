-- Back to migration 0005's release, which expects the session's hold.
CREATE OR REPLACE FUNCTION idemgen_release_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> lock_id::text THEN
        RETURN false;
    END IF;
    PERFORM set_config('idemgen.claim', '', false);
    RESET idle_session_timeout;
    RESET idle_in_transaction_session_timeout;
    RETURN pg_advisory_unlock(lock_id);
END
$$;

DROP FUNCTION IF EXISTS idemgen_hand_over_claim(bigint);
