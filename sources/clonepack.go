package sources

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage"
)

// Bounds of one clone, checked against the headers of the pack it receives
// before go-git inflates any object: go-git holds each object whole in
// memory while it clones, so a blob of a gigabyte of zeros, a megabyte
// sent, would otherwise take a gigabyte of Sprout's memory at each check.
const (
	// MaxCloneObjectSize bounds one object of a clone, inflated (for a
	// delta, the object it makes). It is MaxRevisionSize: no file Sprout
	// reads is larger.
	MaxCloneObjectSize = MaxRevisionSize
	// MaxCloneSize bounds all the objects of a clone together, inflated.
	MaxCloneSize = 256 << 20
	// MaxClonePackSize bounds the pack a clone receives, as sent; it is
	// kept on disk, in the clone's folder, while it is checked.
	MaxClonePackSize = 64 << 20
)

// cloneLimits are the bounds of a clone.
type cloneLimits struct{ object, total, pack int64 }

// packLimits are the bounds every clone is held to; tests lower them.
var packLimits = cloneLimits{object: MaxCloneObjectSize, total: MaxCloneSize, pack: MaxClonePackSize}

// cloneStorage is a clone's storage as go-git fetches into it: the pack
// goes to a file in the clone's folder first (PackfileWriter), is checked
// there against packLimits from its headers, and only then is read into
// the storage, object by object (unindexedStorage).
type cloneStorage struct {
	storage.Storer
	dir string
}

// unindexedStorage is a repository's storage without its PackfileWriter, so
// that go-git reads a fetched pack object by object into the storage instead
// of writing it whole and indexing it. The indexer sizes a slice by the
// object count in the pack's header before it reads any object: a garbled
// count (0xff000003 for 3) asks for up to 128 GiB and the process dies out
// of memory, which no error reports. Read object by object, a pack allocates
// only for what it holds, and a bad count is an error like any other
// corruption. Policy repositories are small; writing their objects one by
// one costs little.
type unindexedStorage struct{ storage.Storer }

// PackfileWriter takes the pack go-git fetches.
func (s cloneStorage) PackfileWriter() (io.WriteCloser, error) {
	f, err := os.CreateTemp(s.dir, "fetched-*.pack")
	if err != nil {
		return nil, err
	}
	return &spooledPack{f: f, into: unindexedStorage{s.Storer}, lim: packLimits}, nil
}

// spooledPack writes a fetched pack to a file, up to lim.pack bytes; once
// it is closed, checks the pack and reads it into the storage.
type spooledPack struct {
	f    *os.File
	into storage.Storer
	lim  cloneLimits
	n    int64
	err  error
}

func (p *spooledPack) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.n += int64(len(b)); p.n > p.lim.pack {
		p.err = &RejectedError{Err: fmt.Errorf("the pack sent is more than the %d bytes a clone may receive", p.lim.pack)}
		return 0, p.err
	}
	n, err := p.f.Write(b)
	if err != nil {
		p.err = err
	}
	return n, err
}

// Close checks the pack received and reads it into the storage, unless
// nothing (or not all of it) was received; the file goes either way.
func (p *spooledPack) Close() (err error) {
	defer os.Remove(p.f.Name())
	defer func() { err = errors.Join(err, p.f.Close()) }()
	if p.err != nil || p.n == 0 {
		return nil // the write's error, or go-git's for an empty pack, is the fetch's
	}
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := checkPack(p.f, p.lim); err != nil {
		return err
	}
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return packfile.UpdateObjectStorage(p.into, p.f)
}

// checkPack reads the headers of the objects of pack, a seekable file, and
// refuses one larger than lim.object or all together larger than
// lim.total, inflated, before anything larger than lim.object is
// inflated: a delta's own size is checked before it is inflated, and then
// the size of the object it makes, which it begins with. Other objects are
// inflated to nowhere, to find the next header (an object never inflates
// past the size its header declares: the scanner stops it).
func checkPack(pack io.ReadSeeker, lim cloneLimits) error {
	s := packfile.NewScanner(pack)
	_, count, err := s.Header()
	if err != nil {
		return fmt.Errorf("the pack: %w", err)
	}
	var total int64
	for i := range count {
		h, err := s.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("the pack: object %d of %d: %w", i+1, count, err)
		}
		size, what := h.Length, "a "+h.Type.String()
		if size > lim.object {
			return tooLargeObject(what, size, lim.object)
		}
		if h.Type.IsDelta() {
			head := &deltaHead{}
			if _, _, err := s.NextObject(head); err != nil {
				return fmt.Errorf("the pack: object %d of %d: %w", i+1, count, err)
			}
			if size, err = head.target(); err != nil {
				return fmt.Errorf("the pack: object %d of %d: %w", i+1, count, err)
			}
			if what = "an object made by a delta"; size > lim.object {
				return tooLargeObject(what, size, lim.object)
			}
		}
		if total += size; total > lim.total {
			return &RejectedError{Err: fmt.Errorf("the pack's objects up to %s of %d bytes hold more than the %d bytes a clone may have", what, size, lim.total)}
		}
	}
	return nil
}

func tooLargeObject(what string, size, limit int64) error {
	return &RejectedError{Err: fmt.Errorf("the pack holds %s of %d bytes, more than the %d one object of a clone may have", what, size, limit)}
}

// deltaHead keeps the beginning of a delta, which names the sizes of the
// object it applies to and of the object it makes, and drops the rest.
type deltaHead struct{ b []byte }

// maxDeltaHead holds the two sizes a delta begins with, each at most ten
// bytes long.
const maxDeltaHead = 20

func (d *deltaHead) Write(b []byte) (int, error) {
	if n := maxDeltaHead - len(d.b); n > 0 {
		d.b = append(d.b, b[:min(n, len(b))]...)
	}
	return len(b), nil
}

// target returns the size of the object the delta makes: the second of
// its two sizes, each written 7 bits a byte, least significant first.
func (d *deltaHead) target() (int64, error) {
	rest := d.b
	var sizes [2]uint64
	for i := range sizes {
		for shift := 0; ; shift += 7 {
			if len(rest) == 0 || shift > 63 {
				return 0, fmt.Errorf("%w: a delta's header is cut short or too long", packfile.ErrMalformedPackFile)
			}
			c := rest[0]
			rest = rest[1:]
			sizes[i] |= uint64(c&0x7f) << shift
			if c&0x80 == 0 {
				break
			}
		}
	}
	if sizes[1] > 1<<62 {
		return 1 << 62, nil
	}
	return int64(sizes[1]), nil
}
