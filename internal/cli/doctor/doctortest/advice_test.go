package doctortest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAdviceCommands(t *testing.T) {
	out := `    set by:     kubectl, from a manifest or by hand (field manager kubectl-edit): not the controller that removes it
    running:    unknown: kubectl wrote it from a manifest or by hand, so managedFields do not say which controller removes it
      - nothing to do: kubectl get teardown op -o yaml shows each step's progress
      - only if the plan must not run to its end: kubectl delete clusterlien teardown-op lets these go now
      - find out: kubectl get deployments,statefulsets,daemonsets,pods -A | grep -i longhorn, or its documentation)
      - only if gone: kubectl patch replica.longhorn.io r1 -n ns --type=json -p '[{"op":"test","path":"/metadata/finalizers/0","value":"longhorn.io"},{"op":"remove","path":"/metadata/finalizers/0"}]' (for each object); this skips
      - kubectl get namespace ns -o json | jq '.spec.finalizers -= ["x"]' | kubectl replace --raw /api/v1/namespaces/ns/finalize -f -
      - confirm (its machine is off or gone: kubectl get node n1 -o wide, the cloud console); then: kubectl taint node n1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute; kube-controller-manager
      - if nothing needs them: kubectl --as=me --as-group=g1 --as-group=teardown.dev:break-glass label secret/s -n ns teardown.dev/lien- removes the protection
      - kubectl describe lien keep -n app
`
	want := []string{
		"kubectl get teardown op -o yaml",
		"kubectl delete clusterlien teardown-op",
		"kubectl get deployments,statefulsets,daemonsets,pods -A",
		`kubectl patch replica.longhorn.io r1 -n ns --type=json -p '[{"op":"test","path":"/metadata/finalizers/0","value":"longhorn.io"},{"op":"remove","path":"/metadata/finalizers/0"}]'`,
		"kubectl get namespace ns -o json",
		"kubectl replace --raw /api/v1/namespaces/ns/finalize -f -",
		"kubectl get node n1 -o wide",
		"kubectl taint node n1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
		"kubectl --as=me --as-group=g1 --as-group=teardown.dev:break-glass label secret/s -n ns teardown.dev/lien-",
		"kubectl describe lien keep -n app",
	}
	if diff := cmp.Diff(want, AdviceCommands(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
