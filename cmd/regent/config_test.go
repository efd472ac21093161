package main

import (
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"REGENT_LISTEN": "127.0.0.1:9999", "REGENT_DATA": "/tmp/envdata", "REGENT_FLUSH_INTERVAL": "250ms"}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig(nil, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9999" || c.DataDir != "/tmp/envdata" || c.FlushInterval != 250*time.Millisecond {
		t.Fatalf("env not applied: %+v", c)
	}
	c, err = parseConfig([]string{"--listen", "127.0.0.1:1234", "--data", "d", "--broker-config", "num.partitions=3, auto.create.topics.enable=false"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:1234" || c.DataDir != "d" {
		t.Fatalf("flags must win over env: %+v", c)
	}
	o, _ := c.brokerOverrides()
	if o["num.partitions"] != "3" || o["auto.create.topics.enable"] != "false" {
		t.Fatalf("broker overrides: %v", o)
	}
	def, err := parseConfig(nil, func(string) string { return "" })
	if err != nil || def.Listen != "127.0.0.1:9092" || def.DataDir != "./data" {
		t.Fatalf("zero-config defaults: %+v %v", def, err)
	}
	for _, bad := range [][]string{{"--listen", "nope"}, {"--fsync", "sometimes"}, {"--broker-config", "novalue"}, {"--listen", "127.0.0.1:0"}} {
		if _, err := parseConfig(bad, func(string) string { return "" }); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}
