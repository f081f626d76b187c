package pgtest

// AdminURL lets the external tests inspect pg_database on the shared server.
var AdminURL = adminURL

// WithDatabase lets them connect to a database they made themselves.
var WithDatabase = withDatabase

// Settle waits until released databases are emptied or dropped.
var Settle = settle
