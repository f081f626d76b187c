// Package idem is the runtime that idemgen's generated code imports: the
// Idempotency-Key protocol engine, the problem responses it answers with,
// the request fingerprint, and the Store interface that the Postgres and
// in-memory key stores implement.
//
// An annotated operation goes through [Engine.Serve]: it validates the key,
// reads the stored record without writing, answers a replay, a 409 or a 422
// from that single read, and otherwise claims the key and runs the handler
// inside the claim's transaction, storing its response when the handler
// returns one.
//
// A phased operation (mode: phased) goes through [Engine.ServePhased]
// instead: the claim commits first as a lease, then each phase runs in a
// transaction of its own that commits its writes with the next recovery
// point, and a retry after a crash takes over the expired lease and resumes
// at the first phase that did not commit. [Attempt.DerivedKey] gives the
// keys for foreign calls made along the way, the same on every retry.
package idem
