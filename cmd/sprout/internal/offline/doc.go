// Package offline evaluates policies without a cluster, for sprout render
// and sprout test: it reads policy, object and PolicyException files,
// evaluates every policy for every trigger it matches as the controller
// would (one matcher, one evaluation), and runs the tests below a folder
// (Kyverno's kyverno-test.yaml files and fixture folders) into rows of
// results. The commands, their flags and their output stay in cmd/sprout.
package offline
