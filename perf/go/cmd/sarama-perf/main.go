// sarama-perf: Sarama's (github.com/IBM/sarama) peer in perf/run, following the peer
// contract of perf/README.md; the contract's common part is package contract
// (perf/go/contract), shared with franz-go-perf.
//
//		sarama-perf produce --bootstrap HOST:PORT --topic T --records N --payload-file F \
//		    --acks 0|1|all --idempotence true|false --compression none|gzip|snappy|lz4|zstd \
//		    --linger-ms L --batch-size BYTES [--transactional-id ID --txn-records N] \
//		    [--key-size K] [--rate R]
//		sarama-perf consume --bootstrap HOST:PORT --topic T --records N [--e2e]
//
//	(both with the contract's [--property NAME=VALUE ...]: see contract.Security, and
//	newConfig for how they map to Config.Net.TLS and Config.Net.SASL)
//
//	  - produce: an AsyncProducer with Return.Successes and Return.Errors, each channel
//	    drained by its own goroutine; the main goroutine feeds Input() the records of a
//	    contract.Feed (keys, the --rate schedule, stamped values). A sampled record (every
//	    record with --rate) carries its slot index in ProducerMessage.Metadata. Keyed
//	    records go where Sarama's default partitioner, NewHashPartitioner, puts them (FNV-1a
//	    of the key; null keys at random). In transactions (Producer.Transaction.ID):
//	    BeginTxn, N records, CommitTxn (which flushes them and waits for their reports);
//	    the clock stops at the end of the last commit.
//	  - consume: a Consumer with one PartitionConsumer per partition from OffsetOldest (no
//	    group, no commits), each partition's Messages() read by its own goroutine. With
//	    --e2e, "ready" goes to stderr once ConsumePartition has been called for every
//	    partition, and each reader takes the wall clock as it receives a record.
package main

import (
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"kring.invalid/perf/go/contract"
)

func main() {
	contract.ClientName = "sarama"
	a := contract.ParseArgs(os.Args[1:])
	if a.Op == "produce" {
		produce(a)
	} else {
		consume(a)
	}
}

// scramClient is Sarama's SCRAMClient on github.com/xdg-go/scram (Sarama leaves SCRAM to
// the application): Begin makes the conversation, Step is its next message (the first
// with an empty challenge), Done says it is over.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

// setSecurity applies the --property settings: Net.TLS (Sarama sets each connection's
// ServerName to the broker's host, so the certificate and host name are verified as
// usual) and Net.SASL (Sarama's defaults: handshake v1, the SaslAuthenticate request).
func setSecurity(cfg *sarama.Config, s contract.Security) {
	if s.TLS != nil {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = s.TLS
	}
	if !s.SASL() {
		return
	}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.User = s.Username
	cfg.Net.SASL.Password = s.Password
	switch s.Mechanism {
	case "PLAIN":
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case "SCRAM-SHA-256":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
	case "SCRAM-SHA-512":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
	default: // contract.ParseArgs lets no other through
		contract.Fail("sasl.mechanism %s: unsupported", s.Mechanism)
	}
}

// newConfig is the configuration both subcommands start from. Sarama defaults changed:
//   - Version: DefaultVersion (2.8) → V4_3_1_0, the newest Sarama knows, so that it uses
//     the newest request versions it has (a Kafka 4.x broker rejects the oldest ones).
//   - ChannelBufferSize: 256 → 4096, so that the channels between the application and
//     Sarama's goroutines (Input, Successes, Messages, ...) are not the bottleneck.
//   - Metadata.AllowAutoTopicCreation: true → false; programs never create topics.
//
// The --property settings go to Net.TLS and Net.SASL (setSecurity).
func newConfig(a contract.Args) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = contract.ProgramName()
	cfg.Version = sarama.V4_3_1_0
	cfg.ChannelBufferSize = 4096
	cfg.Metadata.AllowAutoTopicCreation = false
	setSecurity(cfg, a.Security)
	return cfg
}

