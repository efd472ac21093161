package quotas

import (
	"errors"
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"
)

func str(s string) *string { return &s }

func snapOf(m map[Entity]Values) *Snapshot { return newSnapshot(m) }

// TestPrecedence: each of Kafka's eight levels wins over the ones below
// it, and the sensor's tags follow the level.
func TestPrecedence(t *testing.T) {
	u, c := "alice", "app"
	levels := []struct {
		e          Entity
		user, clnt string
	}{
		{Entity{HasUser: true, User: u, HasClient: true, Client: c}, u, c},
		{Entity{HasUser: true, User: u, HasClient: true, ClientDefault: true}, u, c},
		{Entity{HasUser: true, User: u}, u, ""},
		{Entity{HasUser: true, UserDefault: true, HasClient: true, Client: c}, u, c},
		{Entity{HasUser: true, UserDefault: true, HasClient: true, ClientDefault: true}, u, c},
		{Entity{HasUser: true, UserDefault: true}, u, ""},
		{Entity{HasClient: true, Client: c}, "", c},
		{Entity{HasClient: true, ClientDefault: true}, "", c},
	}
	for top := range levels {
		m := map[Entity]Values{}
		for i := top; i < len(levels); i++ {
			m[levels[i].e] = Values{ProducerByteRate: float64(100 + i)}
		}
		// Other users' and clients' entities never apply.
		m[Entity{HasUser: true, User: "bob"}] = Values{ProducerByteRate: 1}
		m[Entity{HasClient: true, Client: "other"}] = Values{ProducerByteRate: 2}
		bound, s, ok := Resolve(snapOf(m), ProducerByteRate, u, c)
		if !ok || bound != float64(100+top) {
			t.Fatalf("level %d: bound %v ok %v", top+1, bound, ok)
		}
		if s != (Sensor{Key: ProducerByteRate, User: levels[top].user, Client: levels[top].clnt}) {
			t.Fatalf("level %d: sensor %+v", top+1, s)
		}
	}
	// Each key resolves on its own.
	m := map[Entity]Values{
		{HasUser: true, User: u}:     {ConsumerByteRate: 5},
		{HasClient: true, Client: c}: {ProducerByteRate: 7},
	}
	if b, _, _ := Resolve(snapOf(m), ProducerByteRate, u, c); b != 7 {
		t.Fatalf("producer %v", b)
	}
	if b, _, _ := Resolve(snapOf(m), ConsumerByteRate, u, c); b != 5 {
		t.Fatalf("consumer %v", b)
	}
	if _, _, ok := Resolve(snapOf(m), RequestPercentage, u, c); ok {
		t.Fatal("unset key resolved")
	}
}

// TestRateMath follows Kafka's Rate: at least samples-1 windows are
// measured, old windows drop out, throttle = (observed-bound)/bound*window.
func TestRateMath(t *testing.T) {
	r := NewRate(11, 1000)
	r.Record(5000, 0)
	if w := r.WindowMs(0); w != 10000 {
		t.Fatalf("fresh window %d", w)
	}
	// 0.5 s elapsed counts as 10.5 s.
	if v := r.Measure(500); v != 5000/10.5 {
		t.Fatalf("rate %v", v)
	}
	// 20000 over 10.5 s against 1000/s: (20000/10.5-1000)/1000*10.5 s.
	r.Record(15000, 500)
	if th := r.ThrottleMs(1000, 500); th != 9500 {
		t.Fatalf("throttle %d", th)
	}
	if th := r.ThrottleMs(20000/10.5, 500); th != 0 {
		t.Fatalf("throttle at the bound %d", th)
	}
	// Past 10 windows the elapsed time counts: 12.5 s since the first.
	r.Record(0, 10500)
	if w := r.WindowMs(10500); w != 10500 {
		t.Fatalf("window %d", w)
	}
	// At 11 s the first window (0..1 s) is obsolete: reset.
	r2 := NewRate(11, 1000)
	r2.Record(1000, 0)
	r2.Record(1000, 5000)
	if v := r2.Measure(11000); v != 100 {
		t.Fatalf("after expiry %v", v)
	}
	// Rounded like Kafka's Math.round.
	r3 := NewRate(2, 1000)
	r3.Record(1501, 0)
	if th := r3.ThrottleMs(1000, 0); th != 501 {
		t.Fatalf("rounded throttle %d", th)
	}
}

