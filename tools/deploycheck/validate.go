package deploycheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/kubectl-validate/pkg/openapiclient"
	"sigs.k8s.io/kubectl-validate/pkg/utils"
	"sigs.k8s.io/kubectl-validate/pkg/validator"
	"sigs.k8s.io/yaml"
)

// specFile matches the names of the OpenAPI v3 files of the Kubernetes
// repository (api/openapi-spec/v3): api__v1_openapi.json,
// apis__apps__v1_openapi.json.
var specFile = regexp.MustCompile(`^(api|apis__(.+))__([a-z0-9]+)_openapi\.json$`)

// NewValidator returns a validator of the built-in kinds by the OpenAPI v3
// files of specDir (a Kubernetes repository's api/openapi-spec/v3), laid out
// in a temporary directory as kubectl-validate reads local schemas
// (api/VERSION.json, apis/GROUP/VERSION.json); cleanup removes it.
func NewValidator(specDir string) (v *validator.Validator, cleanup func(), err error) {
	entries, err := os.ReadDir(specDir)
	if err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "openapi")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	n := 0
	for _, e := range entries {
		m := specFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		dst := filepath.Join(tmp, "api", m[3]+".json")
		if m[2] != "" {
			dst = filepath.Join(tmp, "apis", m[2], m[3]+".json")
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			cleanup()
			return nil, nil, err
		}
		if err := os.Symlink(filepath.Join(specDir, e.Name()), dst); err != nil {
			cleanup()
			return nil, nil, err
		}
		n++
	}
	if n == 0 {
		cleanup()
		return nil, nil, fmt.Errorf("%s holds no OpenAPI v3 file of Kubernetes (api__v1_openapi.json, ...)", specDir)
	}
	v, err = validator.New(openapiclient.NewLocalSchemaFiles(os.DirFS(tmp)))
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return v, cleanup, nil
}

// Object is one validated document of a rendering.
type Object struct {
	Kind, Namespace, Name string
	Raw                   []byte
}

// Validate validates every document of a rendering: built-in kinds by the
// validator (unknown and duplicate fields are errors, as with kubectl's
// strict field validation), the Prometheus Operator's PodMonitor by strict
// decoding into its Go type (the operator's CRD is not shipped here).
func Validate(v *validator.Validator, rendered []byte) ([]Object, error) {
	docs, err := utils.SplitYamlDocuments(rendered)
	if err != nil {
		return nil, err
	}
	var objs []Object
	var errs []error
	for _, doc := range docs {
		if utils.IsEmptyYamlDocument(doc) {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			errs = append(errs, err)
			continue
		}
		name := meta.Kind + " " + meta.Metadata.Namespace + "/" + meta.Metadata.Name
		switch meta.APIVersion {
		case "monitoring.coreos.com/v1":
			if meta.Kind != "PodMonitor" {
				errs = append(errs, fmt.Errorf("%s: not a PodMonitor", name))
				break
			}
			var pm monitoringv1.PodMonitor
			if err := yaml.UnmarshalStrict(doc, &pm); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		default:
			_, obj, err := v.Parse(doc)
			if err == nil {
				err = v.Validate(obj)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
		objs = append(objs, Object{Kind: meta.Kind, Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name, Raw: doc})
	}
	return objs, errors.Join(errs...)
}
