package generator

import "github.com/idemgen/idemgen/generator/annotation"

// source is what the first two stages make of the spec: its annotations,
// and oapi-codegen's output for it with the resolutions that let it
// compile.
type source struct {
	paths     outputPaths // paths.spec names the spec in errors and warnings
	annotated []annotation.Operation
	oapi      oapiOutput
}

// readSource runs the first two stages. Reading the annotations parses
// the whole spec, which oapi-codegen does not need: it is done while
// oapi-codegen loads the spec, on another core where there is one. Its
// errors come first, as a spec's annotations are what its author is
// editing.
func readSource(req *Request, paths outputPaths) (source, error) {
	cfg := req.Config
	src := source{paths: paths}
	var readErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		src.annotated, readErr = annotation.Read(src.paths.spec, req.Spec)
		if readErr == nil && cfg.Errors != nil {
			readErr = errorSchemaOf(src.paths.spec, req.Spec, cfg.Errors, req.ref)
		}
	}()
	readDone := func() ([]annotation.Operation, error) {
		<-read
		return src.annotated, readErr
	}
	oapi, err := runOapiCodegen(req, paths, readDone)
	if _, err := readDone(); err != nil {
		return source{}, err
	}
	if err != nil {
		return source{}, err
	}
	src.oapi = oapi
	return src, nil
}
