package generator

import "path/filepath"

// outputPaths are the paths a generation names, worked out from the
// config once, before the first stage: the stages take them from here and
// never resolve the config's paths themselves.
type outputPaths struct {
	spec           string // the spec, as errors and warnings name it
	specFromOutput string // the spec from the output directory, as headers name it
	dir            string // the output directory, as errors name it
	// The output's files, as File.Path: oapi-codegen's, the layer, the
	// client, the augmented spec ("" for none), the kit and the query
	// files' directory.
	oapi, layer, client, augmented, kit, queries string
	// kitPackage is the conformance kit's package name.
	kitPackage string
}

func pathsOf(cfg *Config) outputPaths {
	kitDir, kitPackage := kitPackage(cfg)
	return outputPaths{
		spec:           cfg.path(cfg.Spec),
		specFromOutput: cfg.specFromOutput(),
		dir:            cfg.path(cfg.Output.Dir),
		oapi:           cfg.oapiFile(),
		layer:          filepath.Join(cfg.Output.Dir, layerFile),
		client:         filepath.Join(cfg.Output.Dir, clientFile),
		augmented:      cfg.Output.Spec,
		kit:            filepath.Join(kitDir, "conformance.gen.go"),
		queries:        cfg.Queries.Dir,
		kitPackage:     kitPackage,
	}
}
