package celenv

import (
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/sprout-gitops/sprout/celenv/lib"
)

// Names of the variables every expression can read.
const (
	varObject          = "object"
	varOldObject       = "oldObject"
	varRequest         = "request"
	varNamespaceObject = "namespaceObject"
	varVariables       = "variables"
	varGenerator       = "generator"
	// varExceptions holds what the matching PolicyExceptions allow
	// (exceptionValues); set by excepted for every evaluation.
	varExceptions = "exceptions"
)

// PerCallCostLimit bounds the work of one expression evaluation, with the
// apiserver's unit and value (roughly 0.1 s of CPU): a runaway expression fails
// its trigger instead of stalling the controller.
const PerCallCostLimit = celconfig.PerCallLimit

// baseOptions are the libraries and language settings shared by every policy.
// They follow the apiserver's base environment (k8s.io/apiserver/pkg/cel/
// environment) with one deliberate difference: aggregate literals may mix
// types, so Kyverno policies need no dyn() around map values.
func baseOptions() []cel.EnvOption {
	return append([]cel.EnvOption{
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		cel.EagerlyValidateDeclarations(true),
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
		),

		library.URLs(),
		library.Regex(),
		library.Lists(library.ListsVersion(1)),
		library.Quantity(),
		library.IP(),
		library.CIDR(),
		library.Format(),
		library.SemverLib(library.SemverVersion(1)),

		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ext.Lists(ext.ListsVersion(3)),
		ext.Math(),
		ext.Encoders(),
		ext.Bindings(),
		ext.TwoVarComprehensions(),

		cel.Variable(varObject, cel.DynType),
		cel.Variable(varOldObject, cel.DynType),
		cel.Variable(varRequest, cel.DynType),
		cel.Variable(varNamespaceObject, cel.DynType),
		cel.Variable(varVariables, cel.MapType(cel.StringType, cel.DynType)),
		// Kyverno declares an object type; a map is as cheap to evaluate as
		// the other variables (a native type's provider costs every
		// evaluation), and checkVariableRefs refuses any key but
		// allowedImages and allowedValues, so a typo still fails to compile.
		cel.Variable(varExceptions, cel.MapType(cel.StringType, cel.ListType(cel.StringType))),

		resourceLibrary(),
		setFieldLibrary(),
	}, lib.Libraries(resourceType)...)
}

// programOptions bound and meter every evaluation: every program Sprout runs
// (matchConditions, variables, generate expressions, template placeholders)
// is planned with them, in env, one of the two environments.
func programOptions(env *cel.Env) []cel.ProgramOption {
	walks := clusterWalks
	if env == namespacedEnv {
		walks = namespacedWalks
	}
	return []cel.ProgramOption{
		walks,
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostLimit(PerCallCostLimit),
		cel.CostTracking(&costEstimator{}),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
		cel.InterruptCheckFrequency(100),
	}
}

var (
	envOnce       sync.Once
	clusterEnv    *cel.Env
	namespacedEnv *cel.Env
	envErr        error
	// clusterWalks and namespacedWalks plan the calls of each environment
	// that walk values (walkOption), with that environment's
	// implementations: the two differ in what a policy may read and write.
	clusterWalks, namespacedWalks cel.ProgramOption
)

// Prepare builds the shared environments ahead of the first compile, so
// that a process can build them while it waits on the API server: the
// first policy compiled would otherwise wait for them.
func Prepare() { _, _, _ = environments() }

// environments returns the two shared environments, built once: one for
// cluster policies and one for namespaced policies, which differ only in the
// generator and resource forms they may call.
func environments() (cluster, namespaced *cel.Env, err error) {
	envOnce.Do(func() {
		var base *cel.Env
		base, envErr = cel.NewEnv(baseOptions()...)
		if envErr != nil {
			return
		}
		clusterEnv, envErr = base.Extend(generatorLibrary(false))
		if envErr != nil {
			return
		}
		namespacedEnv, envErr = base.Extend(generatorLibrary(true), namespacedResourceLibrary(), lib.NamespacedGlobalContext())
		if envErr != nil {
			return
		}
		if clusterWalks, envErr = walkOption(clusterEnv); envErr != nil {
			return
		}
		namespacedWalks, envErr = walkOption(namespacedEnv)
	})
	return clusterEnv, namespacedEnv, envErr
}
