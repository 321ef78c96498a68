// franz-go-perf: franz-go's (github.com/twmb/franz-go, package kgo) peer in perf/run,
// following the peer contract of perf/README.md (contract.go holds the contract's common
// part).
//
//		franz-go-perf produce --bootstrap HOST:PORT --topic T --records N --payload-file F \
//		    --acks 0|1|all --idempotence true|false --compression none|gzip|snappy|lz4|zstd \
//		    --linger-ms L --batch-size BYTES
//		franz-go-perf consume --bootstrap HOST:PORT --topic T --records N
//
//	  - produce: Client.Produce with a callback per record (asynchronous); a sampled
//	    record's callback is a closure that knows its latency slot, the others share one.
//	  - consume: a direct consumer (no group, no commits) of the topic from the start of
//	    every partition (ConsumeResetOffset(AtStart)), PollFetches until N records.
package main

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const clientName = "franz-go"

// setupTimeout bounds the set-up before the timed part (connections, metadata).
const setupTimeout = 30 * time.Second

func main() {
	a := parseArgs(os.Args[1:])
	if a.op == "produce" {
		produce(a)
	} else {
		consume(a)
	}
}

// checkTopic asks the cluster for the topic's metadata (which also opens a connection),
// failing if the topic does not exist or has no partitions. Set-up, outside the timed
// part.
func checkTopic(ctx context.Context, client *kgo.Client, topic string) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	req.AllowAutoTopicCreation = false // programs never create topics
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		fail("metadata for %s: %v", topic, err)
	}
	if len(resp.Topics) != 1 {
		fail("metadata for %s: %d topics in the response", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		fail("topic %s: %v", topic, err)
	}
	if len(resp.Topics[0].Partitions) == 0 {
		fail("topic %s has no partitions", topic)
	}
}

func produce(a args) {
	payloads := readPayloads(a.payloadFile)
	acks := map[string]kgo.Acks{"0": kgo.NoAck(), "1": kgo.LeaderAck(), "all": kgo.AllISRAcks()}[a.acks]
	codec := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}[a.compression]
	if a.batchSize < 512 || a.batchSize > 1<<30 {
		badArgs("--batch-size %d: franz-go takes 512 to 1 GiB", a.batchSize)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(a.bootstrap),
		kgo.ClientID(programName()),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec), // default [snappy, none]
		kgo.ProducerLinger(a.linger),        // default 10 ms
		// A partition's batch is at most this many bytes (default 1,000,012).
		kgo.ProducerBatchMaxBytes(int32(a.batchSize)),
		// The producer's memory budget (default 50,000 records, bytes unlimited): 32 MiB
		// of record bytes, the Java producer's default buffer.memory and perf/rdkafka-perf's
		// budget, far above what a linger window or the requests in flight hold; the
		// record-count limit is lifted so that only bytes count.
		kgo.MaxBufferedBytes(32 << 20),
		kgo.MaxBufferedRecords(10_000_000),
	}
	if !a.idempotence {
		// franz-go is idempotent by default, which needs acks=all.
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		fail("client: %v", err)
	}
	defer client.Close()

	// Set-up outside the timed part: the topic's existence, the produce connection to
	// every broker and, when idempotent, the producer id. (franz-go's producer loads the
	// topic's partitions itself on the first Produce: one metadata request in the timed
	// part.)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	checkTopic(ctx, client, a.topic)
	if err := client.EnsureProduceConnectionIsOpen(ctx); err != nil {
		fail("connect: %v", err)
	}
	if a.idempotence {
		if _, _, err := client.ProducerID(ctx); err != nil {
			fail("producer id: %v", err)
		}
	}
	cancel()

	n := int64(a.records)
	base := time.Now()
	sentAt := latencySlots(a.records)    // slot k: record k*sampleEvery's send time, since base
	latencies := latencySlots(a.records) // slot k: its send→delivery latency
	var finished, failed atomic.Int64    // delivery reports, and failures among them
	var firstError atomic.Pointer[error]
	var lastReport time.Duration // since base; written once, by the N-th report
	allReported := make(chan struct{})
	// delivered counts one delivery report; the N-th closes allReported.
	delivered := func(err error) {
		if err != nil {
			firstError.CompareAndSwap(nil, &err)
			failed.Add(1)
		}
		if finished.Add(1) == n {
			lastReport = time.Since(base)
			close(allReported)
		}
	}
	unsampled := func(_ *kgo.Record, err error) { delivered(err) }

	stop := monitor("produce", a.records, &finished)
	var valueBytes int64
	ctx = context.Background() // Produce waits for buffer space without a limit
	t0 := time.Since(base)
	for i := range a.records {
		value := payloads[i%len(payloads)]
		valueBytes += int64(len(value))
		r := &kgo.Record{Topic: a.topic, Value: value}
		if i%sampleEvery != 0 {
			client.Produce(ctx, r, unsampled)
			continue
		}
		k := i / sampleEvery
		sentAt[k] = time.Since(base)
		client.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err == nil {
				latencies[k] = time.Since(base) - sentAt[k]
			}
			delivered(err)
		})
	}
	<-allReported
	elapsed := lastReport - t0
	stop()

	if f := failed.Load(); f > 0 {
		fail("%d of %d records failed; first error: %v", f, n, *firstError.Load())
	}
	report("produce", a.records, valueBytes, elapsed, latencies)
}

func consume(a args) {
	// A direct consumer that starts at the earliest offset; the topic is added after the
	// set-up (kgo.ConsumeTopics at NewClient would start fetching at once, before it).
	client, err := kgo.NewClient(
		kgo.SeedBrokers(a.bootstrap),
		kgo.ClientID(programName()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		fail("client: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	checkTopic(ctx, client, a.topic)
	cancel()

	n := int64(a.records)
	var count atomic.Int64 // records read, for the monitor
	var read, valueBytes int64
	var digest uint64
	stop := monitor("consume", a.records, &count)
	t0 := time.Now()
	client.AddConsumeTopics(a.topic)
	for read < n {
		// The monitor ends the run if N records have not arrived in time.
		fetches := client.PollFetches(context.Background())
		fetches.EachError(func(topic string, partition int32, err error) {
			fail("consume %s/%d: %v", topic, partition, err)
		})
		for it := fetches.RecordIter(); !it.Done() && read < n; {
			v := it.Next().Value
			digest += touch(v)
			valueBytes += int64(len(v))
			read++
		}
		count.Store(read)
	}
	elapsed := time.Since(t0)
	stop()
	logDigest(digest)
	report("consume", a.records, valueBytes, elapsed, nil)
}
