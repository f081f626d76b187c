-- A first execution in four statements. The lookup's claim is a session
-- lock (migration 0005), and releasing it took a statement of its own
-- after COMMIT. Instead, the statement that writes the key's row hands
-- the claim over to the attempt's transaction: it takes the key's lock
-- for the transaction, which the session's own hold grants at once, then
-- drops the session's hold. The key is held throughout, and COMMIT frees
-- it with the row visible.
--
-- The session's settings change with the transaction: when it rolls back,
-- idemgen.claim names the key again though the session's hold is gone, so
-- idemgen_release_claim then only resets the settings.

-- Hands the claim this session holds over to its transaction. False when
-- the session holds no claim on lock_id: a pooler sent the statement to
-- another session than the lookup's.
CREATE OR REPLACE FUNCTION idemgen_hand_over_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> lock_id::text THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(lock_id);
    PERFORM pg_advisory_unlock(lock_id);
    PERFORM set_config('idemgen.claim', '', false);
    RESET idle_session_timeout;
    RESET idle_in_transaction_session_timeout;
    RETURN true;
END
$$;

-- idemgen_release_claim of migration 0005, for a session whose handover
-- rolled back: it claimed the key, and its hold is gone already.
CREATE OR REPLACE FUNCTION idemgen_release_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> lock_id::text THEN
        RETURN false;
    END IF;
    PERFORM set_config('idemgen.claim', '', false);
    RESET idle_session_timeout;
    RESET idle_in_transaction_session_timeout;
    -- An advisory lock on a bigint is (classid, objid) = its high and low
    -- halves, objsubid 1.
    IF EXISTS (SELECT 1 FROM pg_locks AS l
               WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.objsubid = 1
                 AND l.classid = ((lock_id >> 32) & 4294967295)::oid AND l.objid = (lock_id & 4294967295)::oid
                 AND l.mode = 'ExclusiveLock') THEN
        PERFORM pg_advisory_unlock(lock_id);
    END IF;
    RETURN true;
END
$$;
