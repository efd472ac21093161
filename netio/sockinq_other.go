//go:build !linux

package netio

// socketInQueue is 0 where SIOCINQ is not to be had: a large frame then
// comes through gnet's buffer, and counts against the request budget as
// gnet reads it.
func socketInQueue(int) int { return 0 }
