package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is sprout.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "sprout.dev", Version: "v1alpha1"}

// PolicyInventories is the resource of the PolicyInventory kind.
var PolicyInventories = GroupVersion.WithResource("policyinventories")

// PolicyInventoryKind is the kind of the record.
const PolicyInventoryKind = "PolicyInventory"

// PolicyInventory is Sprout's record of one policy. It survives restarts:
// what the policy has written to, which triggers events admitted, what a
// non-synchronizing policy has already generated, and the policy's state.
// The objects themselves are found by their labels, so the record stays
// small however many objects a policy owns (docs/design.md, the record).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=policyinventories,scope=Cluster,shortName=pinv,categories=sprout
// +kubebuilder:printcolumn:name="POLICY",type=string,JSONPath=`.spec.policy.name`
// +kubebuilder:printcolumn:name="NAMESPACE",type=string,JSONPath=`.spec.policy.namespace`
// +kubebuilder:printcolumn:name="SOURCE",type=string,JSONPath=`.spec.source`
// +kubebuilder:printcolumn:name="REVISION",type=string,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="TRIGGERS",type=integer,JSONPath=`.status.triggers`
// +kubebuilder:printcolumn:name="OBJECTS",type=integer,JSONPath=`.status.objects`
// +kubebuilder:printcolumn:name="REASON",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type PolicyInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PolicyInventorySpec `json:"spec"`
	// +optional
	Status PolicyInventoryStatus `json:"status,omitempty"`
}

// PolicyInventoryList is a list of PolicyInventory objects.
//
// +kubebuilder:object:root=true
type PolicyInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyInventory `json:"items"`
}

// PolicyInventorySpec is what Sprout must remember about a policy.
type PolicyInventorySpec struct {
	// Policy is the policy the record belongs to.
	Policy PolicyReference `json:"policy"`

	// Source names where the policy came from ("cluster", a Git source…).
	// +optional
	Source string `json:"source,omitempty"`

	// Revision is the source's revision of the policy.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Applied is the content revision of the policy (a hash of its spec)
	// that its objects were last synced to without error. The blast-radius
	// guard holds the deletions and overwrites of any other revision above
	// the policy's threshold until it is approved; absent, the first
	// revision synced is taken as applied.
	// +optional
	Applied string `json:"applied,omitempty"`

	// AppliedObjects is how many objects the policy had at its last sync
	// of Applied, as of the record's last write (written at the latest
	// once it doubles or halves): a blast radius given as a percentage is
	// of these, so that the objects a held revision creates do not
	// dilute it.
	// +optional
	AppliedObjects int `json:"appliedObjects,omitempty"`

	// Synchronize and Orphan are the policy's last known settings: a policy
	// deleted while Sprout was not running is cleaned up by them.
	// +optional
	Synchronize bool `json:"synchronize,omitempty"`
	// +optional
	Orphan bool `json:"orphan,omitempty"`

	// Activated is when Sprout first ran the policy: triggers created since
	// are admitted. For a policy from the cluster it is the policy's
	// creationTimestamp; a policy from files has none, so this keeps it.
	// +optional
	Activated *metav1.Time `json:"activated,omitempty"`

	// ActivatedVersion is the resourceVersion of the policy's creation,
	// where Sprout could tell it when it first ran the policy (a cluster
	// policy read without a policy selector, before anything but its
	// metadata was written). It orders the triggers created in Activated's
	// second, which the timestamps cannot: one whose resourceVersion is
	// lower predates the policy. Empty when unknown.
	// +optional
	ActivatedVersion string `json:"activatedVersion,omitempty"`

	// Predating are the UIDs of triggers created in Activated's second that
	// predate the policy, by their resourceVersion when Sprout first saw
	// them: kept, because a later write raises the version and would make
	// them look newer than the policy.
	// +optional
	Predating []string `json:"predating,omitempty"`

	// Resources are the resources the policy has generated objects of.
	// Each is added before the first object of it is written, so a crash
	// never leaves an object of a resource the record does not name.
	// +optional
	Resources []Resource `json:"resources,omitempty"`

	// Derived says which triggers are admitted without being listed: by the
	// policy's settings when the record was written, every matching trigger
	// (generateExisting) and those created since Activated (a rule lists
	// CREATE), or, with admission off, those created before Activated.
	// Absent, Admitted lists every admitted trigger.
	// +optional
	Derived *DerivedAdmissions `json:"derived,omitempty"`
	// Admitted are the UIDs of the other admitted triggers: those an event
	// (an operation the policy lists) admitted, and those settings since
	// changed admitted, so that a trigger stays admitted while it exists.
	// +optional
	Admitted []string `json:"admitted,omitempty"`

	// Generated are the objects a non-synchronizing policy has generated,
	// as "<trigger UID> <Kind>/<namespace>/<name>": it never generates them
	// again, so one a user deleted stays deleted. For a synchronizing
	// policy, the objects it generated that left its origin (labels
	// removed or changed, deleted) while it still wants them: it claims
	// them whatever labels they carry, and writes them back.
	// +optional
	Generated []string `json:"generated,omitempty"`

	// Shards is how many shard records hold Admitted and Generated when they
	// grow too large for one object; 0 when they are held here.
	// +optional
	Shards int `json:"shards,omitempty"`

	// ShardOf names the record this one is a shard of; empty for a main record.
	// +optional
	ShardOf string `json:"shardOf,omitempty"`
}

