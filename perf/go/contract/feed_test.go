package contract

import (
	"fmt"
	"testing"
	"time"
)

// The keys are the contract's: the first K of the 16 hex digits of i * 0x9E3779B97F4A7C15.
func TestFeedKeys(t *testing.T) {
	payloads := [][]byte{[]byte("line")}
	for k := 1; k <= 16; k++ {
		f := NewFeed(Args{Records: 5000, KeySize: k}, payloads)
		for i := range 5000 {
			key, value, _ := f.Next(i)
			want := fmt.Sprintf("%016x", uint64(i)*0x9E3779B97F4A7C15)[:k]
			if string(key) != want || cap(key) != k || string(value) != "line" {
				t.Fatalf("K=%d, record %d: key %q (cap %d), value %q; want key %q", k, i, key, cap(key), value, want)
			}
		}
	}
	if key, _, _ := NewFeed(Args{Records: 1}, payloads).Next(0); key != nil {
		t.Fatalf("no --key-size: key %q, want nil", key)
	}
}

// With --rate, each value is its line with the send's wall clock over its first 19 bytes,
// every record measured, and record i not sent before start + i/R.
func TestFeedPaced(t *testing.T) {
	line := []byte("0123456789012345678901234567890123456789")
	f := NewFeed(Args{Records: 200, Rate: 2000}, [][]byte{line})
	start := time.Now()
	for i := range 200 {
		before := time.Now().UnixNano()
		_, value, slot := f.Next(i)
		after := time.Now().UnixNano()
		ns, ok := ParseStamp(value)
		if !ok || ns < before || ns > after || slot != i || string(value[StampLen:]) != string(line[StampLen:]) {
			t.Fatalf("record %d: value %q, slot %d (stamp %d, sent between %d and %d)", i, value, slot, ns, before, after)
		}
	}
	if string(line[:StampLen]) != "0123456789012345678" {
		t.Fatalf("the payload line was written: %q", line)
	}
	if d := time.Since(start); d < 199*time.Second/2000 {
		t.Fatalf("200 records at 2000/s in %v", d)
	}
	if n := len(f.Latencies()); n != 200 {
		t.Fatalf("%d latency slots, want 200", n)
	}
}

func TestParseStamp(t *testing.T) {
	for _, v := range []string{"", "123", "123456789012345678", "12345678901234567x9", "9999999999999999999"} {
		if _, ok := ParseStamp([]byte(v)); ok {
			t.Errorf("ParseStamp(%q) ok", v)
		}
	}
	if ns, ok := ParseStamp([]byte("0001234567890123456 rest")); !ok || ns != 1234567890123456 {
		t.Errorf("ParseStamp: %d, %v", ns, ok)
	}
	b := make([]byte, StampLen)
	putStamp(b, 42)
	if string(b) != "0000000000000000042" {
		t.Errorf("putStamp(42): %q", b)
	}
}
