package cluster

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Snapshot-file fetch: the side channel a follower installing a snapshot
// uses to pull, from the leader's snapshot store, the file bytes it does
// not already hold (see snapSink.receiveFiles). It runs on the raft port
// (muxStream): the client sends fetchByte (for a raft group g > 0:
// groupFetchByte then g, raftport.go), then requests, one at a time,
// each answered before the next:
//
//	request:  op u8, id u16+bytes, path u16+bytes, offset u64, length u64
//	answer:   status u8 (0 ok, 1 refused: then u16+bytes of reason, and the
//	          server closes); ok to opSum: 32 bytes, SHA-256 of the range;
//	          ok to opRead: exactly length bytes of the range.
//
// The server serves only ranges of files a snapshot it holds names, by
// snapshot id, within the size the manifest recorded.
const (
	opSum  byte = 1
	opRead byte = 2

	// fetchChunk bounds one read request: a broken connection resumes at
	// the last byte received, and each request has its own I/O deadline.
	fetchChunk = 8 << 20
	// fetchIOWait bounds one request's I/O: a peer making no progress for
	// that long fails the pull (raft retries the install).
	fetchIOWait = 60 * time.Second
	// fetchIdleWait bounds the wait for a connection's next request: the
	// follower may be copying a large local prefix meanwhile, and its
	// install has its own bound (installBudget).
	fetchIdleWait = 10 * time.Minute
	// maxFetchConns bounds the fetch connections a node serves at once.
	maxFetchConns = 8
	// maxFetchReconnects bounds how often one install's pull reconnects
	// after a broken connection, resuming where it stopped.
	maxFetchReconnects = 3
	maxFetchName       = 4096
)

// Raft's InstallSnapshot deadline. NetworkTransport gives the whole RPC
// (the stream and the follower's answer, so the follower's pull inside
// its sink's Close) Timeout × (stream size / TimeoutScale), at least
// Timeout. The stream carries one pad byte per snapPadUnit of file data
// (padBytes), so the deadline grows with the data: 10 s per 10 MiB, a
// floor of 1 MiB/s, well below a disk's and loopback's rate. The follower
// stops its pull earlier (installBudget) and fails the install with an
// error rather than have the leader's deadline cut it.
const (
	raftIOTimeout    = 10 * time.Second
	snapPadUnit      = 1 << 10
	snapTimeoutScale = 10 << 10
)

// installDeadline is NetworkTransport's deadline for a stream of size
// bytes with raftIOTimeout and snapTimeoutScale.
func installDeadline(size int64) time.Duration {
	return max(raftIOTimeout*time.Duration(size/snapTimeoutScale), raftIOTimeout)
}

// installBudget is how long a follower's sink may take, from its
// creation, to receive a snapshot stream of size bytes and pull its
// files: inside the leader's deadline, with a margin for the answer.
func installBudget(size int64) time.Duration {
	return installDeadline(size)*9/10 - time.Second
}

// padBytes is the pad after a stream head whose manifest holds data bytes.
func padBytes(m *manifest) int64 {
	var data int64
	for _, f := range m.Files {
		data += f.Size
	}
	return (data + snapPadUnit - 1) / snapPadUnit
}

// fetchServer answers fetch connections from a snapshot store.
type fetchServer struct {
	store *snapStore
	log   *slog.Logger
	// conns counts the connections being served (any goroutine).
	conns atomic.Int32
	// served counts the file bytes sent to opRead requests.
	served atomic.Int64
}

