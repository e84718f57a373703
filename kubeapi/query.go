package kubeapi

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podsapi/podsapi/store"
)

// query is a list or watch request of a resource, read as the API server
// reads one.
type query struct {
	opts      metainternalversion.ListOptions
	res       *resource
	namespace string
}

// parseQuery reads the list options of r as the API server does
// (k8s.io/apiserver's handlers: its parameter codec, the watch-list
// defaults, the validation of list options, the field labels of the
// resource), returning the API server's errors.
func parseQuery(r *http.Request, res *resource, namespace string) (*query, error) {
	q := &query{res: res, namespace: namespace}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &q.opts); err != nil {
		return nil, errBadRequest(err)
	}
	metainternalversion.SetListOptionsDefaults(&q.opts, true)
	if errs := validation.ValidateListOptions(&q.opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if q.opts.FieldSelector != nil {
		sel, err := q.opts.FieldSelector.Transform(res.fieldLabel)
		if err != nil {
			return nil, errBadRequest(err)
		}
		q.opts.FieldSelector = sel
	}
	return q, nil
}

// matches reports whether the object version p is one the query selects.
func (q *query) matches(p *store.Pod) bool {
	if q.namespace != "" && p.Namespace != q.namespace {
		return false
	}
	if q.opts.LabelSelector != nil && !q.opts.LabelSelector.Matches(p.Labels()) {
		return false
	}
	if q.opts.FieldSelector != nil && !q.opts.FieldSelector.Matches(p.Fields()) {
		return false
	}
	return true
}
