package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// snapStore is a raft.SnapshotStore whose snapshots are manifests: the
// state index and, for every state file, its path and its size at capture,
// with the file itself kept as a hard link in the snapshot's directory.
// Taking one writes a few KiB whatever the data size; restoring one at
// start re-links and truncates files instead of copying them
// (restoreFromLinks).
//
// Layout under dir, per snapshot id:
//
//	<id>/meta.json      raft's SnapshotMeta (Size is set by Open)
//	<id>/manifest.json  the manifest
//	<id>/files/...      hard links (or, on a follower, received copies)
//
// A snapshot being written lives in <id>.tmp until its sink closes; the
// rename makes it visible to List. The links of a reaped snapshot go with
// its directory.
//
// Stream form (what Open returns, what a follower's sink takes): a magic,
// the manifest's length (4 bytes, big endian), the manifest JSON, then:
//   - RGNSNAP2 (a store that serves fetches: setFetch): padBytes zero bytes
//     and no file data. The manifest names the leader's raft address and
//     its snapshot id; the follower's sink, on Close, links the files it
//     already holds with the same bytes and pulls only the rest over the
//     fetch side channel (snapfetch.go, snapreceive.go). The pad makes
//     raft's install deadline grow with the data (see installDeadline).
//   - RGNSNAP1 (what earlier versions send and still accepted): each
//     file's first size bytes in manifest order.
//
// Not a tar: the manifest already carries names and sizes, and the
// stream's exact length (which raft needs in meta.Size before it sends) is
// then a sum. The snapshots on disk are the same for both.
type snapStore struct {
	dir    string
	retain int
	log    *slog.Logger

	// Set by setFetch before raft starts, read-only afterwards: self is
	// this node's advertised raft address ("": stream RGNSNAP1), stateDir
	// the state directory whose files a received snapshot may reuse, and
	// dialFetch opens a fetch connection to a peer.
	self      string
	stateDir  string
	dialFetch func(addr string, timeout time.Duration) (net.Conn, error)
	server    *fetchServer
	stats     transferCounters

	// mu serializes sink closes (publish and reap) with Open and List, so
	// a snapshot being opened is not reaped under the reader's feet
	// between its listing and its opening.
	mu sync.Mutex
	// readers counts the open readers of each snapshot (mu held): the
	// reader opens files lazily, so a snapshot being sent to a follower is
	// not reaped until its reader closes (the next reap takes it).
	readers map[string]int
}

const (
	snapMagic        = "RGNSNAP1" // the manifest, then every file's bytes
	snapMagicPull    = "RGNSNAP2" // the manifest and a pad: the files are pulled
	snapMetaFile     = "meta.json"
	snapManifestFile = "manifest.json"
	snapFilesDir     = "files"
	snapTmpSuffix    = ".tmp"
	// maxManifestBytes bounds a received manifest (a corrupt length must
	// not make the sink allocate gigabytes).
	maxManifestBytes = 256 << 20
)

// manifest describes one snapshot of the state directory.
type manifest struct {
	// ID is the snapshot's id in the store that opened it: Restore finds
	// the links there. A sink receiving a stream ignores the sender's.
	ID string `json:"id"`
	// StateIndex is the FSM's lastApplied at capture (see fsm.lastApplied).
	StateIndex uint64 `json:"state_index"`
	// Dirs lists every directory of the state (relative, slash form), so
	// empty ones come back too.
	Dirs  []string       `json:"dirs"`
	Files []manifestFile `json:"files"`
	// Source is the raft address of the node that streamed a RGNSNAP2
	// manifest: the follower pulls the files from it. Never stored.
	Source string `json:"source,omitempty"`
}

type manifestFile struct {
	Path string `json:"path"` // relative to the state directory, slash form
	Size int64  `json:"size"` // bytes at capture; the link may have grown since
}

