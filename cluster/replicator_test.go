package cluster

import "testing"

type counter struct{ n int }

func (c *counter) Apply(cmd Command) any { c.n += cmd.(int); return c.n }

func TestLocalAppliesInOrder(t *testing.T) {
	l := NewLocal()
	c := &counter{}
	l.Register("k", c)
	var got []int
	for i := 1; i <= 3; i++ {
		l.Propose("k", i, func(res any, err error) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, res.(int))
		})
	}
	if len(got) != 3 || got[2] != 6 {
		t.Fatalf("results %v", got)
	}
	l.Unregister("k")
	l.Propose("k", 1, func(_ any, err error) {
		if err == nil {
			t.Fatal("propose to an unregistered key succeeded")
		}
	})
}
