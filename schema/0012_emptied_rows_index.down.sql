-- no-transaction
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_emptied_idx;