// DerivedAdmissions are the rules that admit triggers without a record of
// each: a policy with 10,000 triggers keeps a small record.
type DerivedAdmissions struct {
	// GenerateExisting admits every matching trigger. Both fields are
	// always written: server-side apply would turn an empty object to null.
	GenerateExisting bool `json:"generateExisting"`
	// Created admits the triggers created since the policy's activation.
	Created bool `json:"created"`
	// Existing admits the matching triggers created before the policy's
	// activation, or in its second: generateExisting with admission off,
	// where new triggers get nothing. Absent in records written before it.
	// +optional
	Existing bool `json:"existing,omitempty"`
}

// PolicyReference names a policy.
type PolicyReference struct {
	// Kind is GeneratingPolicy or NamespacedGeneratingPolicy.
	Kind string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// +optional
	UID string `json:"uid,omitempty"`
}

// Resource is a group, version and resource.
type Resource struct {
	// +optional
	Group    string `json:"group,omitempty"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

// PolicyInventoryStatus is the policy's state as Sprout last saw it.
type PolicyInventoryStatus struct {
	// Conditions hold Ready and the reason it is not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Triggers counts the admitted, matching triggers.
	// +optional
	Triggers int `json:"triggers,omitempty"`
	// Objects counts the objects the policy wants.
	// +optional
	Objects int `json:"objects,omitempty"`
	// LastHandledReconcileAt is the value of the policy's
	// reconcile.fluxcd.io/requestedAt annotation that the last sync
	// handled, as Flux's objects hold it: `sprout reconcile` waits for it.
	// Here, not on the policy, because Kyverno's status schema has no room.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// AddToScheme registers the types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PolicyInventory{}, &PolicyInventoryList{}, &PolicySource{}, &PolicySourceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// PolicySources is the resource of the PolicySource kind.
var PolicySources = GroupVersion.WithResource("policysources")

// PolicySourceKind is the kind of a source's state.
const PolicySourceKind = "PolicySource"

// PolicySource is the state of one place Sprout takes policies from: the
// cluster, a Git repository or a folder, as `sprout run`'s flags declare it.
// Sprout writes it; `kubectl get psrc` shows each source's revision, policy
// count and last error, and its Events tell what happened when.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=policysources,scope=Cluster,shortName=psrc,categories=sprout
// +kubebuilder:printcolumn:name="TYPE",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="REVISION",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="POLICIES",type=integer,JSONPath=`.status.policies`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type PolicySource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PolicySourceSpec `json:"spec"`
	// +optional
	Status PolicySourceStatus `json:"status,omitempty"`
}

// PolicySourceList is a list of PolicySource objects.
//
// +kubebuilder:object:root=true
type PolicySourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicySource `json:"items"`
}

// PolicySourceSpec says what the source is, as it was configured.
type PolicySourceSpec struct {
	// Name is the source's name in records, logs and metrics
	// ("cluster", "git:<url>", "dir:<path>", "flux:<kind>/<namespace>/<name>").
	Name string `json:"name"`
	// Type is cluster, git, directory or flux.
	// +kubebuilder:validation:Enum=cluster;git;directory;flux
	Type string `json:"type"`
	// URL is the repository of a Git source, the folder of a directory
	// source, or the <kind>/<namespace>/<name> of a Flux source.
	// +optional
	URL string `json:"url,omitempty"`
	// Ref is what a Git source follows: "branch main", "tag v1", "semver
	// >=1.0.0", "commit <sha>".
	// +optional
	Ref string `json:"ref,omitempty"`
	// Path is the folder inside the repository (or the Flux artifact) that
	// holds the policies.
	// +optional
	Path string `json:"path,omitempty"`
	// Interval is how often the source is checked.
	// +optional
	Interval string `json:"interval,omitempty"`
}

// PolicySourceStatus is what the source last did.
type PolicySourceStatus struct {
	// Conditions hold Ready: false while the last check or revision failed
	// (the last good revision keeps running meanwhile).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Revision is the revision whose policies run.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Policies counts the policies of that revision.
	// +optional
	Policies int `json:"policies,omitempty"`
	// Conflicts name the policies this source shares with another source,
	// and which of them runs.
	// +optional
	Conflicts []string `json:"conflicts,omitempty"`
}
