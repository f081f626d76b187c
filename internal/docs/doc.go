// Package docs holds no code: its tests keep README.md and docs/ true of
// the repository. Links must resolve, down to their #anchors, and Go
// snippets must compile.
package docs
