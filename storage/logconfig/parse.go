package logconfig

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Parsing and validation follow Kafka's ConfigDef: values are trimmed,
// numbers are decimal, booleans are true/false in any case, lists are
// comma separated with blanks around commas ignored.

// javaTrim strips leading and trailing characters <= U+0020, as
// java.lang.String.trim does.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

func parseBool(raw string) (bool, bool) {
	s := javaTrim(raw)
	switch {
	case strings.EqualFold(s, "true"):
		return true, true
	case strings.EqualFold(s, "false"):
		return false, true
	}
	return false, false
}

func bitsOf(t Type) int {
	switch t {
	case TypeShort:
		return 16
	case TypeInt:
		return 32
	}
	return 64
}

func parseIntegral(t Type, raw string) (int64, bool) {
	v, err := strconv.ParseInt(javaTrim(raw), 10, bitsOf(t))
	return v, err == nil
}

// parseDouble accepts what java.lang.Double.parseDouble accepts for the
// forms people write (decimal, exponent, optional f/d suffix, Infinity).
// NaN is refused: Kafka's range checks let it through, Regent does not.
func parseDouble(raw string) (float64, bool) {
	s := javaTrim(raw)
	body := strings.TrimLeft(s, "+-")
	switch body {
	case "Infinity":
		if strings.HasPrefix(s, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "":
		return 0, false
	}
	if n := len(s); n > 1 && strings.ContainsRune("fFdD", rune(s[n-1])) &&
		!strings.HasPrefix(strings.ToLower(body), "0x") {
		s = s[:n-1]
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || strings.ContainsRune("+-.eExXpPabcdefABCDEF", r)) {
			return 0, false // rejects Go-only spellings such as "inf" and "1_0"
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// parseList splits the way Kafka does: an all-blank value is the empty
// list, otherwise split on commas (keeping empty elements) and trim each.
func parseList(raw string) []string {
	s := javaTrim(raw)
	if s == "" {
		return []string{}
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.Trim(p, " \t\n\v\f\r")
	}
	return parts
}

// javaDouble renders a float64 the way java.lang.Double.toString does.
func javaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	if a := math.Abs(f); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// javaList renders a list the way java.util.List.toString does, which is
// how Kafka prints a list value in some error messages.
func javaList(l []string) string { return "[" + strings.Join(l, ", ") + "]" }

// normalize renders a raw value the way Kafka renders the parsed value in
// DescribeConfigs (ConfigDef.convertToString). ok is false if it does not
// parse as t.
func normalize(t Type, raw string) (string, bool) {
	switch t {
	case TypeBoolean:
		b, ok := parseBool(raw)
		return strconv.FormatBool(b), ok
	case TypeInt, TypeShort, TypeLong:
		v, ok := parseIntegral(t, raw)
		return strconv.FormatInt(v, 10), ok
	case TypeDouble:
		v, ok := parseDouble(raw)
		return javaDouble(v), ok
	case TypeList:
		return strings.Join(parseList(raw), ","), true
	}
	return javaTrim(raw), true
}

// validator checks a raw value for the key name.
type validator func(name, raw string) error

func typeError(name, raw string, t Type) error {
	switch t {
	case TypeBoolean:
		return invalidValue(name, raw, "Expected value to be either true or false")
	case TypeInt, TypeShort, TypeLong, TypeDouble:
		return invalidValue(name, raw, "Not a number of type "+t.String())
	}
	return invalidValue(name, raw, "Unparseable value")
}

func boolV() validator {
	return func(name, raw string) error {
		if _, ok := parseBool(raw); !ok {
			return typeError(name, raw, TypeBoolean)
		}
		return nil
	}
}

// bound is one end of a numeric range; text is how Kafka prints it.
type bound struct {
	v    float64
	text string
}

func bnd(v int64) *bound { return &bound{float64(v), strconv.FormatInt(v, 10)} }

func rangeErr(name, shown string, lo, hi *bound, v float64) error {
	if lo != nil && v < lo.v {
		return invalidValue(name, shown, "Value must be at least "+lo.text)
	}
	if hi != nil && v > hi.v {
		return invalidValue(name, shown, "Value must be no more than "+hi.text)
	}
	return nil
}

// integralV checks an INT/SHORT/LONG with an optional inclusive range.
func integralV(t Type, lo, hi *bound) validator {
	return func(name, raw string) error {
		v, ok := parseIntegral(t, raw)
		if !ok {
			return typeError(name, raw, t)
		}
		return rangeErr(name, strconv.FormatInt(v, 10), lo, hi, float64(v))
	}
}

func doubleV(lo, hi *bound) validator {
	return func(name, raw string) error {
		v, ok := parseDouble(raw)
		if !ok {
			return typeError(name, raw, TypeDouble)
		}
		return rangeErr(name, javaDouble(v), lo, hi, v)
	}
}

func stringIn(valid ...string) validator {
	return func(name, raw string) error {
		s := javaTrim(raw)
		for _, v := range valid {
			if s == v {
				return nil
			}
		}
		return invalidValue(name, s, "String must be one of: "+strings.Join(valid, ", "))
	}
}

func anyString() validator { return func(string, string) error { return nil } }

// listIn is Kafka 4.x's ValidList.in: the empty list is allowed,
// duplicates and empty elements are not, each element must be valid.
func listIn(valid ...string) validator {
	return func(name, raw string) error {
		parts := parseList(raw)
		seen := make(map[string]bool, len(parts))
		for _, p := range parts {
			if seen[p] {
				return sentence(name, "values must not be duplicated",
					"Configuration '"+name+"' values must not be duplicated.")
			}
			seen[p] = true
		}
		for _, p := range parts {
			if p == "" {
				return sentence(name, "values must not be empty",
					"Configuration '"+name+"' values must not be empty.")
			}
			if err := stringIn(valid...)(name, p); err != nil {
				return err
			}
		}
		return nil
	}
}

var replicaRe = regexp.MustCompile(`^([0-9]+:[0-9]+)?$`)

// throttledReplicasV accepts "*" or a list of partitionId:brokerId.
func throttledReplicasV() validator {
	return func(name, raw string) error {
		parts := parseList(raw)
		all := true
		for _, p := range parts {
			if !replicaRe.MatchString(p) {
				all = false
				break
			}
		}
		if all || strings.Join(parts, "") == "*" {
			return nil
		}
		return invalidValue(name, javaList(parts), name+
			" must be the literal '*' or a list of replicas in the form [partitionId]:[brokerId],[partitionId]:[brokerId],...")
	}
}

// gzipLevelV: 1..9, or -1 for the library default.
func gzipLevelV() validator {
	return func(name, raw string) error {
		v, ok := parseIntegral(TypeInt, raw)
		if !ok {
			return typeError(name, raw, TypeInt)
		}
		if v > 9 || (v < 1 && v != -1) {
			return invalidValue(name, strconv.FormatInt(v, 10), "Value must be between 1 and 9 or equal to -1")
		}
		return nil
	}
}

// notTrue refuses true for a boolean Regent cannot honour.
func notTrue(why string) validator {
	return func(name, raw string) error {
		v, ok := parseBool(raw)
		if !ok {
			return typeError(name, raw, TypeBoolean)
		}
		if v {
			return invalidValue(name, "true", why)
		}
		return nil
	}
}
