package v2beta1

import (
	"net/url"
	"time"

	"github.com/kyverno/go-jmespath"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of an entry, beyond Kyverno's CRD: each projection is evaluated at
// every change of the data, and each refresh is a call.
const (
	// MaxProjections bounds the projections of one entry.
	MaxProjections = 32
	// MaxJMESPathBytes bounds one projection's expression.
	MaxJMESPathBytes = 4096
	// MinRefreshInterval is the shortest poll of an API call.
	MinRefreshInterval = time.Second
	// MaxRetryLimit bounds the tries of one refresh.
	MaxRetryLimit = 10
	// DefaultRefreshInterval and DefaultRetryLimit are Kyverno's CRD
	// defaults, for an entry no API server defaulted.
	DefaultRefreshInterval = 10 * time.Minute
	DefaultRetryLimit      = 3
)

// Validate reports what makes the entry unusable, each error naming its
// field.
func (e *GlobalContextEntry) Validate() field.ErrorList {
	spec, path := &e.Spec, field.NewPath("spec")
	var errs field.ErrorList
	switch {
	case spec.KubernetesResource != nil && spec.APICall != nil:
		errs = append(errs, field.Forbidden(path.Child("apiCall"), "an entry has either kubernetesResource or apiCall, not both"))
	case spec.KubernetesResource != nil:
		errs = append(errs, spec.KubernetesResource.validate(path.Child("kubernetesResource"))...)
	case spec.APICall != nil:
		errs = append(errs, spec.APICall.validate(path.Child("apiCall"))...)
	default:
		errs = append(errs, field.Required(path.Child("kubernetesResource"), "an entry needs kubernetesResource or apiCall"))
	}
	if len(spec.Projections) > MaxProjections {
		errs = append(errs, field.TooMany(path.Child("projections"), len(spec.Projections), MaxProjections))
	}
	seen := map[string]bool{}
	for i, p := range spec.Projections {
		pp := path.Child("projections").Index(i)
		switch {
		case p.Name == "":
			errs = append(errs, field.Required(pp.Child("name"), "a projection needs a name"))
		case p.Name == e.Name:
			errs = append(errs, field.Invalid(pp.Child("name"), p.Name, "a projection's name must differ from the entry's"))
		case seen[p.Name]:
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		seen[p.Name] = true
		errs = append(errs, validJMESPath(pp.Child("jmesPath"), p.JMESPath)...)
	}
	return errs
}

func validJMESPath(path *field.Path, expr string) field.ErrorList {
	switch {
	case expr == "":
		return field.ErrorList{field.Required(path, "a projection needs a JMESPath expression")}
	case len(expr) > MaxJMESPathBytes:
		return field.ErrorList{field.TooLong(path, "", MaxJMESPathBytes)}
	}
	if _, err := jmespath.Compile(expr); err != nil {
		return field.ErrorList{field.Invalid(path, expr, err.Error())}
	}
	return nil
}

func (k *KubernetesResource) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if k.Version == "" {
		errs = append(errs, field.Required(path.Child("version"), ""))
	}
	if k.Resource == "" {
		errs = append(errs, field.Required(path.Child("resource"), ""))
	}
	// Kyverno's rule: only the core group's v1 goes without a group.
	if k.Group == "" && k.Version != "" && k.Version != "v1" {
		errs = append(errs, field.Required(path.Child("group"), "only the core group (version v1) has no group"))
	}
	return errs
}

func (c *ExternalAPICall) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.URLPath != "" && c.Service != nil:
		errs = append(errs, field.Forbidden(path.Child("service"), "an apiCall has either urlPath or service, not both"))
	case c.URLPath != "":
		if _, ok := c.Read(); !ok {
			errs = append(errs, field.Invalid(path.Child("urlPath"), c.URLPath,
				"want the path of a resource or of one object, such as /api/v1/namespaces/default/configmaps: "+
					"it is read with each reading policy's rights, which a subresource, a watch or a non-resource path cannot be checked against"))
		}
		if c.Method == "POST" {
			errs = append(errs, field.Forbidden(path.Child("method"), "a urlPath is only read (GET): Sprout writes no object for an entry"))
		}
	case c.Service == nil:
		errs = append(errs, field.Required(path.Child("service"), "an apiCall needs a service"))
	default:
		if u, err := url.Parse(c.Service.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(path.Child("service", "url"), c.Service.URL, "want an http or https URL"))
		}
	}
	switch c.Method {
	case "", "GET":
		if len(c.Data) > 0 {
			errs = append(errs, field.Forbidden(path.Child("data"), "data is sent only with method POST"))
		}
	case "POST":
	default:
		errs = append(errs, field.NotSupported(path.Child("method"), c.Method, []string{"GET", "POST"}))
	}
	if c.RefreshInterval != nil && c.RefreshInterval.Duration < MinRefreshInterval {
		errs = append(errs, field.Invalid(path.Child("refreshInterval"), c.RefreshInterval.Duration.String(),
			"must be at least "+MinRefreshInterval.String()))
	}
	if c.RetryLimit < 0 || c.RetryLimit > MaxRetryLimit {
		errs = append(errs, field.Invalid(path.Child("retryLimit"), c.RetryLimit, "must be between 1 and 10"))
	}
	return errs
}

// Interval is how often the call is made.
func (c *ExternalAPICall) Interval() time.Duration {
	if c.RefreshInterval == nil || c.RefreshInterval.Duration == 0 {
		return DefaultRefreshInterval
	}
	return c.RefreshInterval.Duration
}

// Tries is how many times one refresh tries the call.
func (c *ExternalAPICall) Tries() int {
	if c.RetryLimit <= 0 {
		return DefaultRetryLimit
	}
	return c.RetryLimit
}
