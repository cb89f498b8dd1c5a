package sources

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Bounds of one revision of a folder or Git source, and of each folder
// `sprout render` reads. They are checked against the sizes a folder or a
// Git tree lists before anything is read, and again while reading, since a
// file in a folder may grow in between.
const (
	// MaxFileSize bounds one policy file: a larger one is an error, not a
	// reason to read gigabytes.
	MaxFileSize = 4 << 20
	// MaxRevisionSize bounds the policy files of one revision together.
	MaxRevisionSize = 16 << 20
	// MaxRevisionFiles bounds how many policy files one revision holds.
	MaxRevisionFiles = 4096
	// MaxTreeEntries bounds the entries of every kind one walk visits, and
	// MaxTreeDepth how deep it goes: Git trees share subtrees, so a few
	// kilobytes of them can name a folder of a trillion entries.
	MaxTreeEntries = 100_000
	MaxTreeDepth   = 64
)

// maxEntryErrors is how many refused entries a rejection lists: past it,
// the walk stops, so that a tree of a million links makes a short message
// (it goes into a PolicySource's status and an Event) and no long walk.
const maxEntryErrors = 10

// Limits bound what is read from a folder or a Git revision.
type Limits struct {
	// FileSize bounds one file.
	FileSize int64
	// TotalSize bounds all files read together.
	TotalSize int64
	// Files bounds how many files are read.
	Files int
}

// PolicyLimits are the limits of one revision of policies.
var PolicyLimits = Limits{FileSize: MaxFileSize, TotalSize: MaxRevisionSize, Files: MaxRevisionFiles}

// File is one file read from a folder or a Git revision.
type File struct {
	// Path is slash-separated, from the root of what was read.
	Path string
	Data []byte
}

// entry is one name in a folder or a Git tree, as listed, before anything
// is read.
type entry struct {
	path string
	// mode holds the type bits only, as listed: a link is a link, never
	// what it points to.
	mode fs.FileMode
	// size and open are called for a regular file only. open fails if what
	// is there is no longer the regular file listed.
	size func() (int64, error)
	open func() (io.ReadCloser, error)
}

// walkFunc calls fn for dir and every entry below it, a folder before what
// it holds; fn returning fs.SkipDir for a folder skips it. It never
// follows a link, to a folder or to anything else.
type walkFunc func(dir string, fn func(entry) error) error

// readTree reads the files below dir whose base names match, and is the
// one place that decides what a folder or Git source (and `sprout render`)
// reads. Only regular files are read: a matching link, named pipe, socket,
// device or Git submodule rejects the revision with its path, and so does
// a file over lim.FileSize, before anything is read; more than lim.Files
// files or lim.TotalSize bytes stop it at the path that runs over. Hidden
// folders (.git, .github) are skipped, and entries that do not match are
// never opened, whatever they are. Errors about what the tree holds are
// RejectedErrors; those reading it (a file gone meanwhile) are not. Files
// come back sorted by path.
func readTree(walk walkFunc, dir string, match func(name string) bool, lim Limits) ([]File, error) {
	var wanted []sized
	var refused []error
	var total int64
	visited := 0
	err := walk(dir, func(e entry) error {
		name := path.Base(e.path)
		if visited++; visited > MaxTreeEntries {
			return &RejectedError{Err: fmt.Errorf("%s: more than the %d entries one revision may have", e.path, MaxTreeEntries)}
		}
		if strings.Count(e.path, "/") >= MaxTreeDepth {
			return &RejectedError{Err: fmt.Errorf("%s: deeper than the %d folders one revision may have", e.path, MaxTreeDepth)}
		}
		switch {
		case e.mode.IsDir():
			if e.path != dir && strings.HasPrefix(name, ".") {
				return fs.SkipDir
			}
			return nil
		case !match(name):
			return nil
		case !e.mode.IsRegular():
			refused = append(refused, notRegular(e.path, e.mode))
		default:
			size, err := e.size()
			if err != nil {
				return err
			}
			if size > lim.FileSize {
				refused = append(refused, tooBig(e.path, size, lim.FileSize))
				break
			}
			if len(wanted) == lim.Files {
				return &RejectedError{Err: fmt.Errorf("%s: more than the %d files one revision may have", e.path, lim.Files)}
			}
			if total += size; total > lim.TotalSize {
				return &RejectedError{Err: fmt.Errorf("%s: the files up to this one hold more than the %d bytes one revision may have", e.path, lim.TotalSize)}
			}
			wanted = append(wanted, sized{e, size})
		}
		if len(refused) == maxEntryErrors {
			return &RejectedError{Err: errors.Join(append(refused, fmt.Errorf("(stopped at %d refused files)", maxEntryErrors))...)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(refused) > 0 {
		return nil, &RejectedError{Err: errors.Join(refused...)}
	}
	return readEntries(wanted, lim)
}

// ReadFiles reads what `sprout render` is given. A file named is read
// whole, whatever it is, since it was named (a link, a pipe from the shell),
// up to lim.FileSize. A folder is read as a folder source reads one, by
// readTree, for the files whose names end in one of exts. Each File's Path
// is name joined with its path in the folder.
func ReadFiles(name string, exts []string, lim Limits) ([]File, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		data, err := readEntry(entry{path: name, open: func() (io.ReadCloser, error) { return f, nil }}, info.Size(), lim.FileSize)
		if err != nil {
			return nil, err
		}
		return []File{{Path: name, Data: data}}, nil
	}
	root, err := os.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	match := func(base string) bool { return slices.Contains(exts, path.Ext(base)) }
	files, err := readTree(rootWalk(root), ".", match, lim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i := range files {
		files[i].Path = filepath.Join(name, filepath.FromSlash(files[i].Path))
	}
	return files, nil
}

// sized is an entry to read and the size it was listed with.
type sized struct {
	entry
	size int64
}

// readEntries reads each listed file through its limits: what was listed
// may have grown since.
func readEntries(wanted []sized, lim Limits) ([]File, error) {
	files := make([]File, 0, len(wanted))
	var total int64
	for _, w := range wanted {
		e := w.entry
		data, err := readEntry(e, w.size, lim.FileSize)
		if err != nil {
			return nil, err
		}
		if total += int64(len(data)); total > lim.TotalSize {
			return nil, &RejectedError{Err: fmt.Errorf("%s: the files up to this one hold more than the %d bytes one revision may have", e.path, lim.TotalSize)}
		}
		files = append(files, File{Path: e.path, Data: data})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// readEntry reads one file, up to limit bytes. size is what it was listed
// with: reading into that much at once allocates it once, not twice over
// as a growing slice would.
func readEntry(e entry, size, limit int64) ([]byte, error) {
	r, err := e.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	lr := io.LimitReader(r, limit+1)
	data := make([]byte, 0, min(size, limit)+1) // one more: to see that it grew
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := lr.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
	}
	if int64(len(data)) > limit {
		return nil, &RejectedError{Err: tooBig(e.path, int64(len(data)), limit)}
	}
	return data, nil
}

func notRegular(p string, mode fs.FileMode) error {
	return fmt.Errorf("%s: %s; only regular files are read", p, kind(mode))
}

func tooBig(p string, size, limit int64) error {
	return fmt.Errorf("%s: %d bytes, more than the %d a file may have", p, size, limit)
}

// kind names what an entry that is not a regular file is.
func kind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode.IsDir():
		return "a folder"
	}
	return "not a regular file"
}

// isPolicyFile reports whether a file holds policies by its name.
func isPolicyFile(name string) bool {
	ext := path.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}
