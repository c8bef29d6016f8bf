// Command onceflow is an operator's tool for onceflow applications: it
// shows what Kafka's own tools cannot (the finished records above a
// committed offset, which transaction of which instance holds a
// partition's last stable offset), moves a stopped group's positions, and
// reads a stopped instance's local stores.
//
//	onceflow describe -brokers B -group G [-topics T,...] [-json]
//	onceflow reset -brokers B -group G -to earliest|latest|OFFSET|TIME [-topics T,...] [-yes] [-json]
//	onceflow dedupe inspect [-ttl D] [-bucket-width D] [-json] DIR
//	onceflow state inspect [-json] DIR
//	onceflow -version
//
// describe prints, per input partition (the topics the group committed
// offsets for or is assigned, and -topics), the committed offset, the
// finished records above it decoded from the commit metadata
// (internal/offsetmeta), the last stable and end offsets, the lag to the
// last stable offset and the owning instance and member; then, per
// instance, its transactional IDs ("<group>/<instance>", and
// "<group>/<instance>#k" for a ring of producers), found by listing the
// cluster's transactions, with each one's state, producer, age and
// partitions when open, and the partitions whose last stable offset it
// holds (DescribeProducers). Corrupt commit metadata, and any call that
// failed, is printed as a PROBLEM and makes the exit status 1.
//
// reset refuses a group with members (a stopped static member stays until
// its session times out), prints per partition the current offset, the
// finished records it drops and the new offset, and applies it only with
// -yes, committing with empty metadata. latest is the last stable offset;
// offsets outside the log are clamped. It warns of the processor's topics
// it does not rewind: the position guard's log (which would override the
// reset: delete it), the state changelog and the dedupe changelog.
//
// The inspect commands open the stores read-only: a store an instance has
// open is refused, and nothing on disk changes.
//
// -version (or version) prints the module version that go install built,
// "(devel)" for a build in a checkout, and the VCS revision, time and
// modified flag when the build stamped them.
//
// Connections: -brokers (default 127.0.0.1:9092), -timeout (30s: an
// unreachable cluster fails after it, refused credentials at once), and
// -tls, -tls-ca, -tls-cert, -tls-key, -tls-server-name, -sasl-mechanism
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), -sasl-user, -sasl-password (or
// $ONCEFLOW_SASL_PASSWORD). Exit status: 0 ok, 1 failed or found problems,
// 2 bad usage. See docs/operations.md for sample output.
package main
