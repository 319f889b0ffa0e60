// Command operator is an example operator that uninstalls itself in order
// with teardown's SelfUninstall: when its Deployment is deleted (helm
// uninstall, kubectl delete), it inhibits its webhooks, deletes its Widgets
// everywhere and waits for their finalizers (its own reconciler removes
// them), deletes what it generated in other namespaces, and only then lets
// its Deployment and its RBAC go.
//
// The Deployment sets POD_NAMESPACE and POD_NAME from the downward API:
//
//	env:
//	- name: POD_NAMESPACE
//	  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
//	- name: POD_NAME
//	  valueFrom: {fieldRef: {fieldPath: metadata.name}}
package main

import (
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/teardown/runner"
)

// plan is the operator's uninstall.
var plan = &v1alpha1.Teardown{
	ObjectMeta: metav1.ObjectMeta{Name: "widget-operator"},
	Spec: v1alpha1.TeardownSpec{
		KeepUntilDone: []v1alpha1.ClusterLienTarget{
			{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "widget-operator"},
			{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: "widget-operator"},
		},
		Steps: []v1alpha1.TeardownStep{
			{Name: "inhibit-webhooks", InhibitWebhooks: &v1alpha1.InhibitWebhooksAction{Names: []string{"widget-operator-webhook"}}},
			{Name: "delete-widgets", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{
				APIVersion: "example.com/v1", Kind: "Widget", AllNamespaces: true, Selector: &metav1.LabelSelector{}}},
				Timeout: &metav1.Duration{Duration: 5 * time.Minute}},
			{Name: "delete-generated", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{
				APIVersion: "v1", Kind: "ConfigMap", AllNamespaces: true,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/managed-by": "widget-operator"}}}}},
			{Name: "delete-webhooks", InhibitWebhooks: &v1alpha1.InhibitWebhooksAction{Names: []string{"widget-operator-webhook"}, Action: v1alpha1.WebhookDelete}},
		},
	},
}

func main() {
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("widget-operator")
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:           scheme,
		LeaderElection:   true,
		LeaderElectionID: "widget-operator.example.com",
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	// ... register the operator's own reconcilers here ...
	if err := runner.SelfUninstall(mgr, plan); err != nil {
		log.Error(err, "setting up self-uninstall")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
