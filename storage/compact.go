package storage

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/regent-broker/regent/storage/atomicfile"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// Log compaction, modelled on Kafka's LogCleaner:
//
//   - Deciding and cleaning are apart, so that a replicated partition's
//     leader decides and every node cleans alike (PlanCompaction,
//     CompactRange; Compact does both on the log's own clock). The plan is
//     in offsets, never segment indexes, because segment boundaries may
//     differ between nodes: map keys over [DirtyStart, End), clean every
//     batch wholly below End, with the plan's clock.
//   - Deciding (the leader): only closed segments whose max timestamp is
//     older than MinCompactionLagMs are cleanable, and the active segment
//     never is; End is the base of the first segment that is not. The
//     "dirty" part starts at the cleaner checkpoint (firstDirty).
//   - Cleaning (every node): one pass maps key -> latest offset over the
//     batches in [DirtyStart, End) (bounded by maxMapKeys: the pass then
//     ends at the first batch it could not map, an offset that depends on
//     the records only), then rewrites every segment holding batches below
//     End, keeping a record iff no later offset for its key was mapped.
//     Batches at or above End are never touched, so a segment straddling
//     End (another node's layout) keeps its upper part as it is; a node
//     whose active segment holds records below End rolls it first.
//     Records, batch bytes and offsets below End then come out the same
//     on every node that held the same records, whatever its layout.
//   - Tombstones follow KIP-534: the first pass that keeps a tombstone stamps
//     its batch with a delete horizon (now + DeleteRetentionMs, stored in
//     FirstTimestamp with attribute bit 6, record deltas rebased so record
//     timestamps are unchanged); a later pass past the horizon drops it.
//   - Offsets never change: rewritten batches keep base offset and
//     lastOffsetDelta. Transactional data and markers are cleaned as
//     compact_txn.go says, given the partition's transactions
//     (Transactions); without them (Compact) they are copied verbatim and
//     do not feed the map (aborted data must never supersede committed
//     data; keeping extra records is safe, losing them is not). A batch
//     left empty is dropped unless it may be its producer's last (data)
//     batch, which Kafka keeps so idempotent producer state survives.
//   - Each rewritten segment is written as *.cleaned, committed by renaming
//     the log to *.log.swap, then swapped in by rename; Open finishes or
//     discards interrupted swaps. Empty results delete the segment (except
//     the first, which anchors the log start).
//   - Not done: merging small cleaned segments into one (Kafka groups them).

// maxMapKeys bounds the offset map of one pass (~40 MiB). Keys are stored
// as 128-bit hashes, like Kafka's MD5-based map; a collision could drop a
// record wrongly, at odds of about n²/2¹²⁹ (and nodes seed their maps
// independently, so such a collision would also be a difference between
// nodes, at the same odds). A variable for tests.
var maxMapKeys = 1 << 20

type keyHash [2]uint64

type offsetMap struct {
	s1, s2 maphash.Seed
	m      map[keyHash]int64
}

func newOffsetMap() *offsetMap {
	return &offsetMap{s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), m: map[keyHash]int64{}}
}

func (o *offsetMap) hash(key []byte) keyHash {
	return keyHash{maphash.Bytes(o.s1, key), maphash.Bytes(o.s2, key)}
}

// cleanable returns the index one past the last cleanable segment and the
// index of the first dirty one (caller holds mu or is the owner). A
// segment holding offsets at or above stable (the last stable offset) is
// not cleanable: its transactions may still abort.
func (l *Log) cleanable(opts Options, nowMs, stable int64) (end, firstDirty int) {
	segs := l.mu.segs
	end = len(segs) - 1
	for k := 0; k < end; k++ {
		if segs[k].maxTS > nowMs-opts.MinCompactionLagMs || segs[k+1].base > stable {
			end = k
			break
		}
	}
	firstDirty = end
	for k := 0; k < end; k++ {
		if segs[k+1].base > l.mu.firstDirty {
			firstDirty = k
			break
		}
	}
	return end, firstDirty
}

