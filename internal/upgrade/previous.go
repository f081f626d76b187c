// Package upgrade tests that two releases of idemgen serve one key store:
// the previous release, built from its commit in this repository's
// history, and the working tree. Its tests run the example orders API of
// both releases against one database through a rolling upgrade, crashes,
// the reaper and a rollback; the package itself only records which
// release came before this one.
package upgrade

// PreviousRelease is the release before the one in this tree (see
// idem.Release), and PreviousCommit the commit it was cut from. The
// upgrade tests build that commit and run it beside the working tree.
//
// The release process bumps both when it tags a release: once vX.Y.Z is
// tagged, PreviousRelease becomes vX.Y.Z and PreviousCommit its commit,
// so that the next release is tested against the one users run.
// PreviousMigration is the newest key-store migration PreviousRelease
// knows: `idemgen migrate down -to PreviousMigration` takes a database
// back to its schema.
const (
	PreviousRelease   = "v0.1.0"
	PreviousCommit    = "82e2559adcf2b293b7cbdc0779e15f7508ede239"
	PreviousMigration = 8
)
