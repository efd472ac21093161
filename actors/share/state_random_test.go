package share

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of TestStateRandom (0: from the clock)")

// TestStateRandom runs random commands against the state machine and
// checks its invariants, the durable round trip, and a per-offset model
// of the states after every step. The seed is printed to reproduce.
func TestStateRandom(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-seed to reproduce)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	lim := Limits{LockMs: 400, DeliveryLimit: 3, MaxInFlight: 60}
	members := []string{"a", "b", "c"}
	ackOK := 0
	for run := range 50 {
		// A log of batches, some control, some aborted, some gaps.
		var batches []Batch
		next := int64(0)
		for range 40 {
			next += int64(rng.IntN(3) / 2) // a gap now and then
			n := int64(1 + rng.IntN(5))
			b := Batch{Base: next, Last: next + n - 1}
			switch rng.IntN(10) {
			case 0:
				b.Control, b.Last = true, next
			case 1:
				b.Aborted = true
			}
			batches = append(batches, b)
			next = b.Last + 1
		}
		s := &State{}
		s.Init([16]byte{}, 0)
		now := int64(0)
		limit := int64(0)
		// counts is the model: delivery count per offset ever acquired.
		counts := map[int64]int16{}
		for step := range 300 {
			now += int64(rng.IntN(40))
			limit = min(limit+int64(rng.IntN(6)), next)
			m := members[rng.IntN(len(members))]
			switch rng.IntN(6) {
			case 0, 1:
				from := s.ReadOffset()
				var in []Batch
				for _, b := range batches {
					if b.Last >= from {
						in = append(in, b)
					}
				}
				max := int64(1 + rng.IntN(10))
				ranges, _ := s.Acquire(AcquireInput{Member: m, NowMs: now, MaxRecords: max, RecordLimit: rng.IntN(2) == 0, Limit: limit, Batches: in}, lim)
				for _, r := range ranges {
					for off := r.First; off <= r.Last; off++ {
						counts[off]++
						if counts[off] != r.DeliveryCount || r.DeliveryCount > lim.DeliveryLimit {
							t.Fatalf("seed %d run %d step %d: offset %d delivered with count %d, model %d", seed, run, step, off, r.DeliveryCount, counts[off])
						}
					}
				}
			case 2, 3:
				// Ack a random range after the expiries: it must succeed
				// exactly when all of it is acquired by m.
				s.Expire(now, lim)
				if s.EndOffset == s.StartOffset {
					continue
				}
				first := s.StartOffset + rng.Int64N(s.EndOffset-s.StartOffset)
				if sp := s.spans[rng.IntN(len(s.spans))]; sp.State == Acquired && rng.IntN(4) > 0 {
					// Mostly where acks can land, by the holder.
					first, m = sp.First+rng.Int64N(sp.len()), sp.Member
				}
				last := min(first+rng.Int64N(4), s.EndOffset-1)
				want := true
				for off := first; off <= last; off++ {
					sp := s.spans[s.find(off)]
					if sp.State != Acquired || sp.Member != m {
						want = false
					}
				}
				got := s.Acknowledge(m, now, []AckBatch{{first, last, []AckType{AckType(rng.IntN(5))}}}, lim)
				if got == 0 {
					ackOK++
				}
				if (got == 0) != want {
					t.Fatalf("seed %d run %d step %d: ack %d-%d by %s: code %d, want success %v; %s", seed, run, step, first, last, m, got, want, s)
				}
			case 4:
				s.Expire(now, lim)
			case 5:
				s.Release(m, lim)
			}
			if err := s.checkInvariants(); err != nil {
				t.Fatalf("seed %d run %d step %d: %v: %s", seed, run, step, err, s)
			}
			for _, sp := range s.spans {
				if sp.State == Acquired && sp.Count > lim.DeliveryLimit {
					t.Fatalf("seed %d: acquired past the delivery limit: %s", seed, s)
				}
			}
			r, err := decodeState(s.durable())
			if err != nil {
				t.Fatalf("seed %d run %d step %d: durable round trip: %v", seed, run, step, err)
			}
			if r.StartOffset != s.StartOffset || r.EndOffset != s.EndOffset || string(r.durable()) != string(s.durable()) {
				t.Fatalf("seed %d: round trip %s != %s", seed, r, s)
			}
		}
	}
	// The ranges are small and the members few: many acks must land.
	if ackOK < 500 {
		t.Fatalf("seed %d: only %d acks succeeded: the run tests little", seed, ackOK)
	}
	t.Logf("%d acks succeeded", ackOK)
}

func FuzzDecodeState(f *testing.F) {
	s := &State{}
	s.Init([16]byte{1}, 5)
	s.Acquire(AcquireInput{Member: "a", MaxRecords: 10, Limit: 20, Batches: []Batch{{Base: 5, Last: 9}, {Base: 12, Last: 12, Control: true}}}, Config{}.limits())
	f.Add(s.durable())
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if err != nil {
			return
		}
		if err := st.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}
