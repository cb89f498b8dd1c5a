// Package celenv owns the CEL side of a GeneratingPolicy: the environment
// (variables, the Kubernetes libraries, Sprout's resource, generator and
// setField, and Kyverno's libraries from celenv/lib), compiling a policy
// once into an immutable Program, and evaluating that Program against one
// trigger to produce the objects the policy wants.
//
// Workflow:
//
//	prog := celenv.Compile(policy)        // once per policy generation
//	if err := prog.Err(); err != nil {…}  // field paths: spec.variables[1].expression
//	res, err := prog.Evaluate(ctx, input) // once per trigger; never writes
//
// celenv never talks to the API server and never writes: generator.Apply
// records desired objects on the evaluation, and the caller (reconcile) hands
// them to inventory.
package celenv