// serve answers c's requests until it closes or errs; on its own
// goroutine (RaftPort.classify's).
func (s *fetchServer) serve(c net.Conn) {
	defer c.Close()
	if s.conns.Add(1) > maxFetchConns {
		s.conns.Add(-1)
		writeRefusal(c, "too many snapshot fetches at once")
		return
	}
	defer s.conns.Add(-1)
	br := bufio.NewReaderSize(c, 4096)
	for {
		_ = c.SetDeadline(time.Now().Add(fetchIdleWait))
		op, id, path, off, n, err := readFetchRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Warn("bad snapshot fetch request", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		if err := s.answer(c, op, id, path, off, n); err != nil {
			s.log.Warn("snapshot fetch refused or failed", "remote", c.RemoteAddr().String(), "snapshot", id, "path", path, "err", err)
			return
		}
	}
}

// answer serves one request. An error ends the connection (a refusal
// has been written to c when it is one).
func (s *fetchServer) answer(c net.Conn, op byte, id, path string, off, n int64) error {
	_ = c.SetDeadline(time.Now().Add(fetchIOWait))
	f, size, err := s.store.openServed(id, path)
	if err != nil {
		writeRefusal(c, err.Error())
		return err
	}
	defer f.Close()
	if off < 0 || n < 0 || off > size || n > size-off {
		err := fmt.Errorf("range %d+%d is outside %s's %d bytes", off, n, path, size)
		writeRefusal(c, err.Error())
		return err
	}
	switch op {
	case opSum:
		sum, err := hashRange(f, off, n)
		_ = c.SetDeadline(time.Now().Add(fetchIOWait)) // after the hash, however long it took
		if err != nil {
			writeRefusal(c, err.Error())
			return err
		}
		_, err = c.Write(append([]byte{0}, sum[:]...))
		return err
	case opRead:
		_ = c.SetDeadline(time.Now().Add(fetchIOWait))
		if _, err := c.Write([]byte{0}); err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
		// A *os.File under a LimitReader: a plain TCP connection sends it
		// with sendfile.
		w, err := io.CopyN(c, f, n)
		s.served.Add(w)
		if err != nil {
			return fmt.Errorf("send %s [%d, %d): %w", path, off, off+n, err)
		}
		return nil
	}
	err = fmt.Errorf("unknown snapshot fetch op %d", op)
	writeRefusal(c, err.Error())
	return err
}

func writeRefusal(c net.Conn, msg string) {
	if len(msg) > maxFetchName {
		msg = msg[:maxFetchName]
	}
	b := []byte{1}
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	_, _ = c.Write(append(b, msg...))
}

func appendFetchRequest(b []byte, op byte, id, path string, off, n int64) []byte {
	b = append(b, op)
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	b = append(b, id...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(path)))
	b = append(b, path...)
	b = binary.BigEndian.AppendUint64(b, uint64(off))
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

func readFetchRequest(r *bufio.Reader) (op byte, id, path string, off, n int64, err error) {
	op, err = r.ReadByte()
	if err != nil {
		return 0, "", "", 0, 0, err
	}
	str := func() (string, error) {
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return "", err
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		_, err := io.ReadFull(r, b)
		return string(b), err
	}
	if id, err = str(); err != nil {
		return 0, "", "", 0, 0, fmt.Errorf("read snapshot id: %w", err)
	}
	if path, err = str(); err != nil {
		return 0, "", "", 0, 0, fmt.Errorf("read path: %w", err)
	}
	var nums [16]byte
	if _, err = io.ReadFull(r, nums[:]); err != nil {
		return 0, "", "", 0, 0, fmt.Errorf("read range: %w", err)
	}
	return op, id, path, int64(binary.BigEndian.Uint64(nums[:8])), int64(binary.BigEndian.Uint64(nums[8:])), nil
}

// openServed opens the file path of snapshot id for serving and returns
// its size in the manifest. Only a published snapshot's listed files are
// served: an id or path that names anything else is refused. Under s.mu,
// so a reap does not remove the snapshot half way through the lookup; an
// open file stays readable if the snapshot is reaped afterwards.
func (s *snapStore) openServed(id, path string) (*os.File, int64, error) {
	if id == "" || strings.ContainsAny(id, `/\`) || !filepath.IsLocal(id) || strings.HasSuffix(id, snapTmpSuffix) {
		return nil, 0, fmt.Errorf("snapshot id %q is not a snapshot's", id)
	}
	rel := filepath.FromSlash(path)
	if path == "" || strings.Contains(path, `\`) || !filepath.IsLocal(rel) {
		return nil, 0, fmt.Errorf("snapshot path %q escapes the snapshot", path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := readManifest(filepath.Join(s.dir, id))
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot %s is not held here", id)
	}
	for _, f := range m.Files {
		if f.Path != path {
			continue
		}
		fh, err := os.Open(filepath.Join(s.filesDir(id), rel))
		if err != nil {
			return nil, 0, fmt.Errorf("snapshot %s file %s: %w", id, path, err)
		}
		return fh, f.Size, nil
	}
	return nil, 0, fmt.Errorf("snapshot %s holds no file %q", id, path)
}

// hashRange is the SHA-256 of f's bytes [off, off+n); f being shorter is
// an error.
func hashRange(f *os.File, off, n int64) ([32]byte, error) {
	h := sha256.New()
	got, err := io.CopyBuffer(h, io.NewSectionReader(f, off, n), make([]byte, 1<<20))
	if err == nil && got != n {
		err = fmt.Errorf("%s holds %d of the %d bytes hashed", f.Name(), got, n)
	}
	var sum [32]byte
	if err != nil {
		return sum, fmt.Errorf("hash %s: %w", f.Name(), err)
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// errFetchRefused marks the server's refusals: final, not retried.
var errFetchRefused = errors.New("snapshot fetch refused")

// fetchClient pulls from one leader snapshot; used by one goroutine (the
// sink's Close). A broken connection is dialed again and the pull resumes
// at the last byte received, up to maxFetchReconnects times; nothing goes
// past deadline.
type fetchClient struct {
	addr     string
	id       string // the leader's snapshot id
	dial     func(addr string, timeout time.Duration) (net.Conn, error)
	deadline time.Time
	budget   time.Duration

	c          net.Conn
	br         *bufio.Reader
	reconnects int
	pulled     int64 // file bytes received
	buf        []byte
}

func (fc *fetchClient) close() {
	if fc.c != nil {
		_ = fc.c.Close()
		fc.c = nil
	}
}

// ioDeadline is the deadline of one request.
func (fc *fetchClient) ioDeadline() (time.Time, error) {
	now := time.Now()
	if !now.Before(fc.deadline) {
		return time.Time{}, fmt.Errorf("snapshot %s: pulling its files from %s took over the %s the install may take (raft's deadline for it): giving up, the leader will send it again",
			fc.id, fc.addr, fc.budget.Round(time.Second))
	}
	if dl := now.Add(fetchIOWait); dl.Before(fc.deadline) {
		return dl, nil
	}
	return fc.deadline, nil
}

// conn is the current connection, dialed if there is none.
func (fc *fetchClient) conn() (net.Conn, error) {
	if fc.c != nil {
		return fc.c, nil
	}
	dl, err := fc.ioDeadline()
	if err != nil {
		return nil, err
	}
	c, err := fc.dial(fc.addr, time.Until(dl))
	if err != nil {
		return nil, fmt.Errorf("snapshot fetch from %s: %w", fc.addr, err)
	}
	fc.c, fc.br = c, bufio.NewReaderSize(c, 256<<10)
	return c, nil
}

// request sends one request and reads the answer's status.
func (fc *fetchClient) request(op byte, path string, off, n int64) error {
	if err := fc.send(op, path, off, n); err != nil {
		return err
	}
	return fc.status(fetchIOWait)
}

func (fc *fetchClient) send(op byte, path string, off, n int64) error {
	c, err := fc.conn()
	if err != nil {
		return err
	}
	dl, err := fc.ioDeadline()
	if err != nil {
		return err
	}
	_ = c.SetDeadline(dl)
	if _, err := c.Write(appendFetchRequest(nil, op, fc.id, path, off, n)); err != nil {
		return fmt.Errorf("snapshot fetch request to %s: %w", fc.addr, err)
	}
	return nil
}

// status reads the status of the answer to the request sent last,
// waiting up to wait (and not past the install's deadline).
func (fc *fetchClient) status(wait time.Duration) error {
	dl, err := fc.ioDeadline()
	if err != nil {
		return err
	}
	if w := time.Now().Add(wait); w.Before(fc.deadline) {
		dl = w
	} else {
		dl = fc.deadline
	}
	_ = fc.c.SetDeadline(dl)
	status, err := fc.br.ReadByte()
	if err != nil {
		return fmt.Errorf("snapshot fetch answer from %s: %w", fc.addr, err)
	}
	if status == 0 {
		return nil
	}
	var l [2]byte
	msg := make([]byte, 0)
	if _, err := io.ReadFull(fc.br, l[:]); err == nil {
		msg = make([]byte, binary.BigEndian.Uint16(l[:]))
		_, _ = io.ReadFull(fc.br, msg)
	}
	fc.close()
	return fmt.Errorf("%w by %s: %s", errFetchRefused, fc.addr, msg)
}

// retry says whether err (on a request) is worth a new connection, and
// drops the broken one.
func (fc *fetchClient) retry(err error) bool {
	fc.close()
	if errors.Is(err, errFetchRefused) || fc.reconnects >= maxFetchReconnects || !time.Now().Before(fc.deadline) {
		return false
	}
	fc.reconnects++
	return true
}

// sum is the SHA-256 of the leader's file path, bytes [0, n). meanwhile
// (if not nil) runs once, after the request is sent: the follower hashes
// its own file while the leader hashes its.
func (fc *fetchClient) sum(path string, n int64, meanwhile func()) ([32]byte, error) {
	var sum [32]byte
	for {
		err := fc.send(opSum, path, 0, n)
		if meanwhile != nil {
			meanwhile()
			meanwhile = nil
		}
		if err == nil {
			// The leader reads n bytes to answer: at the install's
			// 1 MiB/s floor at worst.
			err = fc.status(fetchIOWait + time.Duration(n/(1<<20))*time.Second)
		}
		if err == nil {
			_, err = io.ReadFull(fc.br, sum[:])
		}
		if err == nil {
			return sum, nil
		}
		if !fc.retry(err) {
			return sum, fmt.Errorf("checksum of %s: %w", path, err)
		}
	}
}

// pull writes the leader's file path, bytes [off, end), into dst at the
// same offsets.
func (fc *fetchClient) pull(path string, off, end int64, dst *os.File) error {
	for off < end {
		n := min(end-off, fetchChunk)
		err := fc.request(opRead, path, off, n)
		if err == nil {
			if fc.buf == nil {
				fc.buf = make([]byte, 1<<20)
			}
			var w int64
			w, err = io.CopyBuffer(io.NewOffsetWriter(dst, off), io.LimitReader(fc.br, n), fc.buf)
			if err == nil && w < n {
				err = io.ErrUnexpectedEOF
			}
			off += w
			fc.pulled += w
			if err != nil {
				err = fmt.Errorf("receive %s: %w", path, err)
			}
		}
		if err != nil && !fc.retry(err) {
			return fmt.Errorf("pull %s from %s at byte %d: %w", path, fc.addr, off, err)
		}
	}
	return nil
}