// connect is the set-up outside the timed part: the client (which loads the cluster's
// metadata), the topic's partitions and an open connection to each partition's leader.
func connect(a contract.Args, cfg *sarama.Config) (sarama.Client, []int32) {
	client, err := sarama.NewClient([]string{a.Bootstrap}, cfg)
	if err != nil {
		contract.Fail("client: %v", err)
	}
	partitions, err := client.Partitions(a.Topic)
	if err != nil {
		contract.Fail("topic %s: %v", a.Topic, err)
	}
	if len(partitions) == 0 {
		contract.Fail("topic %s has no partitions", a.Topic)
	}
	for _, p := range partitions {
		leader, err := client.Leader(a.Topic, p)
		if err != nil {
			contract.Fail("leader of %s/%d: %v", a.Topic, p, err)
		}
		// Leader starts connecting in the background; Connected waits until it is done.
		if _, err := leader.Connected(); err != nil {
			contract.Fail("connect to %s: %v", leader.Addr(), err)
		}
	}
	return client, partitions
}

func produce(a contract.Args) {
	payloads := contract.ReadPayloads(a)
	cfg := newConfig(a)
	cfg.Producer.Return.Successes = true // default false: successes are the delivery reports
	cfg.Producer.Return.Errors = true
	switch a.Acks {
	case "0":
		cfg.Producer.RequiredAcks = sarama.NoResponse
	case "1":
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	case "all":
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	}
	if a.Idempotence {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1 // Sarama's idempotent producer requires it (default 5)
	}
	switch a.Compression {
	case "none":
		cfg.Producer.Compression = sarama.CompressionNone
	case "gzip":
		cfg.Producer.Compression = sarama.CompressionGZIP
	case "snappy":
		cfg.Producer.Compression = sarama.CompressionSnappy
	case "lz4":
		cfg.Producer.Compression = sarama.CompressionLZ4
	case "zstd":
		cfg.Producer.Compression = sarama.CompressionZSTD
	}
	// linger and batch size. Sarama flushes a broker's pending records when Flush.Bytes
	// of them are buffered (across that broker's partitions) or Flush.Frequency has
	// passed since the first of them. With linger 0 both stay 0, Sarama's "as fast as
	// possible" mode: records go out at once, batching only while a request is in flight
	// (a Flush.Bytes without a Flush.Frequency would leave a last partial batch unsent).
	// MaxMessageBytes (default 1 MiB) caps one partition's batch, so it is raised to the
	// batch size when that is larger. No message-count limit (Flush.MaxMessages = 0).
	if a.Linger > 0 {
		cfg.Producer.Flush.Frequency = a.Linger
		cfg.Producer.Flush.Bytes = a.BatchSize
	}
	cfg.Producer.Flush.MaxMessages = 0
	cfg.Producer.MaxMessageBytes = max(cfg.Producer.MaxMessageBytes, a.BatchSize)
	if a.Transactional() {
		cfg.Producer.Transaction.ID = a.TransactionalID // needs Idempotent, set above
	}

	client, _ := connect(a, cfg)
	defer client.Close()
	// An idempotent producer gets its producer id here, before the timed part (a
	// transactional one with its transactional id, at its coordinator).
	producer, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		contract.Fail("producer: %v", err)
	}

	n := int64(a.Records)
	base := time.Now()
	feed := contract.NewFeed(a, payloads)
	var finished, failed atomic.Int64 // delivery reports, and failures among them
	var firstError error              // written by the Errors reader, read after it ends
	var lastReport time.Duration      // since base; written once, by the N-th report
	allReported := make(chan struct{})
	// countReport counts one delivery report; the N-th closes allReported.
	countReport := func() {
		if finished.Add(1) == n {
			lastReport = time.Since(base)
			close(allReported)
		}
	}
	var drained sync.WaitGroup
	drained.Add(2)
	go func() {
		defer drained.Done()
		for m := range producer.Successes() {
			if k, ok := m.Metadata.(int); ok {
				feed.Delivered(k)
			}
			countReport()
		}
	}()
	go func() {
		defer drained.Done()
		for e := range producer.Errors() {
			if firstError == nil {
				firstError = e.Err
			}
			failed.Add(1)
			countReport()
		}
	}()

	stop := contract.Monitor(a, &finished)
	input := producer.Input()
	t0 := time.Since(base)
	for i := range a.Records {
		if a.BeginsTransaction(i) {
			if err := producer.BeginTxn(); err != nil {
				contract.Fail("begin transaction: %v", err)
			}
		}
		key, value, slot := feed.Next(i)
		m := &sarama.ProducerMessage{Topic: a.Topic, Value: sarama.ByteEncoder(value)}
		if key != nil {
			m.Key = sarama.ByteEncoder(key) // left a nil interface otherwise: a null key
		}
		if slot >= 0 {
			m.Metadata = slot
		}
		input <- m
		if a.EndsTransaction(i) {
			// CommitTxn waits for every record of the transaction to be reported.
			if f := failed.Load(); f > 0 {
				contract.Fail("%d records failed in a transaction, not committed; first error: %v", f, firstError)
			}
			if err := producer.CommitTxn(); err != nil {
				contract.Fail("commit transaction: %v", err)
			}
		}
	}
	<-allReported
	elapsed := lastReport - t0
	if a.Transactional() {
		elapsed = time.Since(base) - t0 // to the end of the last commit
	}
	stop()
	producer.AsyncClose()
	drained.Wait()

	if f := failed.Load(); f > 0 {
		contract.Fail("%d of %d records failed; first error: %v", f, n, firstError)
	}
	contract.Report("produce", a.Records, feed.Bytes, elapsed, feed.Latencies(), nil)
}

