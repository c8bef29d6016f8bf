package bench

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBacklogWaitsForItsTopic: brokers that do not know the input topic
// yet, right after it was created, answer its metadata with
// UNKNOWN_TOPIC_OR_PARTITION; the backlog waits for every broker to know
// it instead of failing the invocation ("producing the input:
// UNKNOWN_TOPIC_OR_PARTITION", 5 of 14 runs in issue 42's sequence).
func TestBacklogWaitsForItsTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	require.NoError(t, err)
	defer c.Close()
	var unknown atomic.Int32
	c.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.MetadataRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic == nil || !strings.HasSuffix(*req.Topics[0].Topic, "-in") || unknown.Add(1) > 12 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic, st.ErrorCode = rt.Topic, kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env, err := NewEnv(c.ListenAddrs(), false, log)
	require.NoError(t, err)
	defer env.Close()
	r := &Runner{Env: env, Log: log}
	cfg := Default()
	cfg.Messages, cfg.Partitions = 100, 3
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic, err := r.backlog(ctx, cfg, "in", cfg.Messages)
	require.NoError(t, err)
	require.Greater(t, unknown.Load(), int32(12), "the topic was unknown at first")
	require.Equal(t, env.Name("default-in"), topic)
}
