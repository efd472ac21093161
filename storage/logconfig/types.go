// Package logconfig is Regent's registry of Kafka topic configs and of the
// broker-level defaults they inherit from.
//
// It validates values the way a Kafka 4.x broker does (same types, ranges,
// allowed strings and error wording), resolves the effective per-topic
// settings Regent enforces, and produces DescribeConfigs entries with
// sources and synonyms. Keys Regent stores but does not act on are still
// accepted and reported; their Def.Doc says so.
package logconfig

import "strings"

// Type mirrors the ConfigType field of Kafka's DescribeConfigs response.
type Type int8

const (
	TypeUnknown  Type = 0
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypeClass    Type = 8
	TypePassword Type = 9
)

// String returns Kafka's upper-case name of the type, as used in
// "Not a number of type LONG".
func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "BOOLEAN"
	case TypeString:
		return "STRING"
	case TypeInt:
		return "INT"
	case TypeShort:
		return "SHORT"
	case TypeLong:
		return "LONG"
	case TypeDouble:
		return "DOUBLE"
	case TypeList:
		return "LIST"
	case TypeClass:
		return "CLASS"
	case TypePassword:
		return "PASSWORD"
	}
	return "UNKNOWN"
}

// Source mirrors the ConfigSource field of Kafka's DescribeConfigs response.
type Source int8

const (
	SourceUnknown              Source = 0
	SourceTopic                Source = 1 // TOPIC_CONFIG
	SourceDynamicBroker        Source = 2 // DYNAMIC_BROKER_CONFIG
	SourceDynamicDefaultBroker Source = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	SourceStaticBroker         Source = 4 // STATIC_BROKER_CONFIG
	SourceDefault              Source = 5 // DEFAULT_CONFIG
)

func (s Source) String() string {
	switch s {
	case SourceTopic:
		return "TOPIC_CONFIG"
	case SourceDynamicBroker:
		return "DYNAMIC_BROKER_CONFIG"
	case SourceDynamicDefaultBroker:
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case SourceStaticBroker:
		return "STATIC_BROKER_CONFIG"
	case SourceDefault:
		return "DEFAULT_CONFIG"
	}
	return "UNKNOWN"
}

// Def describes one config key.
type Def struct {
	Name string
	Type Type
	// Default is Kafka's default rendered as Kafka renders it in
	// DescribeConfigs; "" with HasDefault false means the default is null.
	Default    string
	HasDefault bool
	// Doc is Regent's own one-line documentation. For keys Regent stores
	// but does not act on, it says so.
	Doc      string
	Enforced bool
	// BrokerName is the highest-priority broker key this topic key
	// inherits from (retention.ms <- log.retention.ms), "" if none.
	BrokerName string
	Sensitive  bool
	ReadOnly   bool

	validate func(string) error

	// topic keys: every broker synonym in priority order, with conversion.
	synonyms []synonym
	// broker keys: the names Kafka treats as synonyms of this key when
	// describing it (log.retention.ms, .minutes, .hours), in priority order.
	group []string
}

// ValidateValue checks one value against the key's type and validator and
// returns a *ConfigError in Kafka's wording when it is not acceptable.
func (d Def) ValidateValue(value string) error {
	if d.validate == nil {
		return nil
	}
	return d.validate(value)
}

type conversion int8

const (
	convNone conversion = iota
	convHoursToMs
	convMinutesToMs
)

type synonym struct {
	name string
	conv conversion
}

// Entry is one DescribeConfigs result.
type Entry struct {
	Name      string
	Value     string
	Null      bool
	Source    Source
	Type      Type
	Doc       string
	Sensitive bool
	ReadOnly  bool
	Synonyms  []Synonym
}

// Synonym is one DescribeConfigs synonym.
type Synonym struct {
	Name, Value string
	Source      Source
}

// Op is one IncrementalAlterConfigs operation.
type Op struct {
	Key   string
	Value *string
	Op    int8
}

// IncrementalAlterConfigs operation codes.
const (
	OpSet      int8 = 0
	OpDelete   int8 = 1
	OpAppend   int8 = 2
	OpSubtract int8 = 3
)

func opName(op int8) string {
	switch op {
	case OpSet:
		return "SET"
	case OpDelete:
		return "DELETE"
	case OpAppend:
		return "APPEND"
	case OpSubtract:
		return "SUBTRACT"
	}
	return "UNKNOWN"
}

// ConfigError is a refused config. Error() uses Kafka's wording:
// "Invalid value abc for configuration retention.ms: Not a number of type LONG",
// or a whole sentence such as "Unknown topic config name: foo".
//
// Kafka answers all of these with INVALID_CONFIG (40), except the ones for
// which InvalidRequest reports true (INVALID_REQUEST, 42).
type ConfigError struct {
	Key, Value, Reason string

	msg            string // full message when not of the "Invalid value" form
	invalidRequest bool
}

func (e *ConfigError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	var b strings.Builder
	b.WriteString("Invalid value ")
	b.WriteString(e.Value)
	b.WriteString(" for configuration ")
	b.WriteString(e.Key)
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// InvalidRequest reports whether Kafka answers this refusal with
// INVALID_REQUEST rather than INVALID_CONFIG (duplicate keys, or null
// values in AlterConfigs/IncrementalAlterConfigs).
func (e *ConfigError) InvalidRequest() bool { return e.invalidRequest }

func invalidValue(key, value, reason string) *ConfigError {
	return &ConfigError{Key: key, Value: value, Reason: reason}
}

func sentence(key, reason, msg string) *ConfigError {
	return &ConfigError{Key: key, Reason: reason, msg: msg}
}
