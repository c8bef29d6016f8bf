// Package kafkatest gives tests a Kafka cluster: an in-process kfake cluster
// by default, or the real brokers named in the KAFKA_BROKERS environment
// variable (a comma-separated host:port list), so that one test body runs in
// both the embedded pass and the real-broker pass of `make test`.
//
// Every topic a test creates gets a unique name and is deleted when the test
// ends; every client and embedded cluster is closed with the test.
package kafkatest
