package generator

// completeModel is the stage after buildModel: it checks the model
// against the Go declarations of oapi-codegen's output, which decide what
// the layer can name and fingerprint, and adds what is made from them:
// the fingerprint writers and the request schemas the gates check.
func completeModel(src source, m *model) error {
	// oapi-codegen's output is parsed once, for every check of it.
	scan := src.oapi.scan
	if scan == nil {
		_, err := scanNames("oapi.gen.go", src.oapi.src)
		return err
	}
	if err := checkNames(src.paths.spec, scan, m); err != nil {
		return err
	}
	if err := writeFingerprints(scan.file, m); err != nil {
		return err
	}
	schemas, warnings, err := requestSchemas(src.paths.spec, src.oapi.version, m.Operations)
	if err != nil {
		return err
	}
	m.RequestSchemas, m.Warnings = schemas, append(m.Warnings, warnings...)
	return nil
}
