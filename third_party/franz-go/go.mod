module github.com/twmb/franz-go

go 1.26.0

require (
	github.com/klauspost/compress v1.20.3
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

retract v1.11.4 // This version is actually a breaking change and requires a major version change.
