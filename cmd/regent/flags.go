package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// envName is a flag's environment twin: REGENT_ and the flag's name in
// capitals, dashes as underscores (--max-connections:
// REGENT_MAX_CONNECTIONS). Deriving the name, rather than listing it per
// flag, is what guarantees every flag has one.
func envName(flagName string) string {
	return "REGENT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// environment twin, if that is set (non-empty). A value the flag refuses
// is an error naming the variable: a typo in the environment must not
// silently leave the default in place.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if onCommandLine[f.Name] {
			return
		}
		name := envName(f.Name)
		v := getenv(name)
		if v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	})
	return errors.Join(errs...)
}

// printUsage writes `regent -h`: the commands, then every flag with its
// environment twin and default.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Regent, a Kafka-compatible broker.

Usage:
  regent [flags]              run a broker: a single node, or a cluster node
                              with --raft-listen (and --peers or --join)
  regent cluster <command>    a cluster's status and membership, through a
                              node's --admin-listen endpoint:
                                regent cluster status --admin host:port
                                regent cluster add-voter --admin host:port --id N --kafka host:port --raft host:port [--node-admin host:port]
                                regent cluster remove-voter --admin host:port --id N
                                regent cluster secret (a new --cluster-secret-file's content)
                              (admin endpoints on mutual TLS: add --tls-cert F
                              --tls-key F --tls-ca F, a cluster CA's certificate;
                              with a cluster secret: add --secret-file F)
  regent users add NAME --mechanism SCRAM-SHA-512 --password-file F --data DIR
                              a SCRAM user in a stopped single node's store
  regent version              print the version and commit

Every flag has an environment twin: REGENT_ and the flag's name in
capitals with _ for - (--max-connections: REGENT_MAX_CONNECTIONS). A flag
on the command line wins over its twin; an invalid value in either is an
error.

Flags:
`)
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		if k, ok := f.Value.(interface{ kind() string }); ok && kind == "value" {
			kind = k.kind()
		}
		fmt.Fprintf(w, "  --%s", f.Name)
		if kind != "" {
			fmt.Fprintf(w, " %s", kind)
		}
		fmt.Fprintf(w, "\n      %s\n      (%s", usage, envName(f.Name))
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
			fmt.Fprintf(w, "; default %s", f.DefValue)
		}
		fmt.Fprintln(w, ")")
	})
}

// The flag values below check what they are given when it is set, so that
// a bad value is refused with the name of the flag or variable it came
// from. Config.Validate still checks the whole (and what depends on
// several flags). Each String handles a nil pointer: the flag package
// makes zero values of these types to print defaults.

// addrValue is a host:port; optional ones may be set to "" (off).
type addrValue struct {
	p        *string
	optional bool
}

func (v addrValue) kind() string { return "host:port" }

func (v addrValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v addrValue) Set(s string) error {
	if s == "" && v.optional {
		*v.p = s
		return nil
	}
	if _, _, err := splitHostPort(s); err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	*v.p = s
	return nil
}

// choiceValue is one of a fixed set of words.
type choiceValue struct {
	p       *string
	choices []string
}

func (v choiceValue) kind() string { return strings.Join(v.choices, "|") }

func (v choiceValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v choiceValue) Set(s string) error {
	if !slices.Contains(v.choices, s) {
		return fmt.Errorf("want one of %s", strings.Join(v.choices, ", "))
	}
	*v.p = s
	return nil
}

// logLevelValue is a slog level name (debug, info, warn, error, or one of
// them with an offset such as debug-2).
type logLevelValue struct{ p *string }

func (v logLevelValue) kind() string { return "level" }

func (v logLevelValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v logLevelValue) Set(s string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		return errors.New("want debug, info, warn or error")
	}
	*v.p = s
	return nil
}

// durationValue is a Go duration of at least min.
type durationValue struct {
	p   *time.Duration
	min time.Duration
}

func (v durationValue) kind() string { return "duration" }

func (v durationValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 250ms, 30s or 2m")
	}
	if d < v.min {
		if v.min == 0 {
			return errors.New("want a duration of 0 or more")
		}
		return fmt.Errorf("want a duration of at least %v", v.min)
	}
	*v.p = d
	return nil
}

// millisValue is a positive number of milliseconds, kept as a duration.
type millisValue struct{ p *time.Duration }

func (v millisValue) kind() string { return "ms" }

func (v millisValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatInt(v.p.Milliseconds(), 10)
}

func (v millisValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > int64(1<<63-1)/int64(time.Millisecond) {
		return errors.New("want a positive number of milliseconds")
	}
	*v.p = time.Duration(n) * time.Millisecond
	return nil
}

// intValue is an integer in [min, max], stored in an int or an int32.
type intValue[T int | int32 | int64] struct {
	p        *T
	min, max int64
}

func (v intValue[T]) kind() string { return "int" }

func (v intValue[T]) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v intValue[T]) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < v.min || n > v.max {
		return fmt.Errorf("want an integer from %d to %d", v.min, v.max)
	}
	*v.p = T(n)
	return nil
}

// uintValue is a non-negative integer (0: the default).
type uintValue struct{ p *uint64 }

func (v uintValue) kind() string { return "uint" }

func (v uintValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatUint(*v.p, 10)
}

func (v uintValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("want a whole number, 0 or more")
	}
	*v.p = n
	return nil
}

// ratioValue is a number from 0 to 1.
type ratioValue struct{ p *float64 }

func (v ratioValue) kind() string { return "0..1" }

func (v ratioValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v ratioValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return errors.New("want a number from 0 to 1")
	}
	*v.p = f
	return nil
}

// boolValue is true or false (also 1/0, t/f, as strconv.ParseBool reads);
// the flag package's own says only "parse error".
type boolValue struct{ p *bool }

func (v boolValue) IsBoolFlag() bool { return true }

func (v boolValue) String() string {
	if v.p == nil {
		return "false"
	}
	return strconv.FormatBool(*v.p)
}

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	return nil
}

// checkedString is a string flag with a syntax check (peers, broker
// config overrides).
type checkedString struct {
	p     *string
	check func(string) error
}

func (v checkedString) kind() string { return "string" }

func (v checkedString) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v checkedString) Set(s string) error {
	if err := v.check(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}
