// franz-go-perf: franz-go's (github.com/twmb/franz-go, package kgo) peer in perf/run,
// following the peer contract of perf/README.md; the contract's common part is package
// contract (perf/go/contract), shared with sarama-perf.
//
//		franz-go-perf produce --bootstrap HOST:PORT --topic T --records N --payload-file F \
//		    --acks 0|1|all --idempotence true|false --compression none|gzip|snappy|lz4|zstd \
//		    --linger-ms L --batch-size BYTES [--transactional-id ID --txn-records N] \
//		    [--key-size K] [--rate R]
//		franz-go-perf consume --bootstrap HOST:PORT --topic T --records N [--e2e]
//
//	(both with the contract's [--property NAME=VALUE ...]: see contract.Security)
//
//	  - produce: Client.Produce with a callback per record (asynchronous), the records of
//	    a contract.Feed (keys, the --rate schedule, stamped values); a sampled record's
//	    callback (every record's with --rate) is a closure that knows its latency slot,
//	    the others share one. The partitioner is franz-go's default,
//	    UniformBytesPartitioner(64 KiB, adaptive, keys, murmur2): keyed records by the
//	    murmur2 hash of the key, as Java's, null keys stickily. In transactions
//	    (kgo.TransactionalID): BeginTransaction, N records, Flush (which cuts the linger
//	    short), EndTransaction(TryCommit); the clock stops at the end of the last commit.
//	  - consume: a direct consumer (no group, no commits) of the topic from the start of
//	    every partition (ConsumeResetOffset(AtStart)), PollFetches until N records. With
//	    --e2e, every partition from offset 0 (AddConsumePartitions, no ListOffsets first),
//	    "ready" on stderr when the first Fetch request has been written (a
//	    kgo.HookBrokerWrite: connections, metadata and the partitions are in place), and
//	    the wall clock taken as each record comes out of the fetches.
package main

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"kring.invalid/perf/go/contract"
)

// setupTimeout bounds the set-up before the timed part (connections, metadata).
const setupTimeout = 30 * time.Second

func main() {
	contract.ClientName = "franz-go"
	a := contract.ParseArgs(os.Args[1:])
	if a.Op == "produce" {
		produce(a)
	} else {
		consume(a)
	}
}

// securityOpts are the options of the --property settings: TLS (kgo.DialTLSConfig, which
// sets each dial's ServerName to the broker's host) and SASL (package sasl/plain or
// sasl/scram).
func securityOpts(s contract.Security) []kgo.Opt {
	var opts []kgo.Opt
	if s.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(s.TLS))
	}
	if s.SASL() {
		var m sasl.Mechanism
		switch s.Mechanism {
		case "PLAIN":
			m = plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
		default: // contract.ParseArgs lets no other through
			contract.Fail("sasl.mechanism %s: unsupported", s.Mechanism)
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

// checkTopic asks the cluster for the topic's metadata (which also opens a connection),
// failing if the topic does not exist or has no partitions, and returns its partition
// count. Set-up, outside the timed part.
func checkTopic(ctx context.Context, client *kgo.Client, topic string) int32 {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	req.AllowAutoTopicCreation = false // programs never create topics
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		contract.Fail("metadata for %s: %v", topic, err)
	}
	if len(resp.Topics) != 1 {
		contract.Fail("metadata for %s: %d topics in the response", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		contract.Fail("topic %s: %v", topic, err)
	}
	if len(resp.Topics[0].Partitions) == 0 {
		contract.Fail("topic %s has no partitions", topic)
	}
	return int32(len(resp.Topics[0].Partitions))
}

func produce(a contract.Args) {
	payloads := contract.ReadPayloads(a)
	acks := map[string]kgo.Acks{"0": kgo.NoAck(), "1": kgo.LeaderAck(), "all": kgo.AllISRAcks()}[a.Acks]
	codec := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}[a.Compression]
	if a.BatchSize < 512 || a.BatchSize > 1<<30 {
		contract.BadArgs("--batch-size %d: franz-go takes 512 to 1 GiB", a.BatchSize)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(a.Bootstrap),
		kgo.ClientID(contract.ProgramName()),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec), // default [snappy, none]
		kgo.ProducerLinger(a.Linger),        // default 10 ms
		// A partition's batch is at most this many bytes (default 1,000,012).
		kgo.ProducerBatchMaxBytes(int32(a.BatchSize)),
		// The producer's memory budget (default 50,000 records, bytes unlimited): 32 MiB
		// of record bytes, the Java producer's default buffer.memory and perf/rdkafka-perf's
		// budget, far above what a linger window or the requests in flight hold; the
		// record-count limit is lifted so that only bytes count.
		kgo.MaxBufferedBytes(32 << 20),
		kgo.MaxBufferedRecords(10_000_000),
	}
	opts = append(opts, securityOpts(a.Security)...)
	if !a.Idempotence {
		// franz-go is idempotent by default, which needs acks=all.
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if a.Transactional() {
		opts = append(opts, kgo.TransactionalID(a.TransactionalID))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		contract.Fail("client: %v", err)
	}
	defer client.Close()

	// Set-up outside the timed part: the topic's existence, the produce connection to
	// every broker and, when idempotent, the producer id (with the transactional id when
	// transactional: InitProducerID at its coordinator). (franz-go's producer loads the
	// topic's partitions itself on the first Produce: one metadata request in the timed
	// part.)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	checkTopic(ctx, client, a.Topic)
	if err := client.EnsureProduceConnectionIsOpen(ctx); err != nil {
		contract.Fail("connect: %v", err)
	}
	if a.Idempotence {
		if _, _, err := client.ProducerID(ctx); err != nil {
			contract.Fail("producer id: %v", err)
		}
	}
	cancel()

	n := int64(a.Records)
	base := time.Now()
	feed := contract.NewFeed(a, payloads)
	var finished, failed atomic.Int64 // delivery reports, and failures among them
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

	stop := contract.Monitor(a, &finished)
	ctx = context.Background() // Produce waits for buffer space without a limit
	t0 := time.Since(base)
	for i := range a.Records {
		if a.BeginsTransaction(i) {
			if err := client.BeginTransaction(); err != nil {
				contract.Fail("begin transaction: %v", err)
			}
		}
		key, value, slot := feed.Next(i)
		r := &kgo.Record{Topic: a.Topic, Key: key, Value: value} // a nil key is a null key
		if slot < 0 {
			client.Produce(ctx, r, unsampled)
		} else {
			client.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err == nil {
					feed.Delivered(slot)
				}
				delivered(err)
			})
		}
		if a.EndsTransaction(i) {
			commit(ctx, client, &failed, &firstError)
		}
	}
	<-allReported
	elapsed := lastReport - t0
	if a.Transactional() {
		elapsed = time.Since(base) - t0 // to the end of the last commit
	}
	stop()

	if f := failed.Load(); f > 0 {
		contract.Fail("%d of %d records failed; first error: %v", f, n, *firstError.Load())
	}
	contract.Report("produce", a.Records, feed.Bytes, elapsed, feed.Latencies(), nil)
}

