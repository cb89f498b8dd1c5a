//go:build unix

package sources

import (
	"os"
	"path/filepath"
	"syscall"
)

// cloneLock is the name of the file a clone's folder is locked by while its
// process reads it. The lock goes with the process however it ends, so a
// folder whose lock can be taken was left by a process that was killed (out
// of memory, SIGKILL) before it could remove it.
const cloneLock = "sprout.lock"

// lockClone locks the clone folder dir until the returned func is called.
// The lock is taken on a file of another name that is then renamed to
// cloneLock, so that sweepClones never sees the file unlocked.
func lockClone(dir string) (unlock func(), err error) {
	tmp := filepath.Join(dir, cloneLock+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, cloneLock)); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// sweepClones removes the clone folders under parent that no live process
// holds: those a killed process left behind. A crash-looping process would
// otherwise add one at each start until the temporary volume is full.
func sweepClones(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, clonePattern))
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, cloneLock))
		if err != nil {
			continue // not a clone, or one still being set up
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir) // the next sweep tries again
		}
		_ = f.Close()
	}
}
