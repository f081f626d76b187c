-- compatible-from: 0008
-- (Code that knows migrations up to 0008 may serve a database with this
-- one applied: it adds a table and a trigger that code reads or fires
-- without knowing them.)
--
-- The replay filter's epoch. Servers with a replay filter keep its
-- entries under the epoch they knew when they read the row, and read
-- only those of the epoch they know now, which they read again every
-- second or so. Removing a completed key before its TTL (a forget, or a
-- DELETE by hand) moves the epoch on, so that no server replays an entry
-- of the key's earlier use once it has read the new epoch: not even one
-- that Redis brought back from a snapshot taken before the forget, or
-- that a replica promoted after it never lost.
CREATE TABLE IF NOT EXISTS idemgen_filter_epoch (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    epoch bigint NOT NULL
);
INSERT INTO idemgen_filter_epoch (epoch) VALUES (1) ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION idemgen_next_filter_epoch()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE idemgen_filter_epoch SET epoch = epoch + 1;
    RETURN NULL;
END
$$;

-- Only a completed row still within its TTL can have an entry that a
-- replay may read: the reaper's work on expired rows leaves the epoch.
DROP TRIGGER IF EXISTS idemgen_forget_deleted ON idempotency_keys;
CREATE TRIGGER idemgen_forget_deleted AFTER DELETE ON idempotency_keys
    FOR EACH ROW WHEN (OLD.status = 'completed' AND OLD.expires_at > now())
    EXECUTE FUNCTION idemgen_next_filter_epoch();
DROP TRIGGER IF EXISTS idemgen_forget_emptied ON idempotency_keys;
CREATE TRIGGER idemgen_forget_emptied AFTER UPDATE ON idempotency_keys
    FOR EACH ROW WHEN (OLD.status = 'completed' AND OLD.expires_at > now()
        AND (NEW.status <> 'completed' OR NEW.expires_at <= now()))
    EXECUTE FUNCTION idemgen_next_filter_epoch();
