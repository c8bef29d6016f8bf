package processor

import (
	"fmt"
	"strings"
)

// validateNames checks what New can check of the addresses and topic
// names without contacting anything: an empty address or topic name, a
// name Kafka would refuse, and a job with no output topic that has not
// said so (WithoutDefaultOutput). Each of these otherwise surfaced late
// and far from its cause: as dial errors, a broker's INVALID_TOPIC_EXCEPTION
// or a dead letter on the first record.
func (c *config) validateNames() error {
	for i, b := range c.brokers {
		if strings.TrimSpace(b) == "" {
			return invalid("WithBrokers: address %d of %d is empty", i+1, len(c.brokers))
		}
	}
	for _, in := range c.inputs {
		if why := topicNameProblem(in); why != "" {
			return invalid("WithInputTopics: %s", why)
		}
	}
	switch {
	case c.outputSet && c.output == "":
		return invalid("WithOutputTopic: the topic name is empty (a handler that names the topic of every record it emits says so with WithoutDefaultOutput)")
	case !c.outputSet && !c.noDefaultOutput:
		return invalid("WithOutputTopic: an output topic is required, or WithoutDefaultOutput for a handler that names the topic of every record it emits")
	}
	if c.output != "" {
		if why := topicNameProblem(c.output); why != "" {
			return invalid("WithOutputTopic: %s", why)
		}
	}
	if c.dlq != "" { // "": no dead-letter topic
		if why := topicNameProblem(c.dlq); why != "" {
			return invalid("WithDLQTopic: %s", why)
		}
	}
	// The changelog topics' names are made of the group's and the
	// inputs': a group name Kafka accepts (any string) may not make a
	// topic name it accepts.
	for _, sp := range c.changelogSpecs() {
		for _, in := range c.inputs {
			if why := topicNameProblem(changelogName(c.group, in, sp.suffix)); why != "" {
				return invalid("WithGroup %q: its changelog topic for input %s: %s", c.group, in, why)
			}
		}
	}
	return nil
}

// maxTopicNameLen is Kafka's limit on a topic name (Topic.MAX_NAME_LENGTH).
const maxTopicNameLen = 249

// topicNameProblem says why Kafka would refuse name as a topic name
// (org.apache.kafka.common.internals.Topic.validate), or "" if it would not.
func topicNameProblem(name string) string {
	switch {
	case name == "":
		return "a topic name is empty"
	case name == "." || name == "..":
		return fmt.Sprintf("topic name %q is not allowed", name)
	case len(name) > maxTopicNameLen:
		return fmt.Sprintf("topic name %.40q... is %d characters, longer than Kafka's %d", name, len(name), maxTopicNameLen)
	}
	for _, r := range name {
		legal := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !legal {
			return fmt.Sprintf("topic name %q has %q: Kafka allows only ASCII letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return ""
}
