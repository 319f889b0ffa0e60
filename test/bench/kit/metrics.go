package kit

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Metrics is one scrape of a Prometheus text endpoint: each sample's value
// by its series, written as the endpoint writes it (`name` or
// `name{label="value",...}`).
type Metrics map[string]float64

// metricsClient reads metrics endpoints on loopback, kube-controller-manager's
// self-signed HTTPS one included.
var metricsClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback, self-signed
}

// Scrape reads the Prometheus text exposition at url.
func Scrape(ctx context.Context, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads the Prometheus text format: comments are skipped,
// timestamps dropped.
func ParseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		if line[end] == '{' {
			close := strings.LastIndexByte(line, '}')
			if close < end {
				continue
			}
			end = close + 1
		}
		f := strings.Fields(line[end:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m[line[:end]] = v
	}
	return m, sc.Err()
}

// Sum adds the samples of metric name whose labels include every
// `key="value"` pair given (all of its samples when none is).
func (m Metrics) Sum(name string, labels ...string) float64 {
	total := 0.0
	for series, v := range m {
		base, rest, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(","+strings.TrimSuffix(rest, "}")+",", ","+l+",") {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// FreeAddr returns a loopback address with a port nobody listens on now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
