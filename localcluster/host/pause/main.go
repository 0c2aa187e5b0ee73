// Command pause is the real node's sandbox ("pause") image and its test probe, in one static binary.
//
// Built by cogate.localcluster.host.pauseimage (Go standard library only, CGO_ENABLED=0) and packed as
// the OCI image localhost/cogate/pause:<hash>, the only binary in it (/pause).
//
//	/pause                      sandbox: wait for SIGTERM or SIGINT, reap children, exit 0
//	/pause apicheck             as a pod: call the API server through the `kubernetes` Service
//	                            ($KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT) with the pod's
//	                            ServiceAccount token and CA; GET /healthz, then POST a
//	                            SelfSubjectReview; print the user name; exit 0, or 1 on any failure
//	/pause webhook CERT KEY     serve HTTPS on :8443: GET /healthz -> 200; POST /validate
//	                            (AdmissionReview v1) -> denied, message
//	                            "denied by the cogate node probe: <kind> <namespace>/<name>"
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) < 2 {
		pause()
		return
	}
	switch os.Args[1] {
	case "apicheck":
		if err := apicheck(); err != nil {
			fmt.Fprintln(os.Stderr, "apicheck:", err)
			os.Exit(1)
		}
	case "webhook":
		if len(os.Args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: pause webhook CERT KEY")
			os.Exit(2)
		}
		if err := webhook(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "webhook:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q (expected none, apicheck or webhook)\n", os.Args[1])
		os.Exit(2)
	}
}

func pause() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}

func apicheck() error {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return fmt.Errorf("KUBERNETES_SERVICE_HOST/PORT not set")
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "kubernetes.default.svc"}}}
	base := "https://" + net.JoinHostPort(host, port)
	call := func(method, path string, body []byte) ([]byte, error) {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, out)
		}
		return out, nil
	}
	if _, err := call("GET", "/healthz", nil); err != nil {
		return err
	}
	out, err := call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
		[]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		return err
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &review); err != nil {
		return err
	}
	fmt.Printf("apicheck ok: %s via %s as %s\n", "/healthz", base, review.Status.UserInfo.Username)
	return nil
}

func webhook(certFile, keyFile string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Request    struct {
				UID       string `json:"uid"`
				Kind      struct{ Kind string } `json:"kind"`
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := review.Request
		msg := fmt.Sprintf("denied by the cogate node probe: %s %s/%s", req.Kind.Kind, req.Namespace, req.Name)
		fmt.Println(msg)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
			"response": map[string]any{"uid": req.UID, "allowed": false,
				"status": map[string]any{"code": 403, "message": msg}},
		})
	})
	server := &http.Server{Addr: ":8443", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		server.Close()
	}()
	if err := server.ListenAndServeTLS(certFile, keyFile); err != http.ErrServerClosed {
		return err
	}
	return nil
}
