package main

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/regent-broker/regent/protocol"
)

func TestListeners(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []listenerSpec
		adv     map[string]string
		wantErr string
	}{
		{args: nil, want: []listenerSpec{{"PLAINTEXT", protocol.Plaintext, "127.0.0.1:9092"}}, adv: map[string]string{"PLAINTEXT": "127.0.0.1:9092"}},
		{args: []string{"--listen", "127.0.0.1:1", "--advertise", "b.example:1"}, want: []listenerSpec{{"PLAINTEXT", protocol.Plaintext, "127.0.0.1:1"}}, adv: map[string]string{"PLAINTEXT": "b.example:1"}},
		{
			args: []string{"--listeners", "plaintext://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2", "--advertised-listeners", "SASL_PLAINTEXT://b.example:2"},
			want: []listenerSpec{{"PLAINTEXT", protocol.Plaintext, "127.0.0.1:1"}, {"SASL_PLAINTEXT", protocol.SASLPlaintext, "127.0.0.1:2"}},
			adv:  map[string]string{"PLAINTEXT": "127.0.0.1:1", "SASL_PLAINTEXT": "b.example:2"},
		},
		{
			args: []string{"--listeners", "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2,SASL_SSL://127.0.0.1:3", "--tls-cert", "c.pem", "--tls-key", "k.pem"},
			want: []listenerSpec{{"PLAINTEXT", protocol.Plaintext, "127.0.0.1:1"}, {"SSL", protocol.SSL, "127.0.0.1:2"}, {"SASL_SSL", protocol.SASLSSL, "127.0.0.1:3"}},
			adv:  map[string]string{"PLAINTEXT": "127.0.0.1:1", "SSL": "127.0.0.1:2", "SASL_SSL": "127.0.0.1:3"},
		},
		{args: []string{"--listeners", "SASL_SSL://127.0.0.1:2"}, wantErr: "--tls-cert and --tls-key"},
		{args: []string{"--listeners", "SSL://127.0.0.1:2"}, wantErr: "--tls-cert and --tls-key"},
		{args: []string{"--listeners", "SSL://127.0.0.1:2", "--tls-cert", "c.pem"}, wantErr: "go together"},
		{args: []string{"--listeners", "SSL://127.0.0.1:2", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-auth", "required"}, wantErr: "--tls-client-ca"},
		{args: []string{"--cluster-tls-cert", "c.pem"}, wantErr: "go together"},
		{args: []string{"--cluster-tls-cert", "c.pem", "--cluster-tls-key", "k.pem", "--cluster-tls-ca", "ca.pem"}, wantErr: "--raft-listen"},
		{args: []string{"--listeners", "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, wantErr: "named twice"},
		{args: []string{"--listeners", "127.0.0.1:1"}, wantErr: "NAME://host:port"},
		{args: []string{"--listeners", "PLAINTEXT://127.0.0.1:1", "--advertised-listeners", "SASL_PLAINTEXT://b:2"}, wantErr: "not a listener"},
		{args: []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1", "--sasl-mechanisms", "OAUTHBEARER"}, wantErr: "--sasl-oauthbearer-jwks"},
		{args: []string{"--sasl-mechanisms", "PLAIN,GSSAPI"}, wantErr: "GSSAPI"},
		{
			args: []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1", "--sasl-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-unsecured"},
			want: []listenerSpec{{"SASL_PLAINTEXT", protocol.SASLPlaintext, "127.0.0.1:1"}},
		},
		{args: []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1", "--sasl-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-unsecured", "--sasl-oauthbearer-jwks", "j.json"}, wantErr: "exclude each other"},
		{args: []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1", "--sasl-oauthbearer-unsecured"}, wantErr: "needs OAUTHBEARER"},
		{args: []string{"--sasl-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-unsecured"}, wantErr: "a SASL_* listener"},
	} {
		c, err := parseConfig(tc.args, func(string) string { return "" })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want one with %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		ls, adv, err := c.listeners()
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != len(tc.want) {
			t.Errorf("%v: listeners %+v, want %+v", tc.args, ls, tc.want)
			continue
		}
		for i := range ls {
			if ls[i] != tc.want[i] {
				t.Errorf("%v: listener %d %+v, want %+v", tc.args, i, ls[i], tc.want[i])
			}
		}
		for k, v := range tc.adv {
			if adv[k] != v {
				t.Errorf("%v: advertised %s %q, want %q", tc.args, k, adv[k], v)
			}
		}
	}
}

func TestUsersAddCommand(t *testing.T) {
	dir := t.TempDir()
	pw := dir + "/pw"
	if err := writeFile(pw, "s3cret\n"); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := regent([]string{"users", "add", "admin", "--mechanism", "SCRAM-SHA-256", "--password-file", pw, "--data", dir + "/data"}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if code := regent([]string{"users", "add", "admin", "--mechanism", "MD5", "--password-file", pw, "--data", dir + "/data"}, func(string) string { return "" }, &out, &errb); code == 0 {
		t.Fatal("an unknown mechanism was accepted")
	}
	if code := regent([]string{"users", "add"}, func(string) string { return "" }, &out, &errb); code != 2 {
		t.Fatalf("no name: exit %d, want 2", code)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func TestEventLoopsPerListener(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	plain := &protocol.Listener{Name: "PLAINTEXT", Security: protocol.Plaintext}
	sasl := &protocol.Listener{Name: "SASL_PLAINTEXT", Security: protocol.SASLPlaintext}
	ssl := &protocol.Listener{Name: "SSL", Security: protocol.SSL}
	for _, tc := range []struct {
		name      string
		flag      int
		listeners []*protocol.Listener
		want      int
	}{
		{"half the Ps", 0, []*protocol.Listener{plain}, 4},
		{"split among plain listeners", 0, []*protocol.Listener{plain, sasl}, 2},
		{"TLS listeners take no loops", 0, []*protocol.Listener{plain, ssl}, 4},
		{"at least one", 0, []*protocol.Listener{plain, sasl, plain, sasl, plain, sasl}, 1},
		{"the flag wins", 3, []*protocol.Listener{plain, sasl}, 3},
	} {
		if got := eventLoopsPerListener(tc.flag, tc.listeners); got != tc.want {
			t.Errorf("%s: %d loops, want %d", tc.name, got, tc.want)
		}
	}
	runtime.GOMAXPROCS(1)
	if got := eventLoopsPerListener(0, []*protocol.Listener{plain}); got != 1 {
		t.Errorf("one P: %d loops, want 1", got)
	}
}