// DirtyRatio is the fraction of cleanable bytes not yet compacted (0 when
// nothing is cleanable). Safe to call from any goroutine.
func (l *Log) DirtyRatio() float64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	end, d := l.cleanable(l.mu.opts, l.mu.opts.Now().UnixMilli(), l.mu.next)
	var dirty, total int64
	for k, s := range l.mu.segs[:end] {
		total += s.size
		if k >= d {
			dirty += s.size
		}
	}
	if total == 0 {
		return 0
	}
	return float64(dirty) / float64(total)
}

// NeedsCompaction reports whether a scheduler should call Compact: the log
// is compacted and its dirty ratio exceeds MinCleanableDirtyRatio, or its
// oldest dirty cleanable data is older than MaxCompactionLagMs, or a kept
// tombstone's or marker's delete horizon has passed (always true once
// after Open, as horizons are learnt by a pass). Safe to call from any
// goroutine.
func (l *Log) NeedsCompaction() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	opts := l.mu.opts
	if !opts.Compact || l.mu.closed {
		return false
	}
	return l.due(opts, opts.Now().UnixMilli(), l.mu.next)
}

// due is NeedsCompaction's policy at nowMs, with nothing cleaned at or
// above stable (caller holds mu or is the owner).
func (l *Log) due(opts Options, nowMs, stable int64) bool {
	end, d := l.cleanable(opts, nowMs, stable)
	if end > 0 && l.mu.nextHorizon <= nowMs {
		return true
	}
	if d >= end {
		return false
	}
	if first := l.mu.segs[d].firstTS; opts.MaxCompactionLagMs > 0 && first >= 0 && nowMs-first > opts.MaxCompactionLagMs {
		return true
	}
	var dirty, total int64
	for k, s := range l.mu.segs[:end] {
		total += s.size
		if k >= d {
			dirty += s.size
		}
	}
	// Strictly greater, as Kafka's cleaner manager compares: a ratio of 0
	// means "any dirty byte", never "always".
	return dirty > 0 && float64(dirty)/float64(total) > opts.MinCleanableDirtyRatio
}

// CompactionPlan is one compaction pass, decided on one log and applicable
// to any log holding the same records (a replicated partition's leader
// decides it and every node applies it with CompactRange). It names
// offsets and a clock only, nothing of the deciding log's segments.
type CompactionPlan struct {
	// DirtyStart: keys are mapped from the records at offsets in
	// [DirtyStart, End). Records below it were cleaned by earlier passes
	// (mapping some of them again is harmless, only slower).
	DirtyStart int64
	// End: only batches wholly below End are cleaned; nothing at or above
	// it is read or changed.
	End int64
	// NowMs is the pass's clock: a kept tombstone whose delete horizon is
	// at or before it goes, a tombstone kept for the first time gets the
	// horizon NowMs + DeleteRetentionMs.
	NowMs             int64
	DeleteRetentionMs int64
}

// PlanCompaction returns the pass that is due at nowMs (NeedsCompaction's
// policy, on nowMs rather than the log's clock) over the segments wholly
// below lastStable (the partition's last stable offset: Kafka's cleaner
// never passes the first unstable offset), and false when none is or the
// log is not compacted. It changes nothing. Safe to call from any
// goroutine; the plan is meant for the owner's CompactRange, here or, sent
// through a replicated log, on every node.
func (l *Log) PlanCompaction(nowMs, lastStable int64) (CompactionPlan, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	opts := l.mu.opts
	if !opts.Compact || l.mu.closed || !l.due(opts, nowMs, lastStable) {
		return CompactionPlan{}, false
	}
	return l.plan(opts, nowMs, lastStable)
}

// plan is the pass over everything cleanable at nowMs, without the policy
// (caller holds mu or is the owner). With nothing dirty it is still worth
// a pass when a tombstone's or marker's delete horizon has passed (as
// Kafka's cleaner manager does).
func (l *Log) plan(opts Options, nowMs, stable int64) (CompactionPlan, bool) {
	end, d := l.cleanable(opts, nowMs, stable)
	if end == 0 || (d >= end && l.mu.nextHorizon > nowMs) {
		return CompactionPlan{}, false
	}
	endOff := l.mu.segs[end].base
	return CompactionPlan{
		DirtyStart:        min(l.mu.firstDirty, endOff),
		End:               endOff,
		NowMs:             nowMs,
		DeleteRetentionMs: opts.DeleteRetentionMs,
	}, true
}

