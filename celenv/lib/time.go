package lib

import (
	"fmt"
	"reflect"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

const varTime = "time"

// clockType is the CEL type of the time variable.
var clockType = cel.OpaqueType("time.Clock")

// timeLibrary declares Kyverno's time functions:
//
//	time.now() -> timestamp                          // Input.Now, or the wall clock
//	time.truncate(timestamp, duration) -> timestamp  // rounds down to a multiple of duration
//	time.toCron(timestamp) -> string                 // "minute hour day month weekday"
//
// Kyverno declares time.now as a global function reading the wall clock.
// Sprout makes time a variable bound per evaluation, so that render and tests
// can fix the instant and every time.now() of one evaluation agrees; the
// expressions are the same. truncate and toCron need no clock and stay
// global functions under the time namespace, which the checker resolves
// before the variable.
func timeLibrary() cel.EnvOption {
	return cel.Lib(utilityLibrary{compile: []cel.EnvOption{
		cel.Variable(varTime, clockType),
		cel.Function("now", cel.MemberOverload("time_clock_now",
			[]*cel.Type{clockType}, cel.TimestampType,
			cel.UnaryBinding(func(c ref.Val) ref.Val {
				clk, ok := c.(clock)
				if !ok {
					return types.MaybeNoSuchOverloadErr(c)
				}
				*clk.read = true
				return types.Timestamp{Time: clk.now}
			}))),
		cel.Function("time.truncate", cel.Overload("time_truncate_timestamp_duration",
			[]*cel.Type{cel.TimestampType, cel.DurationType}, cel.TimestampType,
			cel.BinaryBinding(truncateTime))),
		cel.Function("time.toCron", cel.Overload("time_toCron_timestamp",
			[]*cel.Type{cel.TimestampType}, cel.StringType,
			cel.UnaryBinding(cronOf))),
	}})
}

// truncateTime rounds ts down to a multiple of d since the zero time, as Go's
// Time.Truncate does: whole hours and days line up with UTC.
func truncateTime(ts, d ref.Val) ref.Val {
	t, ok := ts.(types.Timestamp)
	if !ok {
		return types.MaybeNoSuchOverloadErr(ts)
	}
	dur, ok := d.(types.Duration)
	if !ok {
		return types.MaybeNoSuchOverloadErr(d)
	}
	return types.Timestamp{Time: t.Time.Truncate(dur.Duration)}
}

// cronOf is the cron schedule that fires at ts's minute, read in UTC:
// time.toCron(timestamp("2025-01-02T15:30:00Z")) is "30 15 2 1 4".
func cronOf(ts ref.Val) ref.Val {
	t, ok := ts.(types.Timestamp)
	if !ok {
		return types.MaybeNoSuchOverloadErr(ts)
	}
	u := t.Time.UTC()
	return types.String(fmt.Sprintf("%d %d %d %d %d", u.Minute(), u.Hour(), u.Day(), int(u.Month()), int(u.Weekday())))
}

// clock is the value bound to the time variable for one evaluation. read
// is set when time.now() is called: the result then depends on the clock.
type clock struct {
	now  time.Time
	read *bool
}

var _ ref.Val = clock{}

// newClock fixes the instant time.now() returns for one evaluation: now, or
// the wall clock when now is zero. It is UTC, so that output does not depend
// on the controller's time zone.
func newClock(now time.Time) clock {
	if now.IsZero() {
		now = time.Now()
	}
	return clock{now: now.UTC(), read: new(bool)}
}

func (c clock) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("time cannot be converted")
}
func (c clock) ConvertToType(t ref.Type) ref.Val {
	return types.NewErr("time cannot be converted to %s", t.TypeName())
}
func (c clock) Equal(other ref.Val) ref.Val {
	o, ok := other.(clock)
	return types.Bool(ok && c.now.Equal(o.now))
}
func (c clock) Type() ref.Type { return clockType }
func (c clock) Value() any     { return c }
