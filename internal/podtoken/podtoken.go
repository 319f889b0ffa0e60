// Package podtoken gives a process outside the cluster the identity a
// Deployment's Pod would have: a Pod object of the Deployment and a token of
// its ServiceAccount bound to that Pod by TokenRequest. The process then
// authenticates as the operator really does, with no impersonation, so
// kube-apiserver accepts and rejects it as it would the real Pod: the token
// stops working once the ServiceAccount or the Pod is gone, or has had a
// deletionTimestamp for more than a minute (Kubernetes v1.37.2,
// pkg/serviceaccount/claims.go).
//
// The local control plane runs no kubelet, scheduler, deployment or
// replicaset controller: New creates the ReplicaSet and the Pod the way
// those controllers would (a controller ownerReference each), so that the
// garbage collector deletes them once the Deployment is gone. The Pod never
// starts; it only carries the identity.
package podtoken

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Identity is a Pod of a Deployment and a token of its ServiceAccount bound
// to it.
type Identity struct {
	// Pod is the Pod object the token is bound to.
	Pod *corev1.Pod
	// Username is the token's user, system:serviceaccount:NS:NAME.
	Username string
	// Config reaches the API server with the token as its only credential.
	Config *rest.Config
}

// TTL is how long the token is valid, at most: far longer than any test
// or demo, so that only the ServiceAccount's or the Pod's deletion ends it.
const TTL = time.Hour

// New creates, through admin, a ReplicaSet of the Deployment namespace/name
// and a Pod of that ReplicaSet, requests a token for the Pod's
// ServiceAccount bound to the Pod, and returns the identity.
func New(ctx context.Context, admin *rest.Config, namespace, name string) (*Identity, error) {
	return NewOnNode(ctx, admin, namespace, name, "")
}

// NewOnNode is New with the Pod bound to node, as the scheduler would bind
// it: the deletion of a Pod bound to a node is graceful (it keeps a
// deletionTimestamp until its kubelet, or whoever plays it, deletes it
// again with no grace period), while an unbound Pod goes at once.
func NewOnNode(ctx context.Context, admin *rest.Config, namespace, name, node string) (*Identity, error) {
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	dep, err := kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading deployment %s/%s: %w", namespace, name, err)
	}
	pod, err := podOf(ctx, kube, dep, node)
	if err != nil {
		return nil, err
	}
	return tokenFor(ctx, admin, kube, pod)
}

// NewForOwner creates, through admin, a Pod in namespace from tmpl whose
// controller is owner, as the owner's controller would (a DaemonSet's or a
// Job's: neither controller runs on the local control plane), requests a
// token of its ServiceAccount bound to it, and returns the identity.
func NewForOwner(ctx context.Context, admin *rest.Config, namespace string, owner metav1.OwnerReference, tmpl corev1.PodTemplateSpec) (*Identity, error) {
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    owner.Name + "-",
			Namespace:       namespace,
			Labels:          tmpl.Labels,
			Annotations:     tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{controllerRef(owner.APIVersion, owner.Kind, owner.Name, owner.UID)},
		},
		Spec: tmpl.Spec,
	}
	pod, err = kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a pod of %s %s/%s: %w", owner.Kind, namespace, owner.Name, err)
	}
	return tokenFor(ctx, admin, kube, pod)
}

// tokenFor requests a token of pod's ServiceAccount bound to pod.
func tokenFor(ctx context.Context, admin *rest.Config, kube kubernetes.Interface, pod *corev1.Pod) (*Identity, error) {
	namespace := pod.Namespace
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To(int64(TTL / time.Second)),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token of serviceaccount %s/%s bound to pod %s: %w", namespace, sa, pod.Name, err)
	}
	return &Identity{
		Pod:      pod,
		Username: "system:serviceaccount:" + namespace + ":" + sa,
		Config:   Config(admin, tr.Status.Token),
	}, nil
}

// podOf creates a ReplicaSet owned by dep and a Pod owned by that
// ReplicaSet, both from dep's Pod template, as the deployment and
// replicaset controllers would.
func podOf(ctx context.Context, kube kubernetes.Interface, dep *appsv1.Deployment, node string) (*corev1.Pod, error) {
	tmpl := dep.Spec.Template
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    dep.Name + "-",
			Namespace:       dep.Namespace,
			Labels:          tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", dep.Name, dep.UID)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(1)), Selector: dep.Spec.Selector, Template: tmpl},
	}
	rs, err := kube.AppsV1().ReplicaSets(dep.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a replicaset of deployment %s/%s: %w", dep.Namespace, dep.Name, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       dep.Namespace,
			Labels:          tmpl.Labels,
			Annotations:     tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)},
		},
		Spec: tmpl.Spec,
	}
	pod.Spec.NodeName = node
	pod, err = kube.CoreV1().Pods(dep.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a pod of replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return pod, nil
}

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// Config is admin's server and CA with token as the only credential: no
// client certificate, no impersonation.
func Config(admin *rest.Config, token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	return cfg
}

// Kubeconfig is the identity as a kubeconfig file's contents, for a
// process: the server, its CA and the token, nothing else.
func (id *Identity) Kubeconfig() ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: id.Config.Host, CertificateAuthority: id.Config.CAFile, CertificateAuthorityData: id.Config.CAData}
	kc.AuthInfos["pod"] = &clientcmdapi.AuthInfo{Token: id.Config.BearerToken}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "pod", Namespace: id.Pod.Namespace}
	kc.CurrentContext = "local"
	return clientcmd.Write(*kc)
}
