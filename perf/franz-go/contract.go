// contract.go: the peer contract of perf/README.md — arguments, payload file, progress,
// latency percentiles and the one-line JSON result — for the Go peers of perf/run.
//
// perf/sarama/contract.go and perf/franz-go/contract.go are the same file (each peer is
// its own Go module, so they cannot share a package): change both. The client-specific
// part, main.go, defines clientName.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

const (
	// sampleEvery: every sampleEvery-th record's send→delivery latency is measured.
	sampleEvery = 100
	// consumeTimeout: consume fails if N records have not arrived by then.
	consumeTimeout = 120 * time.Second
	// produceStall: produce fails after this long without a single delivery report.
	produceStall = 120 * time.Second
)

// args is the command line, as the contract defines it.
type args struct {
	op          string // "produce" or "consume"
	bootstrap   string
	topic       string
	records     int
	payloadFile string
	acks        string // "0", "1" or "all"
	idempotence bool
	compression string // "none", "gzip", "snappy", "lz4" or "zstd"
	linger      time.Duration
	batchSize   int
}

func programName() string { return clientName + "-perf" }

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  %[1]s produce --bootstrap HOST:PORT --topic T --records N --payload-file F \
      --acks 0|1|all --idempotence true|false --compression none|gzip|snappy|lz4|zstd \
      --linger-ms L --batch-size BYTES
  %[1]s consume --bootstrap HOST:PORT --topic T --records N
