// Package contract is the peer contract of perf/README.md — arguments, payload file,
// the records produce sends (keys, the --rate schedule, stamped values: Feed), progress,
// latency percentiles, the end-to-end latencies of consume --e2e and the one-line JSON
// result — shared by the Go peers of perf/run: cmd/sarama-perf and cmd/franz-go-perf (each
// main.go holds its client-specific part).
//
// A peer's main sets ClientName before calling anything else here: it names the client
// in the result line and, as ClientName+"-perf", the program in messages and the usage.
package contract

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

const (
	// SampleEvery: every SampleEvery-th record's send→delivery latency is measured
	// (every record's with --rate).
	SampleEvery = 100
	// StampLen is the length of the stamp that produce --rate writes over the start of
	// each value: the wall clock of the send call, ns since the Unix epoch, as this many
	// decimal digits (zero-padded).
	StampLen = 19
	// consumeTimeout: consume fails if N records have not arrived by then.
	consumeTimeout = 120 * time.Second
	// produceStall: produce fails after this long without a single delivery report.
	produceStall = 120 * time.Second
)

// Args is the command line, as the contract defines it.
type Args struct {
	Op          string // "produce" or "consume"
	Bootstrap   string
	Topic       string
	Records     int
	PayloadFile string
	Acks        string // "0", "1" or "all"
	Idempotence bool
	Compression string // "none", "gzip", "snappy", "lz4" or "zstd"
	Linger      time.Duration
	BatchSize   int
	// TransactionalID and TxnRecords (--transactional-id, --txn-records; both or
	// neither): produce in transactions of TxnRecords records with this id.
	TransactionalID string
	TxnRecords      int
	// KeySize (--key-size K, 1 to 16; 0 without it: null keys): record i's key is the
	// first KeySize of the 16 hex digits of i * 0x9E3779B97F4A7C15 (Feed.Next).
	KeySize int
	// Rate (--rate R, records/s; 0 without it: flat out): record i is sent no earlier
	// than start + i/R, every record's latency is measured and its value is stamped.
	Rate float64
	// E2E (consume --e2e): print "ready" on stderr before the first fetch and measure
	// every record's end-to-end latency from the stamp in its value (EndToEnd).
	E2E bool
	// Security is what the --property NAME=VALUE options set (both subcommands).
	Security Security
}

// Security is the connection's security, from the contract's `--property NAME=VALUE`
// options. The names are librdkafka's (and kring's); the ones taken are
//
//	security.protocol  PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL
//	sasl.mechanism     PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (required with SASL)
//	sasl.username      required with SASL
//	sasl.password      required with SASL
//	ssl.ca.location    a PEM file of the CA certificates to trust (with SSL/SASL_SSL;
//	                   without it, the system's roots)
//
// Any other name, an unsupported value, a property given twice or one that the protocol
// does not use (sasl.* without SASL, ssl.* without TLS) is a bad command line: a setting
// is never ignored.
type Security struct {
	Protocol  string // "PLAINTEXT", "SSL", "SASL_PLAINTEXT" or "SASL_SSL"
	Mechanism string // "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512"; "" without SASL
	Username  string
	Password  string
	// TLS is the TLS configuration with SSL and SASL_SSL, nil otherwise: the
	// ssl.ca.location certificates as its roots (nil RootCAs, the system's, without it),
	// and the usual verification of the broker's certificate and host name (ServerName
	// is left empty: each client sets it to the host of the broker it dials).
	TLS *tls.Config
}

// SASL says whether the protocol authenticates with SASL.
func (s Security) SASL() bool { return strings.HasPrefix(s.Protocol, "SASL_") }

// propertyList collects the repeatable --property NAME=VALUE, in order.
type propertyList [][2]string

func (p *propertyList) String() string { return "" }

func (p *propertyList) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q is not NAME=VALUE", v)
	}
	*p = append(*p, [2]string{name, value})
	return nil
}

