// Package localcluster builds and runs a real Kubernetes control plane on
// loopback: etcd, kube-apiserver and kube-controller-manager, built once from
// the Go module proxy at pinned versions and cached.
//
// Unlike envtest it runs kube-controller-manager, so the garbage collector
// and the namespace controller do their work: ownerReference dependents are
// collected and deleted namespaces really empty and disappear. It is
// teardown's default cluster for the demo and for every integration test,
// and any project can use it from a TestMain:
//
//	func TestMain(m *testing.M) {
//		c, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		cfg = c.RESTConfig()
//		code := m.Run()
//		_ = c.Stop()
//		os.Exit(code)
//	}
//
// The components run as children of the calling process: the kernel kills
// them if it dies, and SIGINT or SIGTERM stops them and removes their
// directory before the process exits. Options.Detach leaves them running
// instead (teardown local up); Attach finds them again.
package localcluster
