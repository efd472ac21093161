package logconfig

// A broker override is STATIC_BROKER_CONFIG when it is the value given
// at start (Broker.Static), else dynamic: Regent applies broker changes to
// every node, so a topic's synonym and the default resource say
// DYNAMIC_DEFAULT_BROKER_CONFIG, and a broker's own resource says
// DYNAMIC_BROKER_CONFIG (as kafka-configs --entity-name N lists them).

// DescribeTopic returns every topic key, sorted by name, with its
// effective value, its source and its synonyms in Kafka's order: the topic
// override (TOPIC_CONFIG), then broker overrides of the broker synonyms in
// priority order (STATIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG), then the broker synonyms' Kafka
// defaults (DEFAULT_CONFIG). The source is that of the first synonym, or
// DEFAULT_CONFIG when there is none. Values are rendered as Kafka renders
// parsed values ("delete, compact" -> "delete,compact", "TRUE" -> "true").
// Invalid stored values are skipped rather than reported.
func DescribeTopic(topic map[string]string, broker Broker) []Entry {
	out := make([]Entry, 0, len(topicDefs))
	for i := range topicDefs {
		d := &topicDefs[i]
		value, _, _ := resolveOne(d, topic, broker, false)
		var syns []Synonym
		if raw, ok := topic[d.Name]; ok && d.validate(raw) == nil {
			v, _ := normalize(d.Type, raw)
			syns = append(syns, Synonym{Name: d.Name, Value: v, Source: SourceTopic})
		}
		for _, s := range d.synonyms {
			raw, ok := broker.get(s.name)
			if !ok {
				continue
			}
			if _, err := fromBroker(d, s, raw); err != nil {
				continue
			}
			bd, _ := LookupBroker(s.name)
			v, _ := normalize(bd.Type, raw)
			syns = append(syns, Synonym{Name: s.name, Value: v, Source: broker.source(s.name, raw, false)})
		}
		for _, s := range d.synonyms {
			if bd, ok := LookupBroker(s.name); ok && bd.HasDefault {
				syns = append(syns, Synonym{Name: s.name, Value: bd.Default, Source: SourceDefault})
			}
		}
		out = append(out, entry(d, value, false, syns))
	}
	return out
}

func entry(d *Def, value string, null bool, syns []Synonym) Entry {
	src := SourceDefault
	if len(syns) > 0 {
		src = syns[0].Source
	}
	return Entry{
		Name:      d.Name,
		Value:     value,
		Null:      null,
		Source:    src,
		Type:      d.Type,
		Doc:       d.Doc,
		Sensitive: d.Sensitive,
		ReadOnly:  d.ReadOnly,
		Synonyms:  syns,
	}
}

// DescribeBroker returns the broker keys of Broker.Defs with their values
// (override, else Kafka's default, else null), sources and synonyms, for
// one broker's resource (perBroker) or the cluster default's.
// Synonyms follow Kafka: for a key of a group (log.retention.ms/.minutes/
// .hours, log.roll.ms/.hours, ...) every group member's override, then
// every member's default, with entries before the described key's own name
// dropped. So log.retention.hours=1 makes log.retention.hours
// STATIC_BROKER_CONFIG but leaves log.retention.ms null and DEFAULT_CONFIG,
// as in Kafka. broker.id falls back to node.id when only node.id is set.
func DescribeBroker(broker Broker, perBroker bool) []Entry {
	out := make([]Entry, 0, len(brokerDefs))
	for i := range brokerDefs {
		d := &brokerDefs[i]
		if d.Name == "broker.id" {
			if _, set := broker.get("broker.id"); !set {
				if nd, ok := LookupBroker("node.id"); ok {
					if raw, ok := broker.get("node.id"); ok && nd.validate(raw) == nil {
						v, _ := normalize(TypeInt, raw)
						out = append(out, entry(d, v, false,
							[]Synonym{{Name: "node.id", Value: v, Source: SourceStaticBroker}}))
						continue
					}
				}
			}
		}
		value, null := d.Default, !d.HasDefault
		if raw, ok := broker.get(d.Name); ok && d.validate(raw) == nil {
			value, _ = normalize(d.Type, raw)
			null = false
		}
		var syns []Synonym
		for _, n := range d.group {
			gd, ok := LookupBroker(n)
			if !ok {
				continue
			}
			if raw, ok := broker.get(n); ok && gd.validate(raw) == nil {
				v, _ := normalize(gd.Type, raw)
				src := broker.source(n, raw, perBroker)
				syns = append(syns, Synonym{Name: n, Value: v, Source: src})
				// A runtime value hides the one given at start.
				if sv, ok := broker.Static[n]; ok && src != SourceStaticBroker && gd.validate(sv) == nil {
					v, _ := normalize(gd.Type, sv)
					syns = append(syns, Synonym{Name: n, Value: v, Source: SourceStaticBroker})
				}
			}
		}
		for _, n := range d.group {
			if gd, ok := LookupBroker(n); ok && gd.HasDefault {
				syns = append(syns, Synonym{Name: n, Value: gd.Default, Source: SourceDefault})
			}
		}
		for len(syns) > 0 && syns[0].Name != d.Name {
			syns = syns[1:]
		}
		if len(syns) == 0 {
			syns = nil
		}
		if null {
			value = ""
		}
		out = append(out, entry(d, value, null, syns))
	}
	return out
}
