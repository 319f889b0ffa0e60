package conditions

import (
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// Set sets c in conds, observed at generation gen, and reports whether it
// changed (its status, reason, message or generation). The transition time
// moves only when the status does (meta.SetStatusCondition).
func Set(conds *[]metav1.Condition, gen int64, c metav1.Condition) bool {
	c.ObservedGeneration = gen
	return apimeta.SetStatusCondition(conds, c)
}

// Ready sums domain up, in order: while any condition in it is bad, False
// with the reason of the first bad one and the messages of every bad one,
// joined by "; "; otherwise ok, True. Its ObservedGeneration is ok's.
func Ready(ok metav1.Condition, bad func(metav1.Condition) bool, domain ...metav1.Condition) metav1.Condition {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ok.Reason, Message: ok.Message, ObservedGeneration: ok.ObservedGeneration}
	var messages []string
	for _, c := range domain {
		if !bad(c) {
			continue
		}
		if ready.Status == metav1.ConditionTrue {
			ready.Status, ready.Reason = metav1.ConditionFalse, c.Reason
		}
		messages = append(messages, c.Message)
	}
	if ready.Status == metav1.ConditionFalse {
		ready.Message = strings.Join(messages, "; ")
	}
	return ready
}

// NotTrue is the bad of Ready for conditions that are good when True.
func NotTrue(c metav1.Condition) bool { return c.Status != metav1.ConditionTrue }
