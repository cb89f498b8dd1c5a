package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// inventoryReport is what `sprout inventory -o json` and `-o yaml` print; its
// fields are documented in docs/cli.md and only ever added to.
type inventoryReport struct {
	Policies []policyReport `json:"policies"`
}

// policyReport is one policy: its record, and the objects it owns grouped
// by trigger.
type policyReport struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Source    string `json:"source,omitempty"`
	Revision  string `json:"revision,omitempty"`
	// Ready, Reason and Message are the record's Ready condition; Ready is
	// Unknown when the record has none yet.
	Ready       string          `json:"ready"`
	Reason      string          `json:"reason,omitempty"`
	Message     string          `json:"message,omitempty"`
	Synchronize bool            `json:"synchronize"`
	Triggers    []triggerReport `json:"triggers"`
}

// triggerReport is one trigger, as its objects' labels name it, and the
// objects generated for it.
type triggerReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	// Name is the trigger's name; for a trigger that no longer exists and
	// whose name is longer than 63 characters, its encoded label value.
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Exists is whether an object of the trigger's kind and namespace has UID.
	Exists  bool           `json:"exists"`
	Objects []objectReport `json:"objects"`
}

// objectReport is one object Sprout generated.
type objectReport struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Namespace  string      `json:"namespace,omitempty"`
	Name       string      `json:"name"`
	State      objectState `json:"state,omitempty"`
}

// objectState is an object's sync state, as `sprout inventory --help`
// defines each.
type objectState string

// The closed set of states.
const (
	stateSynced        objectState = "synced"
	stateDrifted       objectState = "drifted"
	stateOrphaned      objectState = "orphaned"
	stateGeneratedOnce objectState = "generated-once"
)

// ref names the trigger as Kind/namespace/name (Kind/name when cluster-scoped).
func (t triggerReport) ref() string { return kindRef(t.Kind, t.Namespace, t.Name) }

// ref names the object as Kind/namespace/name (Kind/name when cluster-scoped).
func (o objectReport) ref() string { return kindRef(o.Kind, o.Namespace, o.Name) }

func kindRef(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

func (p policyReport) ref() sproutv1alpha1.PolicyReference {
	return sproutv1alpha1.PolicyReference{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
}

// newTable returns a writer that aligns tab-separated columns as kubectl does.
func newTable(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
}

// printInventorySummary prints one row per policy, or the whole report as
// JSON or YAML.
func printInventorySummary(out, errOut io.Writer, r inventoryReport, format, namespace string) error {
	if format != "table" {
		return printReport(out, r, format)
	}
	if len(r.Policies) == 0 {
		where := ""
		if namespace != "" {
			where = " of policies in namespace " + namespace
		}
		_, err := fmt.Fprintf(errOut, "no PolicyInventory records%s\n", where)
		return err
	}
	w := newTable(out)
	fmt.Fprintln(w, "KIND\tNAMESPACE\tNAME\tSOURCE\tREVISION\tREADY\tSYNC\tTRIGGERS\tOBJECTS")
	for _, p := range r.Policies {
		sync, objects := "off", 0
		if p.Synchronize {
			sync = "on"
		}
		for _, t := range p.Triggers {
			objects += len(t.Objects)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n",
			p.Kind, p.Namespace, p.Name, p.Source, p.Revision, p.Ready, sync, len(p.Triggers), objects)
	}
	return w.Flush()
}

// printPolicyInventory prints one row per object of the report's one
// policy, trigger by trigger, or the report as JSON or YAML.
func printPolicyInventory(out, errOut io.Writer, r inventoryReport, format string) error {
	if format != "table" {
		return printReport(out, r, format)
	}
	p := r.Policies[0]
	if len(p.Triggers) == 0 {
		_, err := fmt.Fprintf(errOut, "%s owns no objects\n", policyID(p.ref()))
		return err
	}
	w := newTable(out)
	fmt.Fprintln(w, "TRIGGER\tKIND\tNAMESPACE\tNAME\tSTATE")
	for _, t := range p.Triggers {
		for _, o := range t.Objects {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ref(), o.Kind, o.Namespace, o.Name, o.State)
		}
	}
	return w.Flush()
}

// printReport writes the report as indented JSON or as YAML.
func printReport(out io.Writer, r inventoryReport, format string) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	data, err := yaml.Marshal(r)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}
