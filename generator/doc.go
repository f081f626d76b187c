// Package generator turns an annotated OpenAPI spec and a Config into
// idemgen's output: oapi-codegen's models and strict server, the
// idempotency layer over them, the key-store migrations and the sqlc
// queries.
//
// # The stages
//
// Load (request.go) reads every file a generation needs into a Request.
// Generate (generator.go) reads nothing else: it runs these stages in
// order, each on what the ones before it made, and returns the files.
// Result.Write and Result.Check are the only writes.
//
//  0. Paths (paths.go): Config -> outputPaths, every path the output
//     names, resolved once; no later stage resolves a path of the config.
//  1. Annotations (package annotation, called from source.go): the spec's
//     text -> []annotation.Operation, each setting checked and
//     positioned. errorshape.go checks the config's error shape against
//     the spec.
//  2. oapi-codegen (source.go, oapi.go, resolve.go and the resolutions
//     beside it, predict.go, discriminator.go, formunions.go, carry.go,
//     refs.go): the spec -> oapiOutput: oapi-codegen's file, its operation
//     definitions, and the resolutions, with their warnings, that let its
//     output compile. It runs beside stage 1. Every call into
//     oapi-codegen goes through codegenGate, which says why.
//  3. Model (model.go, annotate.go, fingerprintparts.go, bodies.go,
//     scope.go, declaredkey.go, clientmodel.go, kit.go, durations.go):
//     annotations and definitions -> *model, typed: durations, key
//     limits, scope, fingerprint parts, client methods, recovery points.
//  4. Completion (complete.go): the model checked against oapi-codegen's
//     Go declarations (names.go), with the fingerprint writers printed
//     from its types (canonical.go and the canonical*.go, lostunions.go
//     and jsonpointers.go beside it), the contracts (contract.go,
//     contractrender.go, typeshape.go) and the request schemas
//     (requestschemas.go).
//  5. Augmented spec (augment.go, augmentclient.go, pointers.go): the
//     spec's text and the model -> the spec that documents the protocol,
//     with the resolutions a client of it needs.
//  6. Rendering (render.go, the templates package, imports.go, client.go,
//     clientkeys.go, keymatcher.go, compilecheck.go): the model -> the Go
//     files, each importing what it uses, checked to compile as far as
//     parsing tells.
//  7. Keys in flight (contractparse.go, contractrules.go): the replaced
//     layer file's contract and the model's -> warnings, one rule of
//     contractRules per part of the contract.
//  8. Migrations (sql.go): the migration settings and the folder's
//     listing -> the migration and query files, and idemgen's files the
//     output no longer has.
//
// TestStagesGolden records what each stage makes of a small spec;
// TestGenerateIsPure holds Generate to its request.
//
// # Adding an annotation
//
// A new x-idempotent setting touches these stages and no others: package
// annotation reads it (a field of annotation.Operation, read and checked
// with its position, documented in docs/ANNOTATIONS.md, which
// TestDocsReferenceComplete holds to the code); annotate (annotate.go)
// carries it into the model as a typed field of operation; stage 4
// checks it where it names Go types; the templates render it; where it
// changes how keys are scoped or fingerprinted, the contract records it
// (contract.go) and a rule of contractRules warns when it changes; and
// augment.go describes it where clients must know it.
package generator
