package idem

import "runtime/debug"

// Release is the release this code is, or the next one for a build
// between releases: the newest section of CHANGELOG.md names it.
const Release = "v0.2.0"

// ModulePath is idemgen's module.
const ModulePath = "github.com/idemgen/idemgen"

// Version is the version of idemgen linked into this binary, as its
// build information records it: the module's version when built at one
// (go install ...@v0.2.0, or an API that requires it), else Release
// marked as a development build, with the commit and whether the
// checkout had changes when the go command recorded them (go build in a
// git checkout does; go run and go test do not).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Release + "-devel"
	}
	return VersionOf(info)
}

// VersionOf is Version for the build information info.
func VersionOf(info *debug.BuildInfo) string {
	m := &info.Main
	if m.Path != ModulePath {
		m = nil
		for _, d := range info.Deps {
			if d.Path == ModulePath {
				m = d
				break
			}
		}
	}
	if m != nil && m.Replace != nil {
		m = m.Replace
	}
	if m != nil && m.Version != "" && m.Version != "(devel)" {
		return m.Version
	}
	v := Release + "-devel"
	if info.Main.Path != ModulePath {
		return v // replaced by a directory: its commit is not recorded
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += "+" + rev[:min(len(rev), 12)]
		if modified == "true" {
			v += ".dirty"
		}
	}
	return v
}
