// Package docs holds tokenbed's documentation (README.md and docs/**/*.md);
// its test checks that every relative link resolves to a file and, when it
// names one, to a heading of that file, and that run IDs and dated
// measurements stay in docs/studies.
package docs
