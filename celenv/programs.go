package celenv

import (
	"runtime"
	"sync"
	"weak"

	"github.com/google/cel-go/cel"
)

// Programs of the same source in the same environment are one program,
// shared by every expression that has that source, in one policy or many:
// a planned program keeps a dispatcher of every function of its
// environment (about 26 KB), most of what a compiled policy holds, and
// policies written from one template repeat most of their expressions.
// A program only reads its state while it evaluates, which concurrent
// evaluations of one policy do already. The table holds its programs
// weakly: a program goes when the last expression using it does.
var programs = struct {
	sync.Mutex
	m map[programKey]weak.Pointer[sharedProgram]
}{m: map[programKey]weak.Pointer[sharedProgram]{}}

// programKey is what decides a program: its environment (with the options
// programOptions gives it) and its source. The checked expression, and so
// its plan, follow from the two.
type programKey struct {
	env *cel.Env
	src string
}

// sharedProgram is a program in the table; expressions hold it.
type sharedProgram struct{ cel.Program }

// programOf returns the program of src, compiled as a in env: the one in
// the table, or the one plan makes, then kept there.
func programOf(env *cel.Env, src string, plan func() (cel.Program, error)) (cel.Program, error) {
	key := programKey{env: env, src: src}
	programs.Lock()
	if p := programs.m[key].Value(); p != nil {
		programs.Unlock()
		return p, nil
	}
	programs.Unlock()
	prog, err := plan()
	if err != nil {
		return nil, err
	}
	p := &sharedProgram{prog}
	programs.Lock()
	defer programs.Unlock()
	if other := programs.m[key].Value(); other != nil {
		return other, nil // planned meanwhile by another compile
	}
	programs.m[key] = weak.Make(p)
	runtime.AddCleanup(p, forgetProgram, key)
	return p, nil
}

// forgetProgram removes key's entry once its program is gone, unless the
// entry is already another's.
func forgetProgram(key programKey) {
	programs.Lock()
	defer programs.Unlock()
	if w, ok := programs.m[key]; ok && w.Value() == nil {
		delete(programs.m, key)
	}
}