// commit ends the open transaction: its records flushed (every callback has run when
// Flush returns), then, if none of them failed, committed.
func commit(ctx context.Context, client *kgo.Client, failed *atomic.Int64, firstError *atomic.Pointer[error]) {
	if err := client.Flush(ctx); err != nil {
		contract.Fail("flush: %v", err)
	}
	if f := failed.Load(); f > 0 {
		contract.Fail("%d records failed in a transaction, not committed; first error: %v", f, *firstError.Load())
	}
	if err := client.EndTransaction(ctx, kgo.TryCommit); err != nil {
		contract.Fail("commit transaction: %v", err)
	}
}

// readyAtFirstFetch is consume --e2e's kgo.HookBrokerWrite: it prints "ready" once, when
// the first Fetch request has been written (the client has its connection, the
// metadata and the partitions by then; it runs in the client's goroutine that writes).
type readyAtFirstFetch struct{ once sync.Once }

func (h *readyAtFirstFetch) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		h.once.Do(contract.Ready)
	}
}

func consume(a contract.Args) {
	// A direct consumer that starts at the earliest offset; the topic is added after the
	// set-up (kgo.ConsumeTopics at NewClient would start fetching at once, before it).
	opts := []kgo.Opt{
		kgo.SeedBrokers(a.Bootstrap),
		kgo.ClientID(contract.ProgramName()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if a.E2E {
		opts = append(opts, kgo.WithHooks(&readyAtFirstFetch{}))
	}
	client, err := kgo.NewClient(append(opts, securityOpts(a.Security)...)...)
	if err != nil {
		contract.Fail("client: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	partitions := checkTopic(ctx, client, a.Topic)
	cancel()

	n := int64(a.Records)
	var count atomic.Int64 // records read, for the monitor
	var read, valueBytes int64
	var digest uint64
	var e2e []time.Duration // with --e2e: the N records' end-to-end latencies
	if a.E2E {
		e2e = make([]time.Duration, 0, a.Records)
	}
	stop := contract.Monitor(a, &count)
	t0 := time.Now()
	if a.E2E {
		// Every partition from offset 0: an exact offset needs no ListOffsets, so the
		// first fetch follows the metadata at once (ConsumeResetOffset still applies if 0
		// is out of range).
		at0 := make(map[int32]kgo.Offset, partitions)
		for p := range partitions {
			at0[p] = kgo.NewOffset().At(0)
		}
		client.AddConsumePartitions(map[string]map[int32]kgo.Offset{a.Topic: at0})
	} else {
		client.AddConsumeTopics(a.Topic)
	}
	for read < n {
		// The monitor ends the run if N records have not arrived in time.
		fetches := client.PollFetches(context.Background())
		fetches.EachError(func(topic string, partition int32, err error) {
			contract.Fail("consume %s/%d: %v", topic, partition, err)
		})
		for it := fetches.RecordIter(); !it.Done() && read < n; {
			v := it.Next().Value
			if a.E2E { // the wall clock as the record is handed over
				e2e = append(e2e, contract.EndToEnd(v, time.Now()))
			}
			digest += contract.Touch(v)
			valueBytes += int64(len(v))
			read++
		}
		count.Store(read)
	}
	elapsed := time.Since(t0)
	stop()
	contract.LogDigest(digest)
	contract.Report("consume", a.Records, valueBytes, elapsed, nil, e2e)
}
