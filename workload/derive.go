package workload

import "strings"

// podTemplateHashLabel is the label a Deployment's ReplicaSet gives its pods
// (appsv1.DefaultDeploymentUniqueLabelKey).
const podTemplateHashLabel = "pod-template-hash"

// derive returns the workload the names of a pod's ReplicaSet or Job tell,
// marked Derived, or the owner itself, marked Unresolved, when they tell
// nothing.
//
//   - A ReplicaSet named "<deployment>-<hash>", where hash is the pod's
//     pod-template-hash label, is the Deployment's: the Deployment
//     controller names its ReplicaSets so.
//   - A Job named "<cronjob>-<minutes>", where minutes is 8 to 10 digits,
//     is the CronJob's: the CronJob controller names its Jobs after the
//     scheduled time in minutes since the Unix epoch (8 digits from 1973 to
//     2160). A bare Job named so is mistaken for a CronJob's; the API
//     server's answer, once it comes, replaces the derivation.
func derive(kind, name, templateHash string) Workload {
	switch kind {
	case KindReplicaSet:
		if base, ok := strings.CutSuffix(name, "-"+templateHash); ok && templateHash != "" && base != "" {
			return Workload{Kind: KindDeployment, Name: base, Resolution: Derived}
		}
	case KindJob:
		if i := strings.LastIndexByte(name, '-'); i > 0 && isMinutes(name[i+1:]) {
			return Workload{Kind: KindCronJob, Name: name[:i], Resolution: Derived}
		}
	}
	return Workload{Kind: kind, Name: name, Resolution: Unresolved}
}

// isMinutes reports whether s is 8 to 10 decimal digits.
func isMinutes(s string) bool {
	if len(s) < 8 || len(s) > 10 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