func newSnapStore(dir string, retain int, log *slog.Logger) (*snapStore, error) {
	if retain < 1 {
		return nil, fmt.Errorf("snapshot store: retain must be positive, got %d", retain)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create snapshot dir: %w", err)
	}
	s := &snapStore{dir: dir, retain: retain, log: log, readers: map[string]int{}}
	// Captures a crash left unpersisted: their links would hold the
	// inodes of deleted segments forever.
	if err := os.RemoveAll(filepath.Join(filepath.Dir(dir), stagingDirName)); err != nil {
		return nil, fmt.Errorf("remove snapshot staging: %w", err)
	}
	// Snapshots a crash interrupted are not listed; drop them.
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list snapshot dir: %w", err)
	}
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		if strings.HasSuffix(e.Name(), snapTmpSuffix) {
			if err := os.RemoveAll(path); err != nil {
				return nil, fmt.Errorf("remove unfinished snapshot %s: %w", e.Name(), err)
			}
			continue
		}
		// A tar snapshot of raft's file store (before manifests): the log
		// before it may be gone, so starting without it would apply the
		// log's tail to an empty state. Refuse rather than guess.
		if _, err := os.Stat(filepath.Join(path, "state.bin")); err == nil {
			return nil, fmt.Errorf("snapshot %s is of the tar format this version no longer reads: "+
				"empty this node's data directory to have the leader send it a snapshot", path)
		}
	}
	return s, nil
}

// filesDir is where snapshot id keeps its files.
func (s *snapStore) filesDir(id string) string { return filepath.Join(s.dir, id, snapFilesDir) }

// Create implements raft.SnapshotStore. The sink takes either a captured
// state (stateSnapshot.Persist hands it over with adopt) or the stream a
// leader sends (Write).
func (s *snapStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("unsupported snapshot version %d", version)
	}
	id := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli())
	tmp := filepath.Join(s.dir, id+snapTmpSuffix)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("create snapshot %s: %w", id, err)
	}
	return &snapSink{
		store: s, tmp: tmp, created: time.Now(),
		meta: raft.SnapshotMeta{
			Version: version, ID: id, Index: index, Term: term,
			Configuration: configuration, ConfigurationIndex: configurationIndex,
		},
	}, nil
}

// List implements raft.SnapshotStore: newest first, at most retain.
func (s *snapStore) List() ([]*raft.SnapshotMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	metas, err := s.listLocked()
	if err != nil {
		return nil, err
	}
	if len(metas) > s.retain {
		metas = metas[:s.retain]
	}
	return metas, nil
}

func (s *snapStore) listLocked() ([]*raft.SnapshotMeta, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []*raft.SnapshotMeta
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), snapTmpSuffix) {
			continue
		}
		dir := filepath.Join(s.dir, e.Name())
		m, err := readSnapMeta(dir)
		if err == nil {
			_, err = os.Stat(filepath.Join(dir, snapManifestFile))
		}
		if err != nil {
			s.log.Warn("skipping unreadable snapshot", "snapshot", e.Name(), "err", err)
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *raft.SnapshotMeta) int {
		switch {
		case a.Term != b.Term:
			return cmpDesc(a.Term, b.Term)
		case a.Index != b.Index:
			return cmpDesc(a.Index, b.Index)
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

func readSnapMeta(dir string) (*raft.SnapshotMeta, error) {
	raw, err := os.ReadFile(filepath.Join(dir, snapMetaFile))
	if err != nil {
		return nil, err
	}
	var m raft.SnapshotMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", snapMetaFile, err)
	}
	return &m, nil
}

func readManifest(dir string) (*manifest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, snapManifestFile))
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", snapManifestFile, err)
	}
	return &m, nil
}

