// Package globalctx serves Kyverno's GlobalContextEntries to policies: the
// data globalContext.Get reads. It owns the entries' store, the informer
// of each kubernetesResource entry, the polling of each apiCall entry
// through celenv's http rules, the JMESPath projections and the Kyverno
// functions they call, and the entries' status. It tells its listener
// which entry's data changed, so the policies that read it are synced
// again; it knows nothing of policies. Static serves entries read from
// files, for sprout render and sprout test, without a cluster.
package globalctx
