package main

// The release image is the binary alone on an empty base, with the CA
// roots as a file beside it (docs/decisions.md), and the binary is also
// shipped bare: it carries the time-zone database a distribution would
// otherwise lend it, used only where the system has none (a
// --resync-schedule with CRON_TZ=). It does not carry CA roots: parsing
// them was the largest package initialisation of every start, and the
// hosts it runs on bare have their own.
import _ "time/tzdata"