// Open implements raft.SnapshotStore. The reader is the stream form, built
// lazily: files are opened as the reader reaches them, so a local restore
// (which reads only the manifest) costs nothing per byte, while sending to
// a follower streams exactly meta.Size bytes.
func (s *snapStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Join(s.dir, id)
	meta, err := readSnapMeta(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	m, err := readManifest(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	m.ID = id
	magic := snapMagic
	if s.self != "" {
		magic, m.Source = snapMagicPull, s.self
	}
	head, err := encodeManifestHead(m, magic)
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	rd := &snapReader{store: s, id: id, head: bytes.NewReader(head), dir: s.filesDir(id)}
	size := int64(len(head))
	if magic == snapMagicPull {
		rd.pad = padBytes(m)
		size += rd.pad
	} else {
		rd.files = m.Files
		for _, f := range m.Files {
			size += f.Size
		}
	}
	meta.Size = size
	s.readers[id]++
	return meta, rd, nil
}

func encodeManifestHead(m *manifest, magic string) ([]byte, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	head := make([]byte, 0, len(magic)+4+len(raw))
	head = append(head, magic...)
	head = binary.BigEndian.AppendUint32(head, uint32(len(raw)))
	return append(head, raw...), nil
}

// readManifestHead reads the manifest at the start of a snapshot stream.
func readManifestHead(r io.Reader) (*manifest, error) {
	var fixed [len(snapMagic) + 4]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return nil, fmt.Errorf("read snapshot head: %w", err)
	}
	if magic := string(fixed[:len(snapMagic)]); magic != snapMagic && magic != snapMagicPull {
		return nil, fmt.Errorf("not a manifest snapshot (magic %q)", fixed[:len(snapMagic)])
	}
	n := binary.BigEndian.Uint32(fixed[len(snapMagic):])
	if n > maxManifestBytes {
		return nil, fmt.Errorf("snapshot manifest of %d bytes is over the %d bound", n, maxManifestBytes)
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, fmt.Errorf("read snapshot manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode snapshot manifest: %w", err)
	}
	for _, f := range m.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) || f.Size < 0 {
			return nil, fmt.Errorf("snapshot entry %q (%d bytes) is not a local file", f.Path, f.Size)
		}
	}
	for _, d := range m.Dirs {
		if !filepath.IsLocal(filepath.FromSlash(d)) {
			return nil, fmt.Errorf("snapshot directory %q escapes the state directory", d)
		}
	}
	return &m, nil
}

// snapReader streams a snapshot: the head, then each file's first size
// bytes, opening files only when reached (RGNSNAP1), or the pad
// (RGNSNAP2).
type snapReader struct {
	store *snapStore
	id    string
	head  *bytes.Reader
	pad   int64 // zero bytes still to send after the head
	dir   string
	files []manifestFile
	next  int      // index of the next file to open
	cur   *os.File // the file being read, nil between files
	left  int64    // bytes of cur still to read
}

