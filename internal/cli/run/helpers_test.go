package run

import (
	"os"
	"strings"
)

func writeFile(name, data string) error { return os.WriteFile(name, []byte(data), 0o644) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
