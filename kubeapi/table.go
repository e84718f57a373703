package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1beta1/validation"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podsapi/podsapi/internal/podtable"
	"github.com/podsapi/podsapi/store"
)

// A Table (kubectl's as=Table) shows the API server's columns of the
// resource (internal/podtable, internal/kindtable). A pod row's cells but
// for the ages (of the pod, of its last restart) are computed once per pod
// version and kept in its views (rowKey); the rows of other kinds, a few
// fields, are computed for each answer; the ages are the time of the
// answer, so a table is encoded for each answer, as the API server encodes
// one.

// rowKey is the key of a pod version's podtable.Row among its views.
const rowKey = "kubeapi/table/row"

// parseTableOptions reads the table options of r (includeObject) as the API
// server does, returning its errors.
func parseTableOptions(r *http.Request) (*metav1.TableOptions, error) {
	opts := &metav1.TableOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return nil, errBadRequest(err)
	}
	switch errs := validation.ValidateTableOptions(opts); len(errs) {
	case 0:
		return opts, nil
	case 1:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
}

// row returns the row of p, a version of an object of res: for a pod, its
// podtable.Row, computed once per pod version.
func (h *Handler) row(res *resource, p *store.Pod) (tableCells, error) {
	if res.name != "pods" {
		obj, err := res.decode(p.Raw(), "")
		if err != nil {
			return nil, err
		}
		return res.rowOf(obj), nil
	}
	b, err := p.View(rowKey, func(raw []byte) ([]byte, error) {
		h.encodes.Add(1)
		pod, err := decode(raw, "")
		if err != nil {
			return nil, err
		}
		return json.Marshal(podtable.RowOf(pod))
	})
	if err != nil {
		return nil, err
	}
	var r podtable.Row
	err = json.Unmarshal(b, &r)
	return r, err
}

// tableRow is one row of a table: the object's cells and the encoding of
// the object the row carries (nil for none).
type tableRow struct {
	row    tableCells
	object []byte
}

// tableRowOf returns the row of p, of res, at the store version version,
// with the object opts asks for: its PartialObjectMetadata in the table's
// group version (includeObject Metadata, the default), the object
// (Object), or none (None).
func (h *Handler) tableRowOf(res *resource, fm form, opts *metav1.TableOptions, p *store.Pod, version uint64) (tableRow, error) {
	r, err := h.row(res, p)
	if err != nil {
		return tableRow{}, err
	}
	var obj []byte
	switch opts.IncludeObject {
	case metav1.IncludeNone:
	case metav1.IncludeObject:
		obj, err = h.object(res, form{format: fm.format}, p, version)
	default:
		obj, err = h.object(res, form{format: fm.format, as: asPartial, gv: fm.gv}, p, version)
	}
	return tableRow{row: r, object: bytes.TrimSuffix(obj, []byte("\n"))}, err
}

// bookmarkRow returns the row of a BOOKMARK's object obj, of res, as the
// API server turns one into a table: the row of an empty object, carrying
// its metadata when it marks the end of the initial events or opts asks for
// metadata.
func bookmarkRow(res *resource, fm form, opts *metav1.TableOptions, obj object) (tableRow, error) {
	tr := tableRow{row: res.rowOf(obj)}
	_, end := obj.GetObjectMeta().GetAnnotations()[metav1.InitialEventsAnnotationKey]
	var err error
	switch {
	case opts.IncludeObject == metav1.IncludeObject:
		tr.object, err = encodeObject(form{format: fm.format}, obj)
	case opts.IncludeObject != metav1.IncludeNone || end:
		tr.object, err = encodeObject(form{format: fm.format, as: asPartial, gv: fm.gv}, obj)
	}
	tr.object = bytes.TrimSuffix(tr.object, []byte("\n"))
	return tr, err
}

// encodeTable returns the encoding in fm of a Table of rows of res at time
// now, with the column definitions unless noHeaders.
func encodeTable(res *resource, fm form, meta metav1.ListMeta, rows []tableRow, noHeaders bool, now time.Time) ([]byte, error) {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: fm.gv.String()},
		ListMeta: meta,
		Rows:     make([]metav1.TableRow, 0, len(rows)),
	}
	if !noHeaders {
		t.ColumnDefinitions = res.columns()
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:      r.row.Cells(now),
			Conditions: r.row.Conditions(),
			Object:     runtime.RawExtension{Raw: r.object},
		})
	}
	var b bytes.Buffer
	if err := fm.plain.Encode(t, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
