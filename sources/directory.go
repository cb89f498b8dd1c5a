package sources

import (
	"context"
	"time"
)

// DirectorySource polls a local folder for policy files (*.yaml, *.yml, any
// depth): useful next to a checkout, and the shape a Git source takes once
// fetched.
type DirectorySource struct {
	*poller
	dir string
}

var _ Source = (*DirectorySource)(nil)

// NewDirectory returns a source of the policies under dir, read every interval.
func NewDirectory(dir string, interval time.Duration) *DirectorySource {
	name := "dir:" + dir
	return &DirectorySource{dir: dir, poller: newPoller(name, interval, func(_ context.Context, last string) (contents, string, bool, error) {
		c, revision, err := loadFolder(dir)
		if err != nil {
			return contents{}, "", false, err
		}
		return c, revision, revision == last, nil
	})}
}