// parseSecurity checks the properties and makes the Security they describe; a bad one
// exits through BadArgs (or Fail, for an unreadable CA file), naming the property.
func parseSecurity(props propertyList) Security {
	given := map[string]string{}
	for _, kv := range props {
		name, value := kv[0], kv[1]
		switch name {
		case "security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location":
		default:
			BadArgs("--property %s: unsupported property (%s takes security.protocol, "+
				"sasl.mechanism, sasl.username, sasl.password and ssl.ca.location)", name, ProgramName())
		}
		if _, twice := given[name]; twice {
			BadArgs("--property %s: given twice", name)
		}
		given[name] = value
	}

	s := Security{Protocol: "PLAINTEXT"}
	if v, ok := given["security.protocol"]; ok {
		s.Protocol = strings.ToUpper(v)
		if !slices.Contains([]string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, s.Protocol) {
			BadArgs("--property security.protocol=%s: unsupported (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", v)
		}
	}
	useTLS := s.Protocol == "SSL" || s.Protocol == "SASL_SSL"

	for _, name := range []string{"sasl.mechanism", "sasl.username", "sasl.password"} {
		if _, ok := given[name]; ok && !s.SASL() {
			BadArgs("--property %s: security.protocol %s does not use SASL", name, s.Protocol)
		}
	}
	if s.SASL() {
		v, ok := given["sasl.mechanism"]
		if !ok {
			BadArgs("--property sasl.mechanism: required with security.protocol %s (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.Protocol)
		}
		s.Mechanism = strings.ToUpper(v)
		if !slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, s.Mechanism) {
			BadArgs("--property sasl.mechanism=%s: unsupported (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", v)
		}
		if s.Username, ok = given["sasl.username"]; !ok || s.Username == "" {
			BadArgs("--property sasl.username: required with sasl.mechanism %s", s.Mechanism)
		}
		if s.Password, ok = given["sasl.password"]; !ok {
			BadArgs("--property sasl.password: required with sasl.mechanism %s", s.Mechanism)
		}
	}

	ca, haveCA := given["ssl.ca.location"]
	if haveCA && !useTLS {
		BadArgs("--property ssl.ca.location: security.protocol %s does not use TLS", s.Protocol)
	}
	if useTLS {
		s.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if haveCA {
			if ca == "" {
				BadArgs("--property ssl.ca.location: empty path")
			}
			pem, err := os.ReadFile(ca)
			if err != nil {
				Fail("--property ssl.ca.location: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				Fail("--property ssl.ca.location: no PEM certificate in %s", ca)
			}
			s.TLS.RootCAs = pool
		}
	}
	return s
}

// Paced says whether produce follows the --rate schedule.
func (a Args) Paced() bool { return a.Rate > 0 }

// Transactional says whether produce sends its records in transactions.
func (a Args) Transactional() bool { return a.TransactionalID != "" }

// EndsTransaction says whether record i is the last of its transaction: the
// TxnRecords-th of it, or the last record of the run.
func (a Args) EndsTransaction(i int) bool {
	return a.Transactional() && ((i+1)%a.TxnRecords == 0 || i+1 == a.Records)
}

// BeginsTransaction says whether record i is the first of its transaction.
func (a Args) BeginsTransaction(i int) bool {
	return a.Transactional() && i%a.TxnRecords == 0
}

// ClientName is the peer's client, "sarama" or "franz-go": the "client" of the result
// line. The peer's main sets it first, before any other call into this package.
var ClientName string

// ProgramName is the peer's program name, ClientName+"-perf", in messages and the usage.
func ProgramName() string { return ClientName + "-perf" }

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  %[1]s produce --bootstrap HOST:PORT --topic T --records N --payload-file F \
      --acks 0|1|all --idempotence true|false --compression none|gzip|snappy|lz4|zstd \
      --linger-ms L --batch-size BYTES [--transactional-id ID --txn-records N] \
      [--key-size K] [--rate R] [--property NAME=VALUE ...]
  %[1]s consume --bootstrap HOST:PORT --topic T --records N [--e2e] [--property NAME=VALUE ...]
(the peer contract of perf/README.md; the properties taken: security.protocol
PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL, sasl.mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512,
sasl.username, sasl.password, ssl.ca.location CA-PEM-FILE)
`, ProgramName())
}

// Fail reports a run's failure on stderr and exits 1.
func Fail(format string, v ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", ProgramName(), fmt.Sprintf(format, v...))
	os.Exit(1)
}

// BadArgs reports a bad command line on stderr, with the usage, and exits 2.
func BadArgs(format string, v ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", ProgramName(), fmt.Sprintf(format, v...))
	usage()
	os.Exit(2)
}

// ParseArgs reads the subcommand (the first argument) and its flags; flags of the other
// subcommand, unknown values and stray arguments are errors.
func ParseArgs(argv []string) Args {
	if len(argv) == 0 || (argv[0] != "produce" && argv[0] != "consume") {
		BadArgs("the first argument must be produce or consume")
	}
	a := Args{Op: argv[0]}
	fs := flag.NewFlagSet(ProgramName()+" "+a.Op, flag.ContinueOnError)
	fs.Usage = usage
	fs.StringVar(&a.Bootstrap, "bootstrap", "", "HOST:PORT of a broker")
	fs.StringVar(&a.Topic, "topic", "", "topic (it must exist)")
	fs.IntVar(&a.Records, "records", 0, "number of records")
	var props propertyList
	fs.Var(&props, "property", "NAME=VALUE, a security setting (repeatable)")
	var idempotence string
	var lingerMs int
	if a.Op == "produce" {
		fs.StringVar(&a.PayloadFile, "payload-file", "", "file of K lines of S bytes each")
		fs.StringVar(&a.Acks, "acks", "1", "0, 1 or all")
		fs.StringVar(&idempotence, "idempotence", "false", "true or false")
		fs.StringVar(&a.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
		fs.IntVar(&lingerMs, "linger-ms", 5, "linger, ms")
		fs.IntVar(&a.BatchSize, "batch-size", 1_000_000, "batch size, bytes")
		fs.StringVar(&a.TransactionalID, "transactional-id", "", "produce in transactions with this transactional id")
		fs.IntVar(&a.TxnRecords, "txn-records", 0, "records per transaction")
		fs.IntVar(&a.KeySize, "key-size", 0, "keys of K bytes (1 to 16)")
		fs.Float64Var(&a.Rate, "rate", 0, "records/s, on a fixed schedule, with stamped values")
	} else {
		fs.BoolVar(&a.E2E, "e2e", false, "print ready, measure end-to-end latency from the values' stamps")
	}
	switch err := fs.Parse(argv[1:]); err {
	case nil:
	case flag.ErrHelp:
		os.Exit(0)
	default:
		os.Exit(2) // fs.Parse has printed the error and the usage
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		BadArgs("unexpected argument %q", fs.Arg(0))
	case a.Bootstrap == "" || a.Topic == "":
		BadArgs("--bootstrap and --topic are required")
	case a.Records <= 0:
		BadArgs("--records must be > 0")
	}
	a.Security = parseSecurity(props)
	if a.Op == "consume" {
		return a
	}
	switch {
	case a.PayloadFile == "":
		BadArgs("produce needs --payload-file")
	case !slices.Contains([]string{"0", "1", "all"}, a.Acks):
		BadArgs("--acks %q: must be 0, 1 or all", a.Acks)
	case idempotence != "true" && idempotence != "false":
		BadArgs("--idempotence %q: must be true or false", idempotence)
	case !slices.Contains([]string{"none", "gzip", "snappy", "lz4", "zstd"}, a.Compression):
		BadArgs("--compression %q: must be none, gzip, snappy, lz4 or zstd", a.Compression)
	case lingerMs < 0:
		BadArgs("--linger-ms must be >= 0")
	case a.BatchSize <= 0:
		BadArgs("--batch-size must be > 0")
	case a.TxnRecords < 0:
		BadArgs("--txn-records must be > 0")
	case a.Transactional() != (a.TxnRecords > 0):
		BadArgs("--transactional-id and --txn-records go together")
	case a.Transactional() && idempotence != "true":
		BadArgs("--transactional-id needs --idempotence true")
	case given["key-size"] && (a.KeySize < 1 || a.KeySize > 16):
		BadArgs("--key-size %d: must be 1 to 16", a.KeySize)
	case given["rate"] && !(a.Rate > 0 && !math.IsInf(a.Rate, 0)):
		BadArgs("--rate %v: must be a number of records/s > 0", a.Rate)
	case a.Paced() && a.Transactional():
		BadArgs("--rate and --transactional-id don't go together")
	case a.Paced() && float64(a.Records)/a.Rate > 100*365*24*3600:
		BadArgs("--rate %v: %d records would take over a century", a.Rate, a.Records)
	}
	a.Idempotence = idempotence == "true"
	a.Linger = time.Duration(lingerMs) * time.Millisecond
	if a.Idempotence && a.Acks != "all" {
		BadArgs("--idempotence true needs --acks all")
	}
	return a
}

// ReadPayloads reads the payload file, a.PayloadFile, once: its K lines, each exactly
// S > 0 bytes (a final newline is optional). Record i's value is line i mod K. With
// --rate, lines shorter than the stamp (StampLen bytes) are a bad command line.
func ReadPayloads(a Args) [][]byte {
	path := a.PayloadFile
	data, err := os.ReadFile(path)
	if err != nil {
		Fail("payload file: %v", err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	if last := len(lines) - 1; len(lines[last]) == 0 {
		lines = lines[:last] // the final newline, or an empty file
	}
	if len(lines) == 0 {
		Fail("payload file %s is empty", path)
	}
	size := len(lines[0])
	if size == 0 {
		Fail("payload file %s: line 1 is empty", path)
	}
	for i, line := range lines {
		if len(line) != size {
			Fail("payload file %s: line %d is %d bytes, line 1 is %d", path, i+1, len(line), size)
		}
	}
	if a.Paced() && size < StampLen {
		BadArgs("--rate needs payload lines of at least %d bytes (the stamp); %s has lines of %d", StampLen, path, size)
	}
	return lines
}

// Monitor prints progress (count of total) to stderr once a second until the returned
// stop is called. It ends the run (exit 1) when consume has not reached total within
// consumeTimeout of the start (with --e2e, whose producer starts when it likes and runs
// as long as its schedule says: when the count has not moved for consumeTimeout), or
// when produce's count has not moved for produceStall (plus the schedule's time between
// two records, with --rate).
func Monitor(a Args, count *atomic.Int64) (stop func()) {
	op, total := a.Op, a.Records
	stall := produceStall
	if a.Paced() {
		stall += time.Duration(float64(time.Second) / a.Rate)
	}
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
				fmt.Fprintf(os.Stderr, "%s: %s %d/%d\n", ProgramName(), op, n, total)
				if n != last {
					last, lastMoved = n, now
				}
				switch {
				case op == "consume" && !a.E2E && now.Sub(start) > consumeTimeout:
					Fail("only %d of %d records arrived within %v", n, total, consumeTimeout)
				case op == "consume" && a.E2E && now.Sub(lastMoved) > consumeTimeout:
					Fail("%d of %d records arrived, none for %v", n, total, consumeTimeout)
				case op == "produce" && now.Sub(lastMoved) > stall:
					Fail("%d of %d records delivered, none for %v", n, total, stall)
				}
			}
		}
	}()
	return func() { close(quit) }
}

// PercentileMs is the p-quantile (nearest rank) of sorted latencies, in ms.
func PercentileMs(sorted []time.Duration, p float64) float64 {
	i := int(math.Ceil(float64(len(sorted))*p)) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// Report prints the contract's result line on stdout. latencies (produce: Feed.Latencies)
// is nil for consume, whose p50_ms and p99_ms are null; produce also gives p999_ms and
// max_ms (over every record with --rate, over the sampled ones without). e2e (consume
// --e2e: the EndToEnd latencies of the N records) adds e2e_p50_ms, e2e_p99_ms,
// e2e_p999_ms and e2e_max_ms; nil leaves them out. Both are sorted in place.
func Report(op string, records int, valueBytes int64, elapsed time.Duration, latencies, e2e []time.Duration) {
	line := fmt.Sprintf(`{"client":"%s","op":"%s","records":%d,"bytes":%d,"elapsed_s":%.6f`,
		ClientName, op, records, valueBytes, elapsed.Seconds())
	if len(latencies) > 0 {
		slices.Sort(latencies)
		line += fmt.Sprintf(`,"p50_ms":%.3f,"p99_ms":%.3f,"p999_ms":%.3f,"max_ms":%.3f`,
			PercentileMs(latencies, 0.50), PercentileMs(latencies, 0.99),
			PercentileMs(latencies, 0.999), PercentileMs(latencies, 1))
	} else {
		line += `,"p50_ms":null,"p99_ms":null`
	}
	if len(e2e) > 0 {
		slices.Sort(e2e)
		line += fmt.Sprintf(`,"e2e_p50_ms":%.3f,"e2e_p99_ms":%.3f,"e2e_p999_ms":%.3f,"e2e_max_ms":%.3f`,
			PercentileMs(e2e, 0.50), PercentileMs(e2e, 0.99), PercentileMs(e2e, 0.999), PercentileMs(e2e, 1))
	}
	fmt.Println(line + "}")
}

// Touch reads a value — its length and its first and last bytes — and returns its
// share of the consumed values' digest. The digest is the sum of the shares, so it does
// not depend on the order records arrive in: two runs that read the same records print
// the same digest.
func Touch(value []byte) uint64 {
	share := uint64(len(value)) << 16
	if len(value) > 0 {
		share |= uint64(value[0])<<8 | uint64(value[len(value)-1])
	}
	return share
}

// LogDigest notes the consumed values' digest on stderr.
func LogDigest(digest uint64) {
	fmt.Fprintf(os.Stderr, "%s: consumed values' digest %016x\n", ProgramName(), digest)
}
