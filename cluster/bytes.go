package cluster

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	sigsjson "sigs.k8s.io/json"
)

// identity marks metadata members a trigger's Object keeps apart, not in
// its content: a good part of a small object such as a Namespace.
type identity uint8

const (
	apartUID identity = 1 << iota
	apartResourceVersion
	apartCreated
)

// members returns, for each identity member o keeps, its JSON as the API
// server writes it, and the member's mark.
func (o *Object) members() ([3][]byte, [3]identity) {
	return [3][]byte{
			[]byte(`"uid":"` + string(o.uid) + `"`),
			[]byte(`"resourceVersion":"` + o.resourceVersion + `"`),
			[]byte(`"creationTimestamp":"` + o.Created().UTC().Format(time.RFC3339) + `"`),
		},
		[3]identity{apartUID, apartResourceVersion, apartCreated}
}

// setApart returns content less the identity members o keeps, each cut
// out where it is found exactly once as o has it (so that it is
// metadata's), and marks them apart. The result has a copy of its own.
func (o *Object) setApart(content []byte) []byte {
	members, marks := o.members()
	var cuts [][2]int
	for i, m := range members {
		if from, to, ok := memberSpan(content, m); ok {
			cuts = append(cuts, [2]int{from, to})
			o.apart |= marks[i]
		}
	}
	if len(cuts) == 0 {
		return content
	}
	slices.SortFunc(cuts, func(a, b [2]int) int { return a[0] - b[0] })
	out := make([]byte, 0, len(content))
	at := 0
	for _, c := range cuts {
		if c[0] > at {
			out = append(out, content[at:c[0]]...)
		}
		at = max(at, c[1])
	}
	return slices.Clip(append(out, content[at:]...))
}

// putBack puts the members kept apart back into m, the decoded content.
func (o *Object) putBack(m map[string]any) {
	if o.apart == 0 {
		return
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		return
	}
	if o.apart&apartUID != 0 {
		md["uid"] = string(o.uid)
	}
	if o.apart&apartResourceVersion != 0 {
		md["resourceVersion"] = o.resourceVersion
	}
	if o.apart&apartCreated != 0 {
		md["creationTimestamp"] = o.Created().UTC().Format(time.RFC3339)
	}
}

// withoutManagedFields returns raw, an object's JSON, less its metadata's
// managedFields member, whose value is managedFields as it is in raw. When
// that member is not found exactly once (a member elsewhere of that name
// and value would make the cut ambiguous), it returns raw decoded into a
// map instead, for the caller to make its Object of.
func withoutManagedFields(raw, managedFields json.RawMessage) ([]byte, map[string]any, error) {
	if len(managedFields) == 0 {
		return raw, nil, nil
	}
	member := make([]byte, 0, len(`"managedFields":`)+len(managedFields))
	member = append(append(member, `"managedFields":`...), managedFields...)
	from, to, ok := memberSpan(raw, member)
	if !ok {
		var m map[string]any
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil {
			return nil, nil, err
		}
		return nil, m, nil
	}
	out := make([]byte, 0, len(raw)-(to-from))
	out = append(out, raw[:from]...)
	return append(out, raw[to:]...), nil, nil
}

// memberSpan returns where member, an object member's JSON, is in raw,
// with the comma that separates it from a neighbour, when it is there
// exactly once: then it is the member looked for, however deep (inside
// strings, quotes are escaped, so only members can match).
//
// A member is found by its key first, which is short: bytes.Index is fast
// for short needles and slow for long ones (a Namespace's managed fields
// are a few hundred bytes), and the key found once answers for the member.
func memberSpan(raw, member []byte) (from, to int, ok bool) {
	key := member
	if i := bytes.Index(member, []byte(`":`)); i > 0 {
		key = member[:i+2]
	}
	from = bytes.Index(raw, key)
	if from < 0 {
		return 0, 0, false
	}
	if !bytes.HasPrefix(raw[from:], member) {
		from = bytes.Index(raw, member)
	}
	if from < 0 || (bytes.Contains(raw[from+1:], key) && bytes.Contains(raw[from+1:], member)) {
		return 0, 0, false
	}
	to = from + len(member)
	switch {
	case from > 0 && raw[from-1] == ',':
		from--
	case to < len(raw) && raw[to] == ',':
		to++
	}
	return from, to, true
}