// cleaner holds one pass's state.
type cleaner struct {
	m         *offsetMap
	producers map[int64]producerBatch // last batches in [start, end)
	txn       *txnCleaner             // nil: transactions unknown
	// from and end bound the pass in offsets (CompactionPlan); mapping
	// lowers end to the first batch it could not map. start is the log
	// start offset.
	start, from, end int64
	mapped           bool // a batch has been mapped
	nowMs            int64
	horizonMs        int64
	// minHorizon is the earliest delete horizon among kept tombstone
	// batches and COMMIT markers a later pass may drop.
	minHorizon int64
}

// Compact runs one compaction pass on the log's own clock (owner): what
// PlanCompaction would plan, without its policy, applied at once, knowing
// nothing of transactions (their batches are kept verbatim; logs without
// transactional writers, such as the broker's own record logs). A no-op
// unless Options.Compact. A replicated partition does not call it: its
// leader proposes PlanCompaction's plan and every node applies it.
func (l *Log) Compact() error {
	if l.isClosed() {
		return ErrClosed
	}
	opts := l.opts()
	if !opts.Compact {
		return nil
	}
	p, ok := l.plan(opts, opts.Now().UnixMilli(), l.NextOffset())
	if !ok {
		return nil
	}
	_, err := l.CompactRange(p, nil)
	return err
}

// CompactRange applies a compaction pass (owner). It cleans exactly the
// batches wholly below p.End with a key map of the records in
// [p.DirtyStart, p.End) (cut short at a batch boundary when the map is
// full) and p's clock, and nothing else; the log's options other than the
// index interval are not read, so a log whose topic config changed at
// another moment than the proposer's still cleans alike. txns is the
// partition's transactions as of this point in its command sequence (nil:
// unknown, transactional batches and markers are kept verbatim); its
// LastStable caps the pass's end (a plan from PlanCompaction never passes
// it).
//
// Deterministic: logs holding the same records below p.End end with the
// same records, batch bytes and offsets there, whatever their segment
// boundaries (only which files hold them may differ). A log whose active
// segment holds records below p.End rolls it first.
//
// It blocks the owner for the whole pass (reading and rewriting the
// segments below End). On error some segments may be cleaned and others
// not: the log stays readable and correct (it keeps more records, never
// fewer), firstDirty does not move, and the result is empty (nothing to
// forget: keeping an aborted transaction listed is always safe).
func (l *Log) CompactRange(p CompactionPlan, txns *Transactions) (CompactResult, error) {
	if l.isClosed() {
		return CompactResult{}, ErrClosed
	}
	c, err := l.compactRange(p, txns)
	if err != nil || c == nil || c.txn == nil {
		return CompactResult{}, err
	}
	return CompactResult{ForgetAborted: c.txn.forget}, nil
}

// compactRange is CompactRange's pass; it returns the pass's cleaner (nil
// when there was nothing to clean).
func (l *Log) compactRange(p CompactionPlan, txns *Transactions) (*cleaner, error) {
	// Owner-only reads of fields only the owner writes need no lock.
	if p.End < 0 || p.End > l.mu.next || p.DirtyStart > p.End {
		return nil, fmt.Errorf("compaction: range [%d, %d) outside the log (end %d)", p.DirtyStart, p.End, l.mu.next)
	}
	if a := l.active(); a.base < p.End && a.size > 0 {
		if err := l.roll(); err != nil {
			return nil, fmt.Errorf("compaction: %w", err)
		}
	}
	segs := slices.Clone(l.mu.segs)
	// n: the segments holding offsets below End, never the active one.
	n := 0
	for n < len(segs)-1 && segs[n].base < p.End {
		n++
	}
	if n == 0 {
		return nil, nil
	}
	c := &cleaner{m: newOffsetMap(), producers: map[int64]producerBatch{}, txn: newTxnCleaner(txns),
		start: l.StartOffset(), from: p.DirtyStart, end: p.End,
		nowMs: p.NowMs, horizonMs: p.NowMs + p.DeleteRetentionMs, minHorizon: math.MaxInt64}
	if txns != nil {
		c.end = min(c.end, txns.LastStable)
	}
	if err := c.scanProducers(segs[:n], c.start); err != nil {
		return nil, fmt.Errorf("compaction: producers' last batches: %w", err)
	}
	for k := 0; k < n; k++ {
		if segs[k+1].base <= c.from {
			continue // wholly below the dirty part
		}
		done, err := c.mapSegment(segs[k])
		if err != nil {
			return nil, fmt.Errorf("compaction: mapping segment %d: %w", segs[k].base, err)
		}
		if done {
			break
		}
	}
	opts := l.opts()
	for k := 0; k < n && segs[k].base < c.end; k++ {
		if err := l.cleanSegment(segs[k], k == 0, c, opts); err != nil {
			return nil, fmt.Errorf("compaction: cleaning segment %d: %w", segs[k].base, err)
		}
	}
	l.mu.Lock()
	l.mu.firstDirty = min(max(l.mu.firstDirty, c.end), l.mu.next)
	l.mu.nextHorizon = c.minHorizon
	dirty := l.mu.firstDirty
	l.mu.Unlock()
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	if err := writeOffsetCheckpoint(l.dir, cleanerFile, dirty); err != nil {
		return nil, err
	}
	return c, nil
}