func (r *snapReader) Read(p []byte) (int, error) {
	if r.head.Len() > 0 {
		return r.head.Read(p)
	}
	if r.pad > 0 {
		n := int(min(int64(len(p)), r.pad))
		clear(p[:n])
		r.pad -= int64(n)
		return n, nil
	}
	for r.cur == nil || r.left == 0 {
		if r.cur != nil {
			_ = r.cur.Close()
			r.cur = nil
		}
		if r.next == len(r.files) {
			return 0, io.EOF
		}
		f := r.files[r.next]
		r.next++
		if f.Size == 0 {
			continue
		}
		fh, err := os.Open(filepath.Join(r.dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return 0, fmt.Errorf("snapshot file %s: %w", f.Path, err)
		}
		r.cur, r.left = fh, f.Size
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.cur.Read(p)
	r.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if r.left > 0 {
			return n, fmt.Errorf("snapshot file %s is %d bytes short of its manifest size: %w", r.files[r.next-1].Path, r.left, io.ErrUnexpectedEOF)
		}
		err = nil
	}
	return n, err
}

func (r *snapReader) Close() error {
	if r.store != nil {
		r.store.mu.Lock()
		if r.store.readers[r.id]--; r.store.readers[r.id] <= 0 {
			delete(r.store.readers, r.id)
		}
		r.store.mu.Unlock()
		r.store = nil
	}
	if r.cur != nil {
		err := r.cur.Close()
		r.cur = nil
		return err
	}
	return nil
}

// snapSink writes one snapshot into <id>.tmp; Close publishes it.
// Used by one goroutine at a time (raft's snapshot goroutine, or its main
// goroutine receiving an install).
type snapSink struct {
	store   *snapStore
	tmp     string
	meta    raft.SnapshotMeta
	m       *manifest // set by adopt, or by Write once the head is read
	done    bool      // Close or Cancel ran
	created time.Time // the install's budget counts from here

	// Receiving a RGNSNAP2 stream: the pad still to come, and the
	// stream's size (the leader's deadline follows from it).
	pull    bool
	padLeft int64
	size    int64

	// Receiving a stream (Write): the head being assembled, then the file
	// being written and how many of its bytes are still to come.
	head   []byte
	next   int
	cur    *os.File
	left   int64
	failed error
}

// ID implements raft.SnapshotSink.
func (k *snapSink) ID() string { return k.meta.ID }

// adopt takes a captured state: its staging directory of links becomes the
// snapshot's files (a rename: no bytes move).
func (k *snapSink) adopt(st *stateSnapshot) error {
	if k.m != nil || len(k.head) > 0 {
		return errors.New("snapshot sink already holds a snapshot")
	}
	if err := os.Rename(st.dir, filepath.Join(k.tmp, snapFilesDir)); err != nil {
		return fmt.Errorf("move captured links into snapshot %s: %w", k.meta.ID, err)
	}
	st.dir = "" // moved: Release has nothing to remove
	m := &manifest{StateIndex: st.index, Dirs: st.dirs}
	for _, f := range st.files {
		m.Files = append(m.Files, manifestFile{Path: filepath.ToSlash(f.rel), Size: f.size})
	}
	k.m, k.next = m, len(m.Files) // nothing left to receive
	return nil
}

// Write implements raft.SnapshotSink for a snapshot streamed by the leader:
// the files are written into the snapshot's directory as they arrive.
func (k *snapSink) Write(p []byte) (int, error) {
	if k.failed != nil {
		return 0, k.failed
	}
	n, err := k.write(p)
	if err != nil {
		k.failed = err
	}
	return n, err
}

func (k *snapSink) write(p []byte) (int, error) {
	total := len(p)
	k.size += int64(total)
	if k.m == nil {
		// Still reading the head: buffer until the manifest is whole.
		k.head = append(k.head, p...)
		fixed := len(snapMagic) + 4
		if len(k.head) < fixed {
			return total, nil
		}
		need := fixed + int(binary.BigEndian.Uint32(k.head[len(snapMagic):fixed]))
		magic := string(k.head[:len(snapMagic)])
		if (magic != snapMagic && magic != snapMagicPull) || need-fixed > maxManifestBytes {
			return 0, errors.New("received snapshot is not a manifest snapshot")
		}
		if len(k.head) < need {
			return total, nil
		}
		m, err := readManifestHead(bytes.NewReader(k.head[:need]))
		if err != nil {
			return 0, err
		}
		if magic == snapMagicPull {
			if m.Source == "" || m.ID == "" {
				return 0, errors.New("received snapshot names no source to pull its files from")
			}
			k.pull, k.padLeft = true, padBytes(m)
		} else {
			m.Source = ""
		}
		k.m = m
		files := filepath.Join(k.tmp, snapFilesDir)
		for _, d := range append([]string{"."}, m.Dirs...) {
			if err := os.MkdirAll(filepath.Join(files, filepath.FromSlash(d)), 0o755); err != nil {
				return 0, fmt.Errorf("received snapshot: %w", err)
			}
		}
		p = k.head[need:]
		k.head = nil
	}
	if k.pull {
		if int64(len(p)) > k.padLeft {
			return 0, fmt.Errorf("received snapshot has %d bytes past its pad", int64(len(p))-k.padLeft)
		}
		for _, b := range p {
			if b != 0 {
				return 0, errors.New("received snapshot's pad holds data")
			}
		}
		k.padLeft -= int64(len(p))
		return total, nil
	}
	for {
		if k.cur == nil {
			if k.next == len(k.m.Files) {
				if len(p) > 0 {
					return 0, fmt.Errorf("received snapshot has %d bytes past its last file", len(p))
				}
				return total, nil
			}
			f := k.m.Files[k.next]
			k.next++
			path := filepath.Join(k.tmp, snapFilesDir, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return 0, fmt.Errorf("received snapshot: %w", err)
			}
			fh, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return 0, fmt.Errorf("received snapshot: %w", err)
			}
			k.cur, k.left = fh, f.Size
		}
		if k.left > 0 {
			if len(p) == 0 {
				return total, nil
			}
			chunk := p[:min(int64(len(p)), k.left)]
			if _, err := k.cur.Write(chunk); err != nil {
				return 0, fmt.Errorf("received snapshot: %w", err)
			}
			k.left -= int64(len(chunk))
			p = p[len(chunk):]
			if k.left > 0 {
				return total, nil
			}
		}
		// The file is whole: its data is synced when the sink closes.
		if err := k.cur.Close(); err != nil {
			return 0, fmt.Errorf("received snapshot: %w", err)
		}
		k.cur = nil
	}
}

