package netio

import "golang.org/x/sys/unix"

// socketInQueue is how many received bytes socket fd holds unread
// (SIOCINQ), or 0 when the kernel does not say.
func socketInQueue(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
