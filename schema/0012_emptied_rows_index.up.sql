-- compatible-from: 0008
-- no-transaction
-- (Code that knows migrations up to 0008 may serve a database with this
-- one applied: it adds an index that no query of that code names.)
--
-- Emptied rows, found by their age. The reaper empties the row of a key
-- whose attempts derived keys instead of deleting it (migration 0006),
-- and deletes it only once it has been emptied for longer than
-- pgstore.ReapOptions.EmptiedFor, when no provider still remembers the
-- keys derived from it. The reaper's own index holds completed rows only;
-- this one finds those emptied long enough without reading the table.
--
-- Built CONCURRENTLY, which cannot run in a transaction: writes to the
-- key table go on while it is built. A build cut short leaves an invalid
-- index of this name; pgstore's migrator drops it first (this
-- migration's down), and with a migration tool run the down before you
-- run the up again.
CREATE INDEX CONCURRENTLY idempotency_keys_emptied_idx
    ON idempotency_keys (expires_at) WHERE status = 'expired';