// Close implements raft.SnapshotSink: it makes the snapshot durable (the
// files' data, since raft truncates its log once this returns, and the
// manifest), publishes it and reaps old snapshots. It may be called twice
// (Persist and then raft); the second call does nothing.
func (k *snapSink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	err := k.finish()
	if err != nil {
		k.discard()
		return err
	}
	return nil
}

func (k *snapSink) finish() error {
	if k.failed != nil {
		return k.failed
	}
	if k.pull {
		if k.m == nil || k.padLeft != 0 {
			return fmt.Errorf("snapshot %s is incomplete", k.meta.ID)
		}
		if err := k.receiveFiles(); err != nil {
			return fmt.Errorf("snapshot %s: %w", k.meta.ID, err)
		}
		k.pull = false
		k.next = len(k.m.Files)
	}
	if k.cur != nil || k.m == nil || k.next != len(k.m.Files) {
		return fmt.Errorf("snapshot %s is incomplete", k.meta.ID)
	}
	start := time.Now()
	if err := syncTree(filepath.Join(k.tmp, snapFilesDir)); err != nil {
		return fmt.Errorf("sync snapshot %s: %w", k.meta.ID, err)
	}
	synced := time.Since(start)
	k.m.ID, k.m.Source = k.meta.ID, ""
	raw, err := json.Marshal(k.m)
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	if err := writeFileSynced(filepath.Join(k.tmp, snapManifestFile), raw); err != nil {
		return err
	}
	// Size here is the manifest's; Open reports the stream's.
	k.meta.Size = int64(len(raw))
	rawMeta, err := json.Marshal(&k.meta)
	if err != nil {
		return fmt.Errorf("encode snapshot meta: %w", err)
	}
	if err := writeFileSynced(filepath.Join(k.tmp, snapMetaFile), rawMeta); err != nil {
		return err
	}
	if err := syncDir(k.tmp); err != nil {
		return err
	}
	s := k.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Rename(k.tmp, filepath.Join(s.dir, k.meta.ID)); err != nil {
		return fmt.Errorf("publish snapshot %s: %w", k.meta.ID, err)
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	var bytes int64
	for _, f := range k.m.Files {
		bytes += f.Size
	}
	s.log.Info("snapshot stored", "snapshot", k.meta.ID, "state_index", k.m.StateIndex,
		"files", len(k.m.Files), "data_bytes", bytes, "manifest_bytes", len(raw), "fsync", synced.Round(time.Microsecond))
	return s.reapLocked()
}

// Cancel implements raft.SnapshotSink.
func (k *snapSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	k.discard()
	return nil
}

func (k *snapSink) discard() {
	if k.cur != nil {
		_ = k.cur.Close()
		k.cur = nil
	}
	_ = os.RemoveAll(k.tmp)
}

// reapLocked removes all but the newest retain snapshots, and with them
// their links (s.mu held).
func (s *snapStore) reapLocked() error {
	metas, err := s.listLocked()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range metas[min(len(metas), s.retain):] {
		if s.readers[m.ID] > 0 {
			continue // being read: reaped at a later reap
		}
		if err := os.RemoveAll(filepath.Join(s.dir, m.ID)); err != nil {
			errs = append(errs, fmt.Errorf("reap snapshot %s: %w", m.ID, err))
			continue
		}
		s.log.Info("reaped snapshot", "snapshot", m.ID)
	}
	return errors.Join(errs...)
}

// syncTree fsyncs every regular file and directory under root.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		if d.IsDir() {
			return syncDir(path)
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

func writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

var _ raft.SnapshotStore = (*snapStore)(nil)
