package contract

import (
	"fmt"
	"math"
	"os"
	"time"
)

// Feed makes the records produce sends, as the contract says: record i's value is payload
// line i mod K; its key null, or with --key-size the first KeySize hex digits of
// i * 0x9E3779B97F4A7C15; with --rate it waits for its time on the schedule and its value
// is a copy of the line stamped with the send's wall clock. It also keeps the send times
// and the latencies of the measured records (every SampleEvery-th, every one with
// --rate).
//
// Next is called by one goroutine (the sending loop), for i = 0, 1, ... in order;
// Delivered by any, once per slot.
type Feed struct {
	payloads    [][]byte
	keySize     int
	paced       bool
	nsPerRecord float64   // the schedule: record i at start + i*nsPerRecord
	start       time.Time // the schedule's start: the first Next
	base        time.Time // the origin of sentAt
	sentAt      []time.Duration
	latencies   []time.Duration
	slab        slab // the per-record keys and stamped values
	// Bytes counts the value bytes of the records made so far.
	Bytes int64
}

// NewFeed makes the feed of a produce run over the payload lines (ReadPayloads).
func NewFeed(a Args, payloads [][]byte) *Feed {
	slots := (a.Records + SampleEvery - 1) / SampleEvery
	if a.Paced() {
		slots = a.Records
	}
	f := &Feed{
		payloads:  payloads,
		keySize:   a.KeySize,
		paced:     a.Paced(),
		base:      time.Now(),
		sentAt:    make([]time.Duration, slots),
		latencies: make([]time.Duration, slots),
	}
	if f.paced {
		f.nsPerRecord = float64(time.Second) / a.Rate
	}
	return f
}

const hexDigits = "0123456789abcdef"

// Next makes record i, to be handed to the client at once: its key (nil without
// --key-size: a null key) and value, and its latency slot, for Delivered, or -1 if its
// latency is not measured. With --rate it first waits (sleeps) until start + i/R, start
// being the first call's time, and the value's first StampLen bytes are the wall clock
// now. A measured record's send time is taken now. The key and a stamped value are the
// record's own (the client may keep them until the delivery report); an unstamped value
// is the payload line itself, shared by the records that use it.
// MinNap is the shortest wait of a paced sender (perf/README.md, --rate).
const MinNap = 500 * time.Microsecond

func (f *Feed) Next(i int) (key, value []byte, slot int) {
	value = f.payloads[i%len(f.payloads)]
	f.Bytes += int64(len(value))
	if f.keySize > 0 {
		h := uint64(i) * 0x9E3779B97F4A7C15
		key = f.slab.take(f.keySize)
		for j := range key {
			key[j] = hexDigits[h>>(60-4*j)&0xf]
		}
	}
	switch {
	case f.paced:
		if f.start.IsZero() {
			f.start = time.Now()
		} else if wait := time.Until(f.start.Add(time.Duration(float64(i) * f.nsPerRecord))); wait > 0 {
			// Naps of at least MinNap (the contract's rule), so pacing costs at most
			// 1/MinNap wake-ups a second. Behind schedule: no wait, and the schedule stays.
			time.Sleep(max(wait, MinNap))
		}
		now := time.Now()
		stamped := f.slab.take(len(value))
		copy(stamped, value)
		putStamp(stamped, now.UnixNano())
		value, slot = stamped, i
		f.sentAt[i] = now.Sub(f.base)
	case i%SampleEvery == 0:
		slot = i / SampleEvery
		f.sentAt[slot] = time.Since(f.base)
	default:
		slot = -1
	}
	return key, value, slot
}

// Delivered notes the delivery report of the record of the slot (Next's, >= 0): its
// latency, from its send, ends now.
func (f *Feed) Delivered(slot int) {
	f.latencies[slot] = time.Since(f.base) - f.sentAt[slot]
}

// Latencies are the latencies noted by Delivered, one per slot, for Report.
func (f *Feed) Latencies() []time.Duration { return f.latencies }

// putStamp writes ns (ns since the Unix epoch, < 10^19) over b's first StampLen bytes,
// in decimal, zero-padded.
func putStamp(b []byte, ns int64) {
	u := uint64(ns)
	for j := StampLen - 1; j >= 0; j-- {
		b[j] = '0' + byte(u%10)
		u /= 10
	}
}

// ParseStamp reads the stamp of produce --rate from the value's first StampLen bytes;
// ok is false when they are not StampLen decimal digits.
func ParseStamp(value []byte) (ns int64, ok bool) {
	if len(value) < StampLen {
		return 0, false
	}
	var u uint64 // 19 digits are < 10^19 < 2^64
	for _, c := range value[:StampLen] {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// EndToEnd is a consumed record's end-to-end latency (consume --e2e): now, when the
// client handed it over, less the stamp in its value. A value without a stamp ends the
// run (Fail).
func EndToEnd(value []byte, now time.Time) time.Duration {
	ns, ok := ParseStamp(value)
	if !ok {
		Fail("--e2e: a value without a stamp (%d leading decimal digits): %q", StampLen, value[:min(len(value), StampLen)])
	}
	return time.Duration(now.UnixNano() - ns)
}

// Ready prints the line "ready" on stderr: consume --e2e has its connections, metadata
// and partitions, and its producer may start.
func Ready() { fmt.Fprintln(os.Stderr, "ready") }

// slabChunk is the size of a slab's chunks.
const slabChunk = 64 << 10

// slab hands out small byte slices cut from larger chunks, one allocation for many
// records' keys and values (a chunk lives until the client has dropped all of them).
type slab struct{ free []byte }

// take returns n bytes of their own (capacity n).
func (s *slab) take(n int) []byte {
	if n > len(s.free) {
		if n > slabChunk/8 {
			return make([]byte, n)
		}
		s.free = make([]byte, slabChunk)
	}
	b := s.free[:n:n]
	s.free = s.free[n:]
	return b
}
