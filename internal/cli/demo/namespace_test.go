package demo

import "testing"

// TestLogMessage reads the operator's log lines (controller-runtime's zap
// development format) as the demo prints them.
func TestLogMessage(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{
			name: "info with a logger and fields",
			line: "2026-12-03T08:44:50Z\tINFO\tcontrollers.Helm\tRelease not found, removing finalizer\t{\"foo\": {\"name\":\"myfoo\",\"namespace\":\"foohome\"}}",
			want: "Release not found, removing finalizer (controllers.Helm)",
		},
		{
			name: "error without a logger: the error field is the news",
			line: "2026-12-03T08:44:50Z\tERROR\tReconciler error\t{\"controller\": \"foo-controller\", \"error\": \"uninstallation completed with 1 error(s): uninstall: Failed to purge the release: release: not found\", \"errorVerbose\": \"stack\\ntrace\"}",
			want: "Reconciler error: uninstallation completed with 1 error(s): uninstall: Failed to purge the release: release: not found",
		},
		{
			name: "not a log line: as it is",
			line: "panic: something",
			want: "panic: something",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := logMessage(tt.line); got != tt.want {
				t.Errorf("logMessage(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}
