package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/netio/certs"
)

// clusterCommand runs `regent cluster status|add-voter|remove-voter`
// against a node's admin endpoint, or `regent cluster secret`, and returns
// the exit status.
func clusterCommand(args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, `usage:
  regent cluster status       --admin host:port
  regent cluster add-voter    --admin host:port --id N --kafka host:port --raft host:port [--node-admin host:port]
  regent cluster remove-voter --admin host:port --id N
  regent cluster secret       print a new random cluster secret (for --cluster-secret-file)
with cluster links over mutual TLS, add --tls-cert F --tls-key F --tls-ca F
(a certificate the cluster CA signed); with a cluster secret, add
--secret-file F (the nodes' --cluster-secret-file) to add-voter and remove-voter`)
		return 2
	}
	if len(args) == 0 {
		return usage()
	}
	if args[0] == "secret" {
		if len(args) != 1 {
			return usage()
		}
		fmt.Fprintln(stdout, newSecret())
		return 0
	}
	fs := flag.NewFlagSet("regent cluster "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "127.0.0.1:9300", "admin endpoint of any node")
	id := fs.Int("id", 0, "the voter's node id")
	kafka := fs.String("kafka", "", "the new voter's advertised Kafka host:port")
	raftAddr := fs.String("raft", "", "the new voter's raft host:port")
	nodeAdmin := fs.String("node-admin", "", "the new voter's admin host:port")
	tlsCert := fs.String("tls-cert", "", "PEM certificate signed by the cluster CA, for an admin endpoint on mutual TLS")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	tlsCA := fs.String("tls-ca", "", "PEM cluster CA bundle the endpoint's certificate must chain to")
	secretFile := fs.String("secret-file", "", "the cluster secret file (the nodes' --cluster-secret-file), to sign membership changes")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var linkCerts *certs.Store
	if *tlsCert != "" || *tlsKey != "" || *tlsCA != "" {
		if *tlsCert == "" || *tlsKey == "" || *tlsCA == "" {
			fmt.Fprintln(stderr, "regent cluster: --tls-cert, --tls-key and --tls-ca go together")
			return 2
		}
		var err error
		if linkCerts, err = certs.New(certs.Files{Cert: *tlsCert, Key: *tlsKey, CA: *tlsCA}); err != nil {
			fmt.Fprintln(stderr, "regent cluster:", err)
			return 1
		}
	}
	var auth *linkAuth
	if *secretFile != "" {
		var err error
		if auth, err = readSecretFile(*secretFile); err != nil {
			fmt.Fprintln(stderr, "regent cluster:", err)
			return 1
		}
	}
	client, scheme := adminHTTP(linkCerts, 60*time.Second)
	var req *http.Request
	var body []byte
	var err error
	switch args[0] {
	case "status":
		req, err = http.NewRequest(http.MethodGet, scheme+*admin+"/cluster/status", nil)
	case "add-voter":
		if *id <= 0 || *kafka == "" || *raftAddr == "" {
			return usage()
		}
		body, _ = json.Marshal(cluster.Peer{ID: int32(*id), Kafka: *kafka, Raft: *raftAddr, Admin: *nodeAdmin})
		req, err = http.NewRequest(http.MethodPost, scheme+*admin+"/cluster/voters", bytes.NewReader(body))
	case "remove-voter":
		if *id <= 0 {
			return usage()
		}
		req, err = http.NewRequest(http.MethodDelete, fmt.Sprintf("%s%s/cluster/voters/%d", scheme, *admin, *id), nil)
	default:
		return usage()
	}
	if err != nil {
		fmt.Fprintln(stderr, "regent cluster:", err)
		return 1
	}
	if req.Method != http.MethodGet {
		auth.sign(req, body)
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "regent cluster:", err)
		return 1
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "regent cluster %s: %s: %s", args[0], resp.Status, out)
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}
