// Package lazyre holds regular expressions compiled on first use: a
// package-level regexp.MustCompile runs at every start of the xfw binary,
// which links the test tooling (difftest, nettest) that most commands never
// use, and a command as short as `xfw ipset add` paid for compiling their
// expressions.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled when first used (it panics then
// if expr does not compile, as regexp.MustCompile does at start).
type Regexp struct {
	expr string
	re   func() *regexp.Regexp
}

// New returns the expression expr, not compiled yet.
func New(expr string) *Regexp {
	return &Regexp{expr: expr, re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// String returns the expression's source text.
func (r *Regexp) String() string { return r.expr }

// FindAllStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.re().FindAllStringSubmatch(s, n)
}

// FindStringIndex is regexp.Regexp's.
func (r *Regexp) FindStringIndex(s string) []int { return r.re().FindStringIndex(s) }

// FindStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// MatchString is regexp.Regexp's.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// ReplaceAllString is regexp.Regexp's.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.re().ReplaceAllString(src, repl)
}

// ReplaceAllStringFunc is regexp.Regexp's.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.re().ReplaceAllStringFunc(src, repl)
}