// TestEnforcerGreedyClient: a client that always sends, honouring its
// throttles, averages its quota over whole measuring periods.
func TestEnforcerGreedyClient(t *testing.T) {
	quota := float64(1 << 20)
	snap := snapOf(map[Entity]Values{{HasClient: true, Client: "p"}: {ProducerByteRate: quota}})
	e := NewEnforcer(EnforcerConfig{}, func() *Snapshot { return snap })
	start := time.Unix(1000, 0)
	var sent float64
	now, end := start, start.Add(33*time.Second)
	throttled := 0
	for now.Before(end) {
		o := e.Record(ProducerByteRate, "ANONYMOUS", "p", 16384, now, 0)
		sent += 16384
		if o.Throttle > 0 {
			throttled++
			now = now.Add(o.Throttle)
		} else {
			now = now.Add(time.Millisecond)
		}
	}
	rate := sent / now.Sub(start).Seconds()
	if math.Abs(rate-quota)/quota > 0.1 || throttled == 0 {
		t.Fatalf("rate %.0f B/s against %.0f, %d throttles", rate, quota, throttled)
	}
	// Another client has no quota: never throttled.
	if o := e.Record(ProducerByteRate, "ANONYMOUS", "q", 1e9, now, 0); o.Limited || o.Throttle != 0 {
		t.Fatalf("unlimited client %+v", o)
	}
	// maxThrottle bounds it.
	if o := e.Record(ProducerByteRate, "ANONYMOUS", "p", 1e9, now, time.Second); o.Throttle != time.Second {
		t.Fatalf("bounded %v", o.Throttle)
	}
}

// TestRecordNoThrottle: use recorded after the client was answered counts
// against its next record, and gives no throttle (nor throttle time in the
// metrics) itself.
func TestRecordNoThrottle(t *testing.T) {
	snap := snapOf(map[Entity]Values{{HasClient: true, Client: "p"}: {RequestPercentage: 1}})
	e := NewEnforcer(EnforcerConfig{}, func() *Snapshot { return snap })
	now := time.Unix(1000, 0)
	// 20 percent-seconds over the 10 s a fresh sensor measures: 2%.
	e.RecordNoThrottle(RequestPercentage, "ANONYMOUS", "p", 20, now)
	e.RecordNoThrottle(RequestPercentage, "ANONYMOUS", "q", 20, now) // no quota: not kept
	st := e.Stats(now)
	if len(st) != 1 || st[0].Rate != 2 || st[0].ThrottleMs != 0 {
		t.Fatalf("stats %+v", st)
	}
	if o := e.Record(RequestPercentage, "ANONYMOUS", "p", 0, now, e.Window()); o.Throttle != time.Second {
		t.Fatalf("next record: throttle %v, want the 1 s window bound", o.Throttle)
	}
}

// TestTokenBucket: a bucket starts full at its burst, refills at the quota
// per second up to the burst, and may go negative.
func TestTokenBucket(t *testing.T) {
	var b TokenBucket
	const quota, burst = 2.0, 22.0 // 2/s over 11 windows of 1 s
	if got := b.Tokens(quota, burst, 1000); got != burst {
		t.Fatalf("new bucket holds %v, want %v", got, burst)
	}
	if left := b.Take(quota, burst, 30, 1000); left != -8 {
		t.Fatalf("left %v, want -8", left)
	}
	if w := WaitMs(-8, quota); w != 4000 {
		t.Fatalf("wait %d ms, want 4000", w)
	}
	if got := b.Tokens(quota, burst, 3000); got != -4 {
		t.Fatalf("after 2 s: %v, want -4", got)
	}
	b.Give(quota, burst, 10, 3000)
	if got := b.Tokens(quota, burst, 3000); got != 6 {
		t.Fatalf("after a refund: %v, want 6", got)
	}
	if got := b.Tokens(quota, burst, 60000); got != burst {
		t.Fatalf("refilled past the burst: %v", got)
	}
}