// mapSegment records the latest offset of every key in [c.from, c.end),
// and each producer's last batch there. It reports done when the pass's
// range ends in s: at c.end, or at a batch the full map could not take
// (c.end is then lowered to that batch's base). A batch straddling c.end
// (a plan cut inside a batch, which a leader's segment-base plan never is)
// ends the range at its base too. Which batches are mapped depends on
// offsets and records only, never on where segments begin.
func (c *cleaner) mapSegment(s *segment) (done bool, err error) {
	br := newBatchReader(s.log, s.size)
	for {
		b, _, err := br.next()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		h, err := recordbatch.ParseHeader(b)
		if err != nil {
			return false, err
		}
		if h.BaseOffset >= c.end {
			return true, nil
		}
		if h.LastOffset() >= c.end || (c.mapped && len(c.m.m) >= maxMapKeys) {
			c.end = h.BaseOffset
			return true, nil
		}
		if h.LastOffset() < c.from {
			continue
		}
		c.mapped = true
		if h.IsControl() {
			continue
		}
		if h.IsTransactional() && (c.txn == nil || h.LastOffset() < c.start || c.txn.isAborted(h.ProducerID, h.BaseOffset)) {
			continue // aborted records never supersede others
		}
		err = recordbatch.Each(b, compactMapIter, func(_ int32, r *recordbatch.Record) error {
			if off := h.BaseOffset + int64(r.OffsetDelta); off >= c.from && !r.KeyNull {
				c.m.m[c.m.hash(r.Key)] = off
			}
			return nil
		})
		if errors.Is(err, recordbatch.ErrTooLarge) {
			// filter keeps it verbatim; keys mapped so far are kept too.
			continue
		}
		if err != nil {
			return false, err
		}
	}
}

// The cleaner reads batches through the same bounded streaming iteration
// as Produce. Rewriting a batch holds its kept records, so the bound is the
// default topic's (32 MiB decompressed): a batch past it (one a topic with
// a larger max.message.bytes accepted, or a bomb from before Produce bounded
// them) is kept verbatim, which is safe, instead of costing the cleaner its
// inflated size. Mapping keeps keys only.
var (
	compactIter    = recordbatch.IterOptions{MaxBytes: recordbatch.DecompressLimit(logconfig.DefaultMaxMessageBytes)}
	compactMapIter = recordbatch.IterOptions{MaxBytes: compactIter.MaxBytes, SkipValues: true}
)

// filter decides a batch's fate: verbatim (nil, true), dropped (nil,
// false), or rewritten (bytes, true). Batches reach it in offset order.
func (c *cleaner) filter(b []byte, h recordbatch.Header) ([]byte, bool, error) {
	if h.LastOffset() >= c.end {
		return nil, true, nil
	}
	if h.IsControl() || h.IsTransactional() {
		if c.txn == nil || h.LastOffset() < c.start {
			return nil, true, nil
		}
		if h.IsControl() {
			return c.filterMarker(b, h)
		}
	}
	aborted := h.IsTransactional() && c.txn.isAborted(h.ProducerID, h.BaseOffset)
	out, keep, err := c.filterRecords(b, h, aborted)
	if err == nil && keep && h.IsTransactional() {
		c.txn.live[h.ProducerID] = true // its marker stays
	}
	return out, keep, err
}

