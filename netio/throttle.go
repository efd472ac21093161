package netio

import "time"

// muted reports whether a client quota mutes cs at now (KIP-219): its
// response was sent, and no further request of it is read until the mute
// set by the protocol handler (protocol.Mute) ends. The connection waits
// as one paused for its limits does: the drain poller wakes it every
// drainPoll, so the mute ends within that of its deadline. On cs's loop.
func (cs *connState) muted(now time.Time) bool {
	return cs.info.Mute.Until() > now.UnixNano()
}
