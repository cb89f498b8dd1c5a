package sources

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// fsWalk walks an fs.FS: an embedded or in-memory tree. Its listing gives
// each entry's type without following links (fs.ReadDir), so a link is
// refused before it is opened.
func fsWalk(fsys fs.FS) walkFunc {
	return func(dir string, fn func(entry) error) error {
		return fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return fn(entry{
				path: p,
				mode: d.Type(),
				size: func() (int64, error) {
					info, err := d.Info()
					if err != nil {
						return 0, err
					}
					return info.Size(), nil
				},
				open: func() (io.ReadCloser, error) {
					f, err := fsys.Open(p)
					if err != nil {
						return nil, err
					}
					if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
						_ = f.Close()
						return nil, fmt.Errorf("%s: changed while it was read", p)
					}
					return f, nil
				},
			})
		})
	}
}

// rootWalk walks a folder on disk through an os.Root, which refuses any
// path that leaves the folder. Every file is listed with Lstat and opened
// without blocking, then checked to be the regular file listed: a file
// replaced by a link, a pipe or a device between the two is not read.
func rootWalk(root *os.Root) walkFunc {
	fsys := root.FS()
	return func(dir string, fn func(entry) error) error {
		return fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			var listed fs.FileInfo
			return fn(entry{
				path: p,
				mode: d.Type(),
				size: func() (int64, error) {
					info, err := root.Lstat(p)
					if err != nil {
						return 0, err
					}
					if !info.Mode().IsRegular() {
						return 0, &RejectedError{Err: notRegular(p, info.Mode())}
					}
					listed = info
					return info.Size(), nil
				},
				open: func() (io.ReadCloser, error) {
					// Opening a named pipe for reading waits for a writer;
					// O_NONBLOCK makes it return at once.
					f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
					if err != nil {
						return nil, err
					}
					if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() || !os.SameFile(info, listed) {
						_ = f.Close()
						return nil, fmt.Errorf("%s: changed while it was read", p)
					}
					return f, nil
				},
			})
		})
	}
}

// gitWalk walks the tree of a Git commit in the object store: nothing is
// checked out, so a committed link is only ever an entry of mode 120000,
// and the size of a blob is read from its header before its content.
func gitWalk(s storer.EncodedObjectStorer, root *object.Tree) walkFunc {
	return func(dir string, fn func(entry) error) error {
		t := root
		if dir != "." {
			var err error
			if t, err = gitSubtree(s, root, dir); err != nil {
				return err
			}
		}
		if err := fn(entry{path: dir, mode: fs.ModeDir}); err != nil {
			if err == fs.SkipDir {
				return nil
			}
			return err
		}
		return walkGitTree(s, t, dir, fn)
	}
}

// gitSubtree finds the folder dir below root, through folders only.
func gitSubtree(s storer.EncodedObjectStorer, root *object.Tree, dir string) (*object.Tree, error) {
	t, p := root, ""
	for _, name := range strings.Split(dir, "/") {
		p = path.Join(p, name)
		var found *object.TreeEntry
		for j := range t.Entries {
			if t.Entries[j].Name == name {
				found = &t.Entries[j]
				break
			}
		}
		switch {
		case found == nil:
			return nil, fmt.Errorf("%s: no such folder", p)
		case found.Mode != filemode.Dir:
			return nil, &RejectedError{Err: fmt.Errorf("%s: %s, not a folder", p, kind(gitMode(found.Mode)))}
		}
		var err error
		if t, err = object.GetTree(s, found.Hash); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return t, nil
}

func walkGitTree(s storer.EncodedObjectStorer, t *object.Tree, dir string, fn func(entry) error) error {
	for _, te := range t.Entries {
		p := path.Join(dir, te.Name)
		e := gitEntry(s, p, te)
		err := fn(e)
		switch {
		case err == fs.SkipDir && e.mode.IsDir():
			continue
		case err != nil:
			return err
		case !e.mode.IsDir():
			continue
		}
		sub, err := object.GetTree(s, te.Hash)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := walkGitTree(s, sub, p, fn); err != nil {
			return err
		}
	}
	return nil
}

// gitEntry is one entry of a Git tree. The blob is looked up once, for its
// size; the storage reads a blob over MaxFileSize lazily, so a large one is
// refused without being read.
func gitEntry(s storer.EncodedObjectStorer, p string, te object.TreeEntry) entry {
	var blob *object.Blob
	get := func() (*object.Blob, error) {
		if blob != nil {
			return blob, nil
		}
		b, err := object.GetBlob(s, te.Hash)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		blob = b
		return b, nil
	}
	return entry{
		path: p,
		mode: gitMode(te.Mode),
		size: func() (int64, error) {
			b, err := get()
			if err != nil {
				return 0, err
			}
			return b.Size, nil
		},
		open: func() (io.ReadCloser, error) {
			b, err := get()
			if err != nil {
				return nil, err
			}
			return b.Reader()
		},
	}
}

// gitMode is the type of a Git tree entry as fs.FileMode type bits.
func gitMode(m filemode.FileMode) fs.FileMode {
	switch m {
	case filemode.Dir:
		return fs.ModeDir
	case filemode.Regular, filemode.Executable, filemode.Deprecated:
		return 0
	case filemode.Symlink:
		return fs.ModeSymlink
	}
	return fs.ModeIrregular // a submodule, or a mode Git does not write
}
