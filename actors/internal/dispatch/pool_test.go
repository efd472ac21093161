package dispatch

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestPoolRunsEverything: every scheduled function runs once, from many
// goroutines at once, and no more than maxIdle workers stay parked.
func TestPoolRunsEverything(t *testing.T) {
	p := NewPool(300, 4)
	const n = 20000
	var wg sync.WaitGroup
	wg.Add(n)
	var mu sync.Mutex
	ran := 0
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < n/8; i++ {
				p.Schedule(func() {
					mu.Lock()
					ran++
					mu.Unlock()
					wg.Done()
				})
			}
		}()
	}
	wg.Wait()
	if ran != n {
		t.Fatalf("ran %d of %d", ran, n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Idle() > 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if idle := p.Idle(); idle > 4 {
		t.Fatalf("%d workers parked, want at most 4", idle)
	}
}

// TestPoolDrivesActors: actors on a Pool get every message in order.
func TestPoolDrivesActors(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	p := NewPool(300, 8)
	const actors, msgs = 16, 2000
	var wg sync.WaitGroup
	wg.Add(actors)
	for a := 0; a < actors; a++ {
		next := 0
		pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if v, ok := c.Message().(int); ok {
				if v != next {
					t.Errorf("got %d, want %d", v, next)
				}
				next++
				if next == msgs {
					wg.Done()
				}
			}
		}, actor.WithDispatcher(p)))
		go func() {
			for i := 0; i < msgs; i++ {
				sys.Root.Send(pid, i)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("messages not all delivered")
	}
}

// deepWork needs a few KiB of stack, as the produce path does.
//
//go:noinline
func deepWork(depth int) int {
	var buf [512]byte
	buf[depth%512] = byte(depth)
	if depth == 0 {
		return int(buf[0])
	}
	return deepWork(depth-1) + int(buf[depth%512])
}

func benchDispatcher(b *testing.B, d actor.Dispatcher) {
	var wg sync.WaitGroup
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		d.Schedule(func() { deepWork(12); wg.Done() })
		wg.Wait()
	}
}

// BenchmarkDefaultDispatcher vs BenchmarkPool: a run needing ~6 KiB of
// stack, scheduled one at a time as a partition's produces are.
func BenchmarkDefaultDispatcher(b *testing.B) { benchDispatcher(b, actor.NewDefaultDispatcher(300)) }
func BenchmarkPool(b *testing.B)              { benchDispatcher(b, NewPool(300, 64)) }
