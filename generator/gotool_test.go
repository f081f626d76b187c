package generator_test

import "testing"

// vetGo vets the package at pkg, a path for the go command as
// writeGoPackage returns; what says what it is in a failure. Vet
// type-checks the package as the compiler does, so a package that would
// not compile fails here too, without a build of its own beside it.
func vetGo(t *testing.T, pkg, what string) {
	t.Helper()
	if out, err := runGo(t, "vet", pkg); err != nil {
		t.Fatalf("go vet %s%s: %v\n%s", pkg, what, err, out)
	}
}

// goTestFlags are the build flags of every go test of a generated
// package: no vet, whose checks vetGo runs on the generated code, and no
// debug information, which only makes the link slower.
var goTestFlags = []string{"-vet=off", "-ldflags=-w"}

// goTest runs the tests of the package at pkg, with the extra flags.
func goTest(t *testing.T, pkg string, flags ...string) {
	t.Helper()
	args := append(append([]string{"test", "-count=1"}, goTestFlags...), flags...)
	if out, err := runGo(t, append(args, pkg)...); err != nil {
		t.Fatalf("go test %s: %v\n%s", pkg, err, out)
	}
}
