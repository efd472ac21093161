package share

import (
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/regent-broker/regent/actors/internal/scripttest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the scripts' expectations")

// TestStateScripts runs testdata/*.txt against the pure state machine.
//
//	config lock=MS deliveries=N inflight=N
//	init offset=N
//	log batches=0-4,5-9,10c,11-12x limit=N   (c control, x aborted)
//	acquire member=M now=MS max=N [strict] [base=N]
//	ack member=M now=MS acks=FIRST-LAST:T[.T...][,...]
//	release member=M | expire now=MS | trim logstart=N | reset offset=N
//	lag hwm=N | reload (a round trip through the durable form)
func TestStateScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var (
				s       = &State{}
				lim     = Config{}.limits()
				batches []Batch
				limit   int64
			)
			num := func(args map[string]string, k string) int64 {
				v, err := strconv.ParseInt(args[k], 10, 64)
				if err != nil {
					t.Fatalf("%s=%q: %v", k, args[k], err)
				}
				return v
			}
			scripttest.Run(t, f, *rewrite, func(cmd string) []string {
				name, args := scripttest.Args(cmd)
				var out []string
				switch name {
				case "config":
					for k := range args {
						switch k {
						case "lock":
							lim.LockMs = num(args, k)
						case "deliveries":
							lim.DeliveryLimit = int16(num(args, k))
						case "inflight":
							lim.MaxInFlight = num(args, k)
						}
					}
					return nil
				case "init":
					s.Init([16]byte{}, num(args, "offset"))
				case "log":
					batches = scriptBatches(t, args["batches"])
					limit = num(args, "limit")
					return nil
				case "acquire":
					from := s.ReadOffset()
					var in []Batch
					for _, b := range batches {
						if b.Last >= from {
							in = append(in, b)
						}
					}
					var base int64
					if hasKey(args, "base") {
						base = num(args, "base")
					}
					ranges, used := s.Acquire(AcquireInput{Member: args["member"], NowMs: num(args, "now"), MaxRecords: num(args, "max"),
						RecordLimit: hasKey(args, "strict"), Limit: limit, Batches: in, ThrottleBase: base}, lim)
					var rs, us []string
					for _, r := range ranges {
						rs = append(rs, fmt.Sprintf("%d-%d(n=%d)", r.First, r.Last, r.DeliveryCount))
					}
					for i, u := range used {
						if u {
							us = append(us, fmt.Sprintf("%d-%d", in[i].Base, in[i].Last))
						}
					}
					out = append(out, fmt.Sprintf("acquired %s batches %s", strings.Join(rs, " "), strings.Join(us, " ")))
				case "ack":
					code := s.Acknowledge(args["member"], num(args, "now"), parseAcks(t, args["acks"]), lim)
					out = append(out, fmt.Sprintf("code %d", code))
				case "release":
					out = append(out, fmt.Sprintf("changed %v", s.Release(args["member"], lim)))
				case "expire":
					out = append(out, fmt.Sprintf("changed %v", s.Expire(num(args, "now"), lim)))
				case "trim":
					s.TrimTo(num(args, "logstart"))
				case "reset":
					s.Reset(num(args, "offset"))
				case "lag":
					return []string{fmt.Sprintf("lag %d", s.Lag(num(args, "hwm")))}
				case "reload":
					r, err := decodeState(s.durable())
					if err != nil {
						return []string{"error " + err.Error()}
					}
					s = r
				default:
					t.Fatalf("unknown command %q", name)
				}
				if err := s.checkInvariants(); err != nil {
					out = append(out, "INVARIANT: "+err.Error())
				}
				if d, ok := s.NextDeadline(); ok {
					out = append(out, fmt.Sprintf("%s (next deadline %d)", s, d))
				} else {
					out = append(out, s.String())
				}
				return out
			})
		})
	}
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func scriptBatches(t *testing.T, spec string) []Batch {
	var out []Batch
	for _, f := range strings.Split(spec, ",") {
		var b Batch
		switch {
		case strings.HasSuffix(f, "c"):
			b.Control, f = true, strings.TrimSuffix(f, "c")
		case strings.HasSuffix(f, "x"):
			b.Aborted, f = true, strings.TrimSuffix(f, "x")
		}
		lo, hi, ok := strings.Cut(f, "-")
		if !ok {
			hi = lo
		}
		var err1, err2 error
		b.Base, err1 = strconv.ParseInt(lo, 10, 64)
		b.Last, err2 = strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("batch %q", f)
		}
		out = append(out, b)
	}
	return out
}

func parseAcks(t *testing.T, spec string) []AckBatch {
	var out []AckBatch
	for _, f := range strings.Split(spec, ",") {
		rng, types, _ := strings.Cut(f, ":")
		lo, hi, ok := strings.Cut(rng, "-")
		if !ok {
			hi = lo
		}
		var a AckBatch
		var err1, err2 error
		a.First, err1 = strconv.ParseInt(lo, 10, 64)
		a.Last, err2 = strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("ack %q", f)
		}
		for _, ty := range strings.Split(types, ".") {
			v, err := strconv.Atoi(ty)
			if err != nil {
				t.Fatalf("ack type %q", ty)
			}
			a.Types = append(a.Types, AckType(v))
		}
		out = append(out, a)
	}
	return out
}
