-- Nothing is undone: the previous release never names the column, and
-- this release's servers that still run during a rollback read and write
-- it. Dropped, it would also lose which way a use in flight derives its
-- keys. Migration 0001's down drops it with the table.
SELECT 1;
