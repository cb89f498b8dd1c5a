package lib_test

import (
	"testing"
	"time"
)

func TestMathRound(t *testing.T) {
	runLibCases(t, time.Time{}, []libCase{
		{name: "two decimals", expr: `math.round(10.125, 2)`, want: 10.13},
		{name: "no decimals", expr: `math.round(10.125, 0)`, want: 10.0},
		{name: "hundreds", expr: `math.round(12345.6789, -2)`, want: 12300.0},
		{name: "half away from zero", expr: `math.round(-2.5, 0)`, want: -3.0},
		{name: "binary value of 1.005", expr: `math.round(1.005, 2)`, want: 1.0},
		{name: "more digits than a double holds", expr: `math.round(1e300, 400) == 1e300`, want: true},
		{name: "coarser than any double", expr: `math.round(123.0, -400)`, want: 0.0},
		{name: "ext.Math's one-argument round still works", expr: `math.round(1.5)`, want: 2.0},
		{name: "both forms in one expression", expr: `math.round(2.345, 1) + math.round(0.4)`, want: 2.3},
		{name: "an int value is a compile error, as in Kyverno", expr: `math.round(10, 2)`,
			wantErr: "found no matching overload for 'math.round'"},
	})
}