// TestMutateStrictAndPermissive: a strict quota serves mutations while the
// bucket is not negative (the last one may take it below zero) and then
// refuses them with the time until it is back at zero; a permissive one
// serves everything and reports that time; a refund gives permits back.
func TestMutateStrictAndPermissive(t *testing.T) {
	snap := snapOf(map[Entity]Values{{HasClient: true, Client: "admin"}: {ControllerMutationRate: 10}})
	e := NewEnforcer(EnforcerConfig{}, func() *Snapshot { return snap })
	now := time.Unix(1000, 0)
	// Burst: 10/s x 11 windows of 1 s = 110 partitions.
	if o := e.Mutate("ANONYMOUS", "admin", 100, now, true); o.Refused || o.Throttle != 0 || !o.Limited {
		t.Fatalf("first 100: %+v", o)
	}
	if o := e.Mutate("ANONYMOUS", "admin", 50, now, true); o.Refused || o.Throttle != 0 {
		t.Fatalf("50 more, taking the bucket to -40: %+v", o)
	}
	if o := e.Mutate("ANONYMOUS", "admin", 1, now, true); !o.Refused || o.Throttle != 4*time.Second {
		t.Fatalf("over the quota: %+v, want refused for 4 s", o)
	}
	if o := e.Mutate("ANONYMOUS", "admin", 1, now.Add(3*time.Second), false); o.Refused || o.Throttle != 1100*time.Millisecond {
		t.Fatalf("permissive, 3 s later: %+v, want served with 1.1 s", o)
	}
	e.Unmutate("ANONYMOUS", "admin", 31, now.Add(3*time.Second))
	if o := e.Mutate("ANONYMOUS", "admin", 5, now.Add(3*time.Second), true); o.Refused {
		t.Fatalf("after a refund of 31: %+v", o)
	}
	if o := e.Mutate("ANONYMOUS", "other", 1e6, now, true); o.Limited || o.Refused {
		t.Fatalf("a client without the quota: %+v", o)
	}
}

// TestConnectionRate: connections from an address over its
// connection_creation_rate (its own, else the default ip's) are held for
// Kafka's throttle time, at most one window, and not counted; each
// address is measured on its own; addresses without a quota never wait.
func TestConnectionRate(t *testing.T) {
	snap := snapOf(map[Entity]Values{
		{HasIP: true, IP: "10.0.0.1"}:  {ConnectionCreationRate: 2},
		{HasIP: true, IPDefault: true}: {ConnectionCreationRate: 100},
	})
	e := NewEnforcer(EnforcerConfig{}, func() *Snapshot { return snap })
	now := time.Unix(1000, 0)
	// 2/s over the 10 s a fresh sensor measures: 20 at once, then held.
	for i := 0; i < 20; i++ {
		if th := e.Connect("10.0.0.1", now); th != 0 {
			t.Fatalf("connection %d held %v", i, th)
		}
	}
	if th := e.Connect("10.0.0.1", now); th != 500*time.Millisecond {
		t.Fatalf("21st held %v, want Kafka's (2.1-2)/2 x 10 s = 500 ms", th)
	}
	// Not counted: the next is held as long, not longer.
	if th := e.Connect("10.0.0.1", now); th != 500*time.Millisecond {
		t.Fatalf("22nd held %v, want 500 ms again", th)
	}
	if th := e.Connect("10.0.0.2", now); th != 0 {
		t.Fatalf("another address (default quota) held %v", th)
	}
	// Once the burst's window has aged out (11 windows), it connects.
	if th := e.Connect("10.0.0.1", now.Add(11*time.Second)); th != 0 {
		t.Fatalf("11 s later: held %v", th)
	}
}

