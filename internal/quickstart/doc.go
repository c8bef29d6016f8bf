// Package quickstart holds the tests of onceflow as its users get it: the
// README's quick start, extracted and built as a program of its own
// (TestQuickstart), and the module as the Go proxy serves it, a zip
// without the nested module third_party/franz-go, so with upstream
// franz-go, running the quick start's job on an embedded cluster under
// both group protocols (TestModuleAsServed). The package has no code of
// its own.
package quickstart
