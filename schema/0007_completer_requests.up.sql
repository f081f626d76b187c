-- The completer: a phased attempt whose client abandoned it is driven to
-- its response inside the service, resuming at its recovery point with the
-- request as the handler first received it. The lease keeps that request
-- here, as JSON, for operations annotated abandoned: complete; NULL for
-- the others, and once the attempt has completed. The completer reads only
-- in-flight rows past their lease, which idempotency_keys_lease_idx
-- serves.
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS request bytea;