func TestValidateOps(t *testing.T) {
	client := Entity{HasClient: true, Client: "c"}
	ip := Entity{HasIP: true, IP: "10.0.0.1"}
	for _, tc := range []struct {
		ops []Op
		ok  bool
		ip  bool // for an ip entity
	}{
		{ops: []Op{{Key: ConnectionCreationRate, Value: 5}}, ok: true, ip: true},
		{ops: []Op{{Key: ConnectionCreationRate, Value: 2.5}}, ok: false, ip: true},
		{ops: []Op{{Key: ConnectionCreationRate, Value: 1 << 31}}, ok: false, ip: true},
		{ops: []Op{{Key: ProducerByteRate, Value: 1024}}, ok: false, ip: true},
		{[]Op{{Key: ProducerByteRate, Value: 1024}}, true, false},
		{[]Op{{Key: RequestPercentage, Value: 12.5}}, true, false},
		{[]Op{{Key: ProducerByteRate, Remove: true}}, true, false},
		{[]Op{{Key: ProducerByteRate, Value: 10.5}}, false, false},
		{[]Op{{Key: ProducerByteRate, Value: 0}}, false, false},
		{[]Op{{Key: ConsumerByteRate, Value: -1}}, false, false},
		{[]Op{{Key: ConnectionCreationRate, Value: 1}}, false, false},
		{[]Op{{Key: "bogus", Value: 1}}, false, false},
		{[]Op{{Key: ProducerByteRate, Value: 1}, {Key: ProducerByteRate, Remove: true}}, false, false},
		{[]Op{{Key: RequestPercentage, Value: math.NaN()}}, false, false},
	} {
		e := client
		if tc.ip {
			e = ip
		}
		err := ValidateOps(e, tc.ops)
		if (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.ops, err)
		}
		var qe *Error
		if err != nil && (!errors.As(err, &qe) || qe.Code != codeInvalidRequest) {
			t.Errorf("%+v: not INVALID_REQUEST: %v", tc.ops, err)
		}
	}
}