func consume(a contract.Args) {
	cfg := newConfig(a)
	// Default false (errors are only logged, and Sarama's logger discards them): a failed
	// fetch must fail the run.
	cfg.Consumer.Return.Errors = true
	client, partitions := connect(a, cfg)
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		contract.Fail("consumer: %v", err)
	}

	n := int64(a.Records)
	var count atomic.Int64      // records read (the first N are counted)
	var end time.Time           // when the N-th record was read; written once
	var valueBytes atomic.Int64 // summed by each partition's reader when it stops
	var digest atomic.Uint64    // likewise
	var e2eMu sync.Mutex
	var e2e []time.Duration // with --e2e: the N records' end-to-end latencies, gathered likewise
	allRead := make(chan struct{})
	var readers sync.WaitGroup
	stop := contract.Monitor(a, &count)
	t0 := time.Now()
	var children []sarama.PartitionConsumer
	for _, p := range partitions {
		pc, err := consumer.ConsumePartition(a.Topic, p, sarama.OffsetOldest)
		if err != nil {
			contract.Fail("consume %s/%d: %v", a.Topic, p, err)
		}
		children = append(children, pc)
		readers.Add(1)
		go func() {
			defer readers.Done()
			var b int64
			var d uint64
			var lat []time.Duration
			for m := range pc.Messages() {
				var handedOver time.Time // the wall clock, with --e2e
				if a.E2E {
					handedOver = time.Now()
				}
				share := contract.Touch(m.Value)
				k := count.Add(1)
				if k > n {
					continue // beyond the N records asked for
				}
				b, d = b+int64(len(m.Value)), d+share
				if a.E2E {
					lat = append(lat, contract.EndToEnd(m.Value, handedOver))
				}
				if k == n {
					end = time.Now()
					close(allRead)
				}
			}
			valueBytes.Add(b)
			digest.Add(d)
			e2eMu.Lock()
			e2e = append(e2e, lat...)
			e2eMu.Unlock()
		}()
		go func() {
			for e := range pc.Errors() {
				contract.Fail("consume %s/%d: %v", e.Topic, e.Partition, e.Err)
			}
		}()
	}
	if a.E2E {
		contract.Ready() // every partition's consumer started; fetches follow
	}
	<-allRead
	elapsed := end.Sub(t0)
	stop()
	for _, pc := range children {
		pc.AsyncClose()
	}
	readers.Wait()
	if err := consumer.Close(); err != nil {
		contract.Fail("close consumer: %v", err)
	}
	contract.LogDigest(digest.Load())
	if a.E2E && len(e2e) != a.Records {
		contract.Fail("--e2e: %d end-to-end latencies for %d records", len(e2e), a.Records)
	}
	contract.Report("consume", a.Records, valueBytes.Load(), elapsed, nil, e2e)
}
