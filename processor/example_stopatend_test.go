package processor_test

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/processor"
)

// A bounded load: Run returns by itself once the group has committed the
// input up to where it ended when the run started. A second run right
// after has nothing to do and returns at once; had the first failed
// halfway, the second would have done the rest, exactly once
// (docs/operations.md, "Bounded runs").
func ExampleWithStopAtEnd() {
	cluster, err := kfake.NewCluster(kfake.SeedTopics(2, "orders", "warehouse"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx := context.Background()
	in, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("orders"))
	for i := range 1000 {
		in.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "customer-%d", i%10), Value: fmt.Appendf(nil, "order-%d", i)}, nil)
	}
	in.Flush(ctx)
	in.Close()

	load := func() processor.Stats {
		p, err := processor.New(
			processor.WithBrokers(brokers...),
			processor.WithGroup("nightly"),
			processor.WithInstanceID("loader-0"),
			processor.WithInputTopics("orders"),
			processor.WithOutputTopic("warehouse"),
			processor.WithHandler(func(ctx context.Context, rec *kgo.Record, out processor.Emitter) error {
				out.Emit(&kgo.Record{Value: rec.Value}) // the warehouse row
				return nil
			}),
			processor.WithStopAtEnd(),
		)
		if err != nil {
			fmt.Println(err)
			return processor.Stats{}
		}
		if err := p.Run(ctx); err != nil { // no cancel: it returns when the load is done
			fmt.Println("load failed, rerun it:", err)
		}
		return p.Stats()
	}
	fmt.Println("first load, outputs:", load().Outputs)
	fmt.Println("second load, outputs:", load().Outputs)
	// Output:
	// first load, outputs: 1000
	// second load, outputs: 0
}