func TestEntityFromParts(t *testing.T) {
	e, err := EntityFromParts([]Part{{Type: TypeClientID, Name: str("c")}, {Type: TypeUser}})
	if err != nil || e != (Entity{HasUser: true, UserDefault: true, HasClient: true, Client: "c"}) {
		t.Fatalf("%+v %v", e, err)
	}
	if ps := e.Parts(); len(ps) != 2 || ps[0].Type != TypeUser || ps[0].Name != nil || *ps[1].Name != "c" {
		t.Fatalf("parts %+v", ps)
	}
	// An ip entity, stored in canonical form; alone only.
	for name, want := range map[string]Entity{
		"1.2.3.4":          {HasIP: true, IP: "1.2.3.4"},
		"::ffff:127.0.0.1": {HasIP: true, IP: "127.0.0.1"},
		"0:0:0:0:0:0:0:1":  {HasIP: true, IP: "::1"},
	} {
		e, err := EntityFromParts([]Part{{Type: TypeIP, Name: str(name)}})
		if err != nil || e != want || e.String() != "ip="+want.IP {
			t.Errorf("ip %s: %+v %v", name, e, err)
		}
	}
	if e, err := EntityFromParts([]Part{{Type: TypeIP}}); err != nil || e != (Entity{HasIP: true, IPDefault: true}) || len(e.Parts()) != 1 || e.Parts()[0].Name != nil {
		t.Errorf("default ip: %+v %v", e, err)
	}
	for _, bad := range [][]Part{
		nil,
		{{Type: TypeUser}, {Type: TypeUser, Name: str("x")}},
		{{Type: TypeIP, Name: str("broker.example")}},
		{{Type: TypeIP, Name: str("1.2.3.4")}, {Type: TypeUser, Name: str("u")}},
		{{Type: TypeIP}, {Type: TypeIP, Name: str("1.2.3.4")}},
		{{Type: "group"}},
		{{Type: ""}},
	} {
		if _, err := EntityFromParts(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestDescribe(t *testing.T) {
	uc := Entity{HasUser: true, User: "u", HasClient: true, Client: "c"}
	u := Entity{HasUser: true, User: "u"}
	ud := Entity{HasUser: true, UserDefault: true}
	c := Entity{HasClient: true, Client: "c"}
	cd := Entity{HasClient: true, ClientDefault: true}
	ip := Entity{HasIP: true, IP: "::1"}
	ipd := Entity{HasIP: true, IPDefault: true}
	snap := snapOf(map[Entity]Values{uc: {ProducerByteRate: 1}, u: {ProducerByteRate: 2}, ud: {ProducerByteRate: 3}, c: {ProducerByteRate: 4}, cd: {ProducerByteRate: 5}, ip: {ConnectionCreationRate: 6}, ipd: {ConnectionCreationRate: 7}})
	for _, tc := range []struct {
		comps  []Component
		strict bool
		want   []Entity
	}{
		{nil, false, []Entity{uc, u, ud, c, cd, ip, ipd}},
		{nil, true, nil},
		{[]Component{{Type: TypeUser, Match: MatchExact, Name: str("u")}}, false, []Entity{uc, u}},
		{[]Component{{Type: TypeUser, Match: MatchExact, Name: str("u")}}, true, []Entity{u}},
		{[]Component{{Type: TypeUser, Match: MatchDefault}}, false, []Entity{ud}},
		{[]Component{{Type: TypeUser, Match: MatchAny}}, true, []Entity{u, ud}},
		{[]Component{{Type: TypeClientID, Match: MatchAny}}, false, []Entity{uc, c, cd}},
		{[]Component{{Type: TypeClientID, Match: MatchDefault}}, true, []Entity{cd}},
		{[]Component{{Type: TypeUser, Match: MatchAny}, {Type: TypeClientID, Match: MatchExact, Name: str("c")}}, true, []Entity{uc}},
		{[]Component{{Type: TypeIP, Match: MatchAny}}, false, []Entity{ip, ipd}},
		{[]Component{{Type: TypeIP, Match: MatchDefault}}, true, []Entity{ipd}},
		{[]Component{{Type: TypeIP, Match: MatchExact, Name: str("0:0:0:0:0:0:0:1")}}, true, []Entity{ip}},
	} {
		got, err := snap.Describe(tc.comps, tc.strict)
		if err != nil {
			t.Fatalf("%+v: %v", tc.comps, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%+v strict %v: got %v", tc.comps, tc.strict, got)
		}
		for _, w := range tc.want {
			if got[w] == nil {
				t.Fatalf("%+v strict %v: %v missing from %v", tc.comps, tc.strict, w, got)
			}
		}
	}
	for _, bad := range [][]Component{
		{{Type: TypeUser, Match: MatchExact}},
		{{Type: TypeUser, Match: MatchDefault, Name: str("x")}},
		{{Type: TypeUser, Match: MatchAny}, {Type: TypeUser, Match: MatchAny}},
		{{Type: TypeIP, Match: MatchAny}, {Type: TypeUser, Match: MatchAny}},
		{{Type: "group", Match: MatchAny}},
		{{Type: TypeUser, Match: 7}},
	} {
		if _, err := snap.Describe(bad, false); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestStoreAlterReopen: alterations apply, persist and reload; a removal
// of the last key drops the entity; an invalid alteration fails alone.
func TestStoreAlterReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := Entity{HasClient: true, Client: "c"}
	d := Entity{HasUser: true, UserDefault: true}
	errs, err := s.Alter([]Alteration{
		{Entity: c, Ops: []Op{{Key: ProducerByteRate, Value: 1024}, {Key: ConsumerByteRate, Value: 2048}}},
		{Entity: d, Ops: []Op{{Key: ProducerByteRate, Value: 1.5}}},
	})
	if err != nil || errs[0] != nil || errs[1] == nil {
		t.Fatalf("alter: %v %v", errs, err)
	}
	if v := s.Snapshot().Get(c); v[ProducerByteRate] != 1024 || v[ConsumerByteRate] != 2048 || s.Snapshot().Len() != 1 {
		t.Fatalf("snapshot %v", s.Snapshot().m)
	}
	if _, err := s.Alter([]Alteration{{Entity: c, Ops: []Op{{Key: ConsumerByteRate, Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if v := s.Snapshot().Get(c); len(v) != 1 || v[ProducerByteRate] != 1024 {
		t.Fatalf("reopened %v", v)
	}
	s2, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Alter([]Alteration{{Entity: c, Ops: []Op{{Key: ProducerByteRate, Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	if s2.Snapshot().Len() != 0 {
		t.Fatalf("entity kept with no values: %v", s2.Snapshot().m)
	}
}

// BenchmarkRecordOtherKey: a produce's record when the only quota is on
// another key (a consumer quota of one client).
func BenchmarkRecordOtherKey(b *testing.B) {
	snap := snapOf(map[Entity]Values{{HasClient: true, Client: "c"}: {ConsumerByteRate: 1e6}})
	e := NewEnforcer(EnforcerConfig{}, func() *Snapshot { return snap })
	now := time.Unix(1000, 0)
	b.ReportAllocs()
	for b.Loop() {
		e.Record(ProducerByteRate, "ANONYMOUS", "app", 1024, now, 0)
	}
}

// TestSensorsBounded: under a default client-id quota, a client cycling
// through 100k client ids keeps at most MaxSensors sensors (the least
// recently recorded go first), a client recording all along keeps its
// own, and idle sensors are dropped.
func TestSensorsBounded(t *testing.T) {
	snap := snapOf(map[Entity]Values{{HasClient: true, ClientDefault: true}: {ProducerByteRate: 1 << 20}})
	e := NewEnforcer(EnforcerConfig{}, func() *Snapshot { return snap })
	limit := e.cfg.MaxSensors
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	now := time.Unix(1000, 0)
	hot := Sensor{Key: ProducerByteRate, Client: "hot"}
	for i := range 100_000 {
		now = now.Add(time.Millisecond)
		e.Record(ProducerByteRate, "ANONYMOUS", "cycling-"+strconv.Itoa(i), 1024, now, 0)
		if i%1000 == 0 {
			e.Record(ProducerByteRate, "ANONYMOUS", "hot", 1<<20, now, 0)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	e.mu.Lock()
	n, hotKept := len(e.mu.sensors), e.mu.sensors[hot] != nil
	e.mu.Unlock()
	if n != limit || !hotKept {
		t.Fatalf("%d sensors (bound %d), hot client's kept: %v", n, limit, hotKept)
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d sensors hold %d KiB (%d B each)", n, grew>>10, grew/int64(n))
	if grew > 16<<20 {
		t.Fatalf("sensors hold %d MiB", grew>>20)
	}
	// The hot client is still measured on its history: over its quota.
	if o := e.Record(ProducerByteRate, "ANONYMOUS", "hot", 1<<20, now, 0); o.Throttle == 0 {
		t.Fatalf("hot client not throttled: %+v", o)
	}
	// An hour idle later, one record sweeps all the others.
	now = now.Add(time.Hour + time.Second)
	e.Record(ProducerByteRate, "ANONYMOUS", "late", 1, now, 0)
	e.mu.Lock()
	n = len(e.mu.sensors)
	e.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d sensors after an idle hour, want 1", n)
	}
}