(the peer contract of perf/README.md)
`, programName())
}

// fail reports a run's failure on stderr and exits 1.
func fail(format string, v ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", programName(), fmt.Sprintf(format, v...))
	os.Exit(1)
}

// badArgs reports a bad command line on stderr, with the usage, and exits 2.
func badArgs(format string, v ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", programName(), fmt.Sprintf(format, v...))
	usage()
	os.Exit(2)
}

// parseArgs reads the subcommand (the first argument) and its flags; flags of the other
// subcommand, unknown values and stray arguments are errors.
func parseArgs(argv []string) args {
	if len(argv) == 0 || (argv[0] != "produce" && argv[0] != "consume") {
		badArgs("the first argument must be produce or consume")
	}
	a := args{op: argv[0]}
	fs := flag.NewFlagSet(programName()+" "+a.op, flag.ContinueOnError)
	fs.Usage = usage
	fs.StringVar(&a.bootstrap, "bootstrap", "", "HOST:PORT of a broker")
	fs.StringVar(&a.topic, "topic", "", "topic (it must exist)")
	fs.IntVar(&a.records, "records", 0, "number of records")
	var idempotence string
	var lingerMs int
	if a.op == "produce" {
		fs.StringVar(&a.payloadFile, "payload-file", "", "file of K lines of S bytes each")
		fs.StringVar(&a.acks, "acks", "1", "0, 1 or all")
		fs.StringVar(&idempotence, "idempotence", "false", "true or false")
		fs.StringVar(&a.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
		fs.IntVar(&lingerMs, "linger-ms", 5, "linger, ms")
		fs.IntVar(&a.batchSize, "batch-size", 1_000_000, "batch size, bytes")
	}
	switch err := fs.Parse(argv[1:]); err {
	case nil:
	case flag.ErrHelp:
		os.Exit(0)
	default:
		os.Exit(2) // fs.Parse has printed the error and the usage
	}
	switch {
	case fs.NArg() > 0:
		badArgs("unexpected argument %q", fs.Arg(0))
	case a.bootstrap == "" || a.topic == "":
		badArgs("--bootstrap and --topic are required")
	case a.records <= 0:
		badArgs("--records must be > 0")
	}
	if a.op == "consume" {
		return a
	}
	switch {
	case a.payloadFile == "":
		badArgs("produce needs --payload-file")
	case !slices.Contains([]string{"0", "1", "all"}, a.acks):
		badArgs("--acks %q: must be 0, 1 or all", a.acks)
	case idempotence != "true" && idempotence != "false":
		badArgs("--idempotence %q: must be true or false", idempotence)
	case !slices.Contains([]string{"none", "gzip", "snappy", "lz4", "zstd"}, a.compression):
		badArgs("--compression %q: must be none, gzip, snappy, lz4 or zstd", a.compression)
	case lingerMs < 0:
		badArgs("--linger-ms must be >= 0")
	case a.batchSize <= 0:
		badArgs("--batch-size must be > 0")
	}
	a.idempotence = idempotence == "true"
	a.linger = time.Duration(lingerMs) * time.Millisecond
	if a.idempotence && a.acks != "all" {
		badArgs("--idempotence true needs --acks all")
	}
	return a
}

// readPayloads reads the payload file once: its K lines, each exactly S > 0 bytes (a
// final newline is optional). Record i's value is line i mod K.
func readPayloads(path string) [][]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("payload file: %v", err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	if last := len(lines) - 1; len(lines[last]) == 0 {
		lines = lines[:last] // the final newline, or an empty file
	}
	if len(lines) == 0 {
		fail("payload file %s is empty", path)
	}
	size := len(lines[0])
	if size == 0 {
		fail("payload file %s: line 1 is empty", path)
	}
	for i, line := range lines {
		if len(line) != size {
			fail("payload file %s: line %d is %d bytes, line 1 is %d", path, i+1, len(line), size)
		}
	}
	return lines
}

// latencySlots returns one slot per sampled record: slot i/sampleEvery for record i.
func latencySlots(records int) []time.Duration {
	return make([]time.Duration, (records+sampleEvery-1)/sampleEvery)
}

// monitor prints progress (count of total) to stderr once a second until the returned
// stop is called. It ends the run (exit 1) when consume has not reached total within
// consumeTimeout of the start, or when produce's count has not moved for produceStall.
func monitor(op string, total int, count *atomic.Int64) (stop func()) {
	quit := make(chan struct{})
	go func() {
		start := time.Now()
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		last, lastMoved := int64(-1), start
		for {
			select {
			case <-quit:
				return
			case now := <-ticker.C:
				n := count.Load()
				fmt.Fprintf(os.Stderr, "%s: %s %d/%d\n", programName(), op, n, total)
				if n != last {
					last, lastMoved = n, now
				}
				switch {
				case op == "consume" && now.Sub(start) > consumeTimeout:
					fail("only %d of %d records arrived within %v", n, total, consumeTimeout)
				case op == "produce" && now.Sub(lastMoved) > produceStall:
					fail("%d of %d records delivered, none for %v", n, total, produceStall)
				}
			}
		}
	}()
	return func() { close(quit) }
}

// percentileMs is the p-quantile (nearest rank) of sorted latencies, in ms.
func percentileMs(sorted []time.Duration, p float64) float64 {
	i := int(math.Ceil(float64(len(sorted))*p)) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// report prints the contract's result line on stdout; latencies is nil for consume.
func report(op string, records int, valueBytes int64, elapsed time.Duration, latencies []time.Duration) {
	p50, p99 := "null", "null"
	if len(latencies) > 0 {
		slices.Sort(latencies)
		p50 = fmt.Sprintf("%.3f", percentileMs(latencies, 0.50))
		p99 = fmt.Sprintf("%.3f", percentileMs(latencies, 0.99))
	}
	fmt.Printf(`{"client":"%s","op":"%s","records":%d,"bytes":%d,"elapsed_s":%.6f,"p50_ms":%s,"p99_ms":%s}`+"\n",
		clientName, op, records, valueBytes, elapsed.Seconds(), p50, p99)
}

// touch reads a value — its length and its first and last bytes — and returns its
// share of the consumed values' digest. The digest is the sum of the shares, so it does
// not depend on the order records arrive in: two runs that read the same records print
// the same digest.
func touch(value []byte) uint64 {
	share := uint64(len(value)) << 16
	if len(value) > 0 {
		share |= uint64(value[0])<<8 | uint64(value[len(value)-1])
	}
	return share
}

// logDigest notes the consumed values' digest on stderr.
func logDigest(digest uint64) {
	fmt.Fprintf(os.Stderr, "%s: consumed values' digest %016x\n", programName(), digest)
}
