package globalctx

import (
	"errors"
	"reflect"
	"strconv"
	"time"

	"github.com/kyverno/go-jmespath"
)

// timeFunctions are Kyverno's time functions that read no clock. A
// projection is evaluated when the entry's data changes, not when a policy
// reads it, so time_now, time_now_utc and time_since against now would
// hold the time of the last load: they are left out (docs/cel.md).
func timeFunctions() []jmespath.FunctionEntry {
	return []jmespath.FunctionEntry{
		fn("time_since", jpTimeSince, jpString, jpString, jpString),
		fn("time_to_cron", jpTimeToCron, jpString),
		fn("time_add", jpTimeAdd, jpString, jpString),
		fn("time_parse", jpTimeParse, jpString, jpString),
		fn("time_utc", timeOf("time_utc", 1, func(t []time.Time) any { return t[0].UTC().Format(time.RFC3339) }), jpString),
		fn("time_diff", timeOf("time_diff", 2, func(t []time.Time) any { return t[1].Sub(t[0]).String() }), jpString, jpString),
		fn("time_before", timeOf("time_before", 2, func(t []time.Time) any { return t[0].Before(t[1]) }), jpString, jpString),
		fn("time_after", timeOf("time_after", 2, func(t []time.Time) any { return t[0].After(t[1]) }), jpString, jpString),
		fn("time_between", timeOf("time_between", 3, func(t []time.Time) any { return t[0].After(t[1]) && t[0].Before(t[2]) }), jpString, jpString, jpString),
		fn("time_truncate", jpTimeTruncate, jpString, jpString),
	}
}

// timeOf is a function of n RFC 3339 times.
func timeOf(name string, n int, f func([]time.Time) any) jmespath.JpFunction {
	return func(arguments []any) (any, error) {
		times := make([]time.Time, 0, n)
		for i := range n {
			t, err := timeArg(name, arguments, i)
			if err != nil {
				return nil, err
			}
			times = append(times, t)
		}
		return f(times), nil
	}
}

func timeArg(f string, arguments []any, index int) (time.Time, error) {
	arg, err := validateArg(f, arguments, index, reflect.String)
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339, arg.String())
}

func durationArg(f string, arguments []any, index int) (time.Duration, error) {
	arg, err := validateArg(f, arguments, index, reflect.String)
	if err != nil {
		return 0, err
	}
	return time.ParseDuration(arg.String())
}

// jpTimeSince is the time from the second argument to the third, both in
// the layout of the first (RFC 3339 when it is empty). Kyverno reads the
// clock for an empty third argument; Sprout refuses it.
func jpTimeSince(arguments []any) (any, error) {
	s, err := stringArgs("time_since", arguments, 3)
	if err != nil {
		return nil, err
	}
	layout := s[0]
	if layout == "" {
		layout = time.RFC3339
	}
	if s[2] == "" {
		return nil, errors.New("JMESPath function 'time_since': the end time is empty, which reads the clock: a projection is evaluated when its data changes, not when it is read, so Sprout has no clock in projections")
	}
	t1, err := time.Parse(layout, s[1])
	if err != nil {
		return nil, err
	}
	t2, err := time.Parse(layout, s[2])
	if err != nil {
		return nil, err
	}
	return t2.Sub(t1).String(), nil
}

func jpTimeToCron(arguments []any) (any, error) {
	t, err := timeArg("time_to_cron", arguments, 0)
	if err != nil {
		return nil, err
	}
	return strconv.Itoa(t.Minute()) + " " + strconv.Itoa(t.Hour()) + " " + strconv.Itoa(t.Day()) + " " +
		strconv.Itoa(int(t.Month())) + " " + strconv.Itoa(int(t.Weekday())), nil
}

func jpTimeAdd(arguments []any) (any, error) {
	// Kyverno names time_to_cron in time_add's errors; so does Sprout.
	t, err := timeArg("time_to_cron", arguments, 0)
	if err != nil {
		return nil, err
	}
	d, err := durationArg("time_to_cron", arguments, 1)
	if err != nil {
		return nil, err
	}
	return t.Add(d).Format(time.RFC3339), nil
}

// jpTimeParse reads a time in a layout, or in seconds since the epoch when
// the layout is a number, as RFC 3339.
func jpTimeParse(arguments []any) (any, error) {
	s, err := stringArgs("time_parse", arguments, 2)
	if err != nil {
		return nil, err
	}
	if _, err := strconv.ParseInt(s[0], 10, 64); err == nil {
		epoch, err := strconv.ParseInt(s[1], 10, 64)
		if err != nil {
			return nil, err
		}
		return time.Unix(epoch, 0).UTC().Format(time.RFC3339), nil
	}
	t, err := time.Parse(s[0], s[1])
	if err != nil {
		return nil, err
	}
	return t.Format(time.RFC3339), nil
}

func jpTimeTruncate(arguments []any) (any, error) {
	t, err := timeArg("time_truncate", arguments, 0)
	if err != nil {
		return nil, err
	}
	d, err := durationArg("time_truncate", arguments, 1)
	if err != nil {
		return nil, err
	}
	return t.Truncate(d).Format(time.RFC3339), nil
}
