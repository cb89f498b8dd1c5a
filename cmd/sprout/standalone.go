package main

// The release image is the binary alone on an empty base (docs/decisions.md),
// and the binary is also shipped bare: it carries what a distribution would
// otherwise lend it. The CA roots are used only where the system has none
// (HTTPS Git remotes from a scratch image); the time-zone database only
// where the system has none (a --resync-schedule with CRON_TZ=).
import (
	_ "time/tzdata"

	_ "golang.org/x/crypto/x509roots/fallback"
)
