package processor

import (
	"fmt"
)

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