// filterRecords is filter for a data batch: records superseded by a later
// one of their key, tombstones past their horizon and, when aborted, all
// of them go.
func (c *cleaner) filterRecords(b []byte, h recordbatch.Header, aborted bool) ([]byte, bool, error) {
	horizonPassed := h.HasDeleteHorizon() && c.nowMs >= h.FirstTimestamp
	keeps := func(r *recordbatch.Record) bool {
		if aborted {
			return false
		}
		off := h.BaseOffset + int64(r.OffsetDelta)
		if !r.KeyNull {
			if latest, ok := c.m.m[c.m.hash(r.Key)]; ok && latest > off {
				return false
			}
		}
		return !r.ValueNull || !horizonPassed
	}
	// First pass without values: most batches stay as they are, and then
	// no value is ever held.
	tombstones := false
	total, kept := 0, 0
	err := recordbatch.Each(b, compactMapIter, func(_ int32, r *recordbatch.Record) error {
		total++
		if keeps(r) {
			kept++
			tombstones = tombstones || r.ValueNull
		}
		return nil
	})
	if errors.Is(err, recordbatch.ErrTooLarge) {
		return nil, true, nil // too big to rewrite: kept as it is, safely
	}
	if err != nil {
		return nil, false, err
	}
	needHorizon := tombstones && !h.HasDeleteHorizon()
	if tombstones && !needHorizon {
		c.minHorizon = min(c.minHorizon, h.FirstTimestamp)
	}
	if kept == 0 && !c.mayBeLast(h) {
		// Emptied now or by an earlier pass that kept it as its producer's
		// last batch, which it no longer is.
		return nil, false, nil
	}
	if kept == total && !needHorizon {
		return nil, true, nil
	}
	// Possibly this producer's last batch when kept is 0: kept, emptied.
	recs, err := c.keptRecords(b, kept, keeps)
	if err != nil {
		return nil, false, err
	}
	var out []byte
	if needHorizon {
		out, err = c.stampHorizon(h, recs)
	} else {
		out, err = recordbatch.Build(h, recs)
	}
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// keptRecords decodes the n records of b that keeps accepts, copying their
// bytes into one arena (Each reuses its buffer from record to record;
// slices taken before the arena grows keep the old array, intact).
func (c *cleaner) keptRecords(b []byte, n int, keeps func(*recordbatch.Record) bool) ([]recordbatch.Record, error) {
	if n == 0 {
		return nil, nil
	}
	recs := make([]recordbatch.Record, 0, n)
	var arena []byte
	keep := func(p []byte) []byte {
		if p == nil {
			return nil
		}
		at := len(arena)
		arena = append(arena, p...)
		return arena[at:len(arena):len(arena)]
	}
	err := recordbatch.Each(b, compactIter, func(_ int32, r *recordbatch.Record) error {
		if !keeps(r) {
			return nil
		}
		k := *r
		k.Key, k.Value = keep(r.Key), keep(r.Value)
		if len(r.Headers) > 0 {
			k.Headers = make([]recordbatch.RecordHeader, len(r.Headers))
			for i, hd := range r.Headers {
				k.Headers[i] = recordbatch.RecordHeader{Key: hd.Key, Value: keep(hd.Value)}
			}
		}
		recs = append(recs, k)
		return nil
	})
	return recs, err
}

// cleanSegment rewrites s if any of its batches change, and swaps the
// result in. Output is started lazily at the first change: the unchanged
// prefix is copied and indexed then.
func (l *Log) cleanSegment(s *segment, first bool, c *cleaner, opts Options) (err error) {
	interval := int64(opts.IndexIntervalBytes)
	var out *segment
	defer func() {
		if err != nil && out != nil {
			out.closeFiles()
			removeCleaned(s.dir, s.base)
		}
	}()
	br := newBatchReader(s.log, s.size)
	for {
		b, pos, err := br.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		h, err := recordbatch.Validate(b)
		if err != nil {
			return err
		}
		nb, keep, err := c.filter(b, h)
		if err != nil {
			return err
		}
		changed := nb != nil || !keep
		if out == nil {
			if !changed {
				continue
			}
			if out, err = l.startCleaned(s, pos, interval); err != nil {
				return err
			}
		}
		if !keep {
			continue
		}
		if nb == nil {
			nb = b
		}
		nh, _ := recordbatch.ParseHeader(nb)
		at := out.size
		if _, err := out.log.WriteAt(nb, at); err != nil {
			return fmt.Errorf("writing cleaned segment: %w", err)
		}
		if err := out.noteBatch(nh, at, interval); err != nil {
			return err
		}
	}
	if out == nil {
		return nil // nothing to change
	}
	if out.size == 0 && !first {
		out.closeFiles()
		removeCleaned(s.dir, s.base)
		out = nil
		return l.replaceSegment(s, nil)
	}
	if err := out.seal(); err != nil {
		return err
	}
	if err := out.sync(); err != nil {
		return err
	}
	// The swap renames the new files over s's names; readers still on s
	// must keep its inodes.
	pinFiles(l.logger, s)
	if err := swapIn(s.dir, s.base); err != nil {
		return err
	}
	for _, f := range out.files() {
		f.renamed(strings.TrimSuffix(f.Name(), cleanedSuffix))
	}
	o := out
	out = nil
	return l.replaceSegment(s, o)
}

// startCleaned creates the .cleaned files for s and copies and indexes the
// unchanged prefix [0, prefix).
func (l *Log) startCleaned(s *segment, prefix, interval int64) (*segment, error) {
	out, err := openSegmentFiles(l.files, s.dir, s.base, cleanedSuffix, true)
	if err != nil {
		return nil, err
	}
	if prefix > 0 {
		if _, err := io.Copy(io.NewOffsetWriter(out.log, 0), io.NewSectionReader(s.log, 0, prefix)); err != nil {
			out.closeFiles()
			return nil, fmt.Errorf("copying unchanged prefix: %w", err)
		}
		sc := newHeaderScanner(out.log, 0, prefix)
		for {
			h, pos, err := sc.next()
			if err == io.EOF {
				break
			}
			if err == nil {
				err = out.noteBatch(h, pos, interval)
			}
			if err != nil {
				out.closeFiles()
				return nil, err
			}
		}
	}
	return out, nil
}

// swapIn installs finished .cleaned files for base. Renaming the log to
// .swap is the commit point; Open completes a swap interrupted after it.
func swapIn(dir string, base int64) error {
	swap := segmentFile(dir, base, logSuffix+swapSuffix)
	if err := os.Rename(segmentFile(dir, base, logSuffix+cleanedSuffix), swap); err != nil {
		return fmt.Errorf("committing cleaned segment: %w", err)
	}
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if err := os.Rename(segmentFile(dir, base, suf+cleanedSuffix), segmentFile(dir, base, suf)); err != nil {
			return fmt.Errorf("installing cleaned index: %w", err)
		}
	}
	if err := os.Rename(swap, segmentFile(dir, base, logSuffix)); err != nil {
		return fmt.Errorf("installing cleaned segment: %w", err)
	}
	return atomicfile.SyncDir(dir)
}

func removeCleaned(dir string, base int64) {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		_ = os.Remove(segmentFile(dir, base, suf+cleanedSuffix))
	}
}

// replaceSegment swaps old for repl (nil: remove old) in the segment list.
// The old descriptors stay open for in-flight readers until released.
func (l *Log) replaceSegment(old, repl *segment) error {
	l.mu.Lock()
	i := slices.Index(l.mu.segs, old)
	if i < 0 {
		l.mu.Unlock()
		if repl != nil {
			repl.release()
		}
		return errors.New("segment vanished during compaction")
	}
	segs := slices.Clone(l.mu.segs)
	l.mu.size -= old.size
	if repl != nil {
		segs[i] = repl
		l.mu.size += repl.size
	} else {
		segs = slices.Delete(segs, i, i+1)
	}
	l.mu.segs = segs
	l.mu.Unlock()
	if repl == nil {
		// The files are old's own; with a replacement they were renamed over.
		pinFiles(l.logger, old)
		if err := old.removeFiles(); err != nil {
			old.release()
			return err
		}
	}
	old.release()
	return nil
}
