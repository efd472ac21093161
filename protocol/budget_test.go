package protocol

import "testing"

func TestBudget(t *testing.T) {
	var unbounded *Budget
	if !unbounded.TryAcquire(1<<40) || unbounded.AcquireUpTo(5) != 5 || unbounded.Used() != 0 {
		t.Fatal("a nil budget is unbounded and counts nothing")
	}
	b := NewBudget("b", 100)
	if !b.TryAcquire(60) || b.TryAcquire(41) {
		t.Fatal("TryAcquire takes all or nothing")
	}
	if got := b.AcquireUpTo(50); got != 40 {
		t.Fatalf("AcquireUpTo(50) with 40 free = %d", got)
	}
	if got := b.AcquireUpTo(1); got != 0 {
		t.Fatalf("AcquireUpTo on a spent budget = %d", got)
	}
	ch := b.Changed()
	b.Release(100)
	select {
	case <-ch:
	default:
		t.Fatal("Release did not signal Changed")
	}
	b.Force(120)
	if b.Available() != -20 {
		t.Fatalf("Available after Force past capacity = %d", b.Available())
	}
	b.Release(120)
	if b.Used() != 0 {
		t.Fatalf("used %d after releasing everything", b.Used())
	}
}

// A fetch is granted what the fetch, connection and response budgets have
// free; with nothing free it gets one batch if its connection is under its
// bound, else it is starved; settling charges a first batch's overshoot.
func TestReserveFetch(t *testing.T) {
	s := &Server{cfg: Config{FetchBudget: NewBudget("fetch", 1000), ResponseBudget: NewBudget("response", 600)}}
	out := NewBudget("connection", 400)
	g, starved := s.reserveFetch(out, 10000)
	if g != 400 || starved {
		t.Fatalf("grant %d starved %v, want 400 (the connection's room)", g, starved)
	}
	held := s.settleFetch(out, g, 300)
	if s.cfg.FetchBudget.Used() != 300 || out.Used() != 300 {
		t.Fatalf("after settling: fetch %d, connection %d, want 300", s.cfg.FetchBudget.Used(), out.Used())
	}
	// The connection holds bytes and has 100 free.
	if g, starved := s.reserveFetch(out, 10000); g != 100 || starved {
		t.Fatalf("grant %d starved %v, want 100", g, starved)
	}
	s.settleFetch(out, 100, 100)
	if _, starved := s.reserveFetch(out, 10000); !starved {
		t.Fatal("a connection without room that holds bytes is not starved")
	}
	s.releaseFetch(out, held+100)
	if s.cfg.FetchBudget.Used() != 0 || out.Used() != 0 {
		t.Fatalf("after release: fetch %d, connection %d", s.cfg.FetchBudget.Used(), out.Used())
	}
	// The response budget is spent: a connection under its bound gets
	// its first batch, charged when settled.
	s.cfg.ResponseBudget.Force(600)
	g, starved = s.reserveFetch(out, 10000)
	if g != 0 || starved {
		t.Fatalf("grant %d starved %v, want a first batch (0, false)", g, starved)
	}
	held = s.settleFetch(out, g, 700)
	if s.cfg.FetchBudget.Used() != 700 || out.Used() != 700 {
		t.Fatalf("first batch not charged: fetch %d, connection %d", s.cfg.FetchBudget.Used(), out.Used())
	}
	s.releaseFetch(out, held)
}
