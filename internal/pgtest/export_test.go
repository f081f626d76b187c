package pgtest

// AdminURL lets the external tests inspect pg_database on the shared server.
var AdminURL = adminURL
