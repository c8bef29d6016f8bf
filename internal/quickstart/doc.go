// Package quickstart holds the tests of onceflow as its users get it: the
// README's quick start, extracted and built as a program of its own
// (TestQuickstart), and the module as the Go proxy serves it, with
// upstream franz-go (an importer gets none of onceflow's replace
// directives), running the quick start's job on an embedded cluster under
// both group protocols (TestModuleAsServed). The package has no code of
// its own.
package quickstart
