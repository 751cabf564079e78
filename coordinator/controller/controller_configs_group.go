package controller

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/configs"
)

// validateGroupConfigs is Kafka's GroupConfig.validate of the configs a group would
// have (set: every key the group sets, after the change), against the bounds in l (the
// controller's broker layers): INVALID_CONFIG with Kafka's message at the first
// failure of
//
//  1. a name that is no group key ("Unknown group config name: <key>");
//  2. a value that does not parse as its key's type or breaks its key's own bound or
//     valid values (configs.Def.Validate);
//  3. a value outside the broker's bounds of its key, in Kafka's order
//     (configs.GroupBoundedKeys): "<key> must be in the range <min> to <max>
//     inclusive.", or "... must be less than or equal to <max>" / "... greater than or
//     equal to <min>" where only one bound exists;
//  4. a session timeout not greater than its heartbeat interval, the broker's value
//     standing in for the one the group does not set ("<session key> must be greater
//     than <heartbeat key>");
//  5. a dead-letter queue topic name starting with "__".
//
// Only the keys set are range-checked (3): a group's unset key takes the broker's value,
// which the broker's own bounds already hold.
func validateGroupConfigs(set map[string]string, l *configs.Layers) error {
	ints := make(map[string]int64, len(set))
	for _, k := range slices.Sorted(maps.Keys(set)) {
		d := configs.Group(k)
		if d == nil {
			return errf(kerr.InvalidConfig, "Unknown group config name: %s", k)
		}
		v, err := d.Validate(set[k])
		if err != nil {
			return errf(kerr.InvalidConfig, "%v", err)
		}
		switch d.Kind {
		case configs.KindInt, configs.KindShort, configs.KindLong:
			ints[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	for _, k := range configs.GroupBoundedKeys {
		n, ok := ints[k]
		if !ok {
			continue
		}
		b, _ := configs.GroupBounds(k)
		switch {
		case b.Min != "" && b.Max != "":
			lo, hi := l.BrokerInt(b.Min), l.BrokerInt(b.Max)
			if n < lo || n > hi {
				return errf(kerr.InvalidConfig, "%s must be in the range %d to %d inclusive.", k, lo, hi)
			}
		case b.Max != "":
			if hi := l.BrokerInt(b.Max); n > hi {
				return errf(kerr.InvalidConfig, "%s must be less than or equal to %d", k, hi)
			}
		case b.Min != "":
			if lo := l.BrokerInt(b.Min); n < lo {
				return errf(kerr.InvalidConfig, "%s must be greater than or equal to %d", k, lo)
			}
		}
	}
	for _, p := range configs.GroupSessionPairs {
		session, hasSession := ints[p[0]]
		heartbeat, hasHeartbeat := ints[p[1]]
		if !hasSession && !hasHeartbeat {
			continue
		}
		if !hasSession {
			session = l.BrokerInt(configs.Group(p[0]).Synonyms[0].Name)
		}
		if !hasHeartbeat {
			heartbeat = l.BrokerInt(configs.Group(p[1]).Synonyms[0].Name)
		}
		if session <= heartbeat {
			return errf(kerr.InvalidConfig, "%s must be greater than %s", p[0], p[1])
		}
	}
	if name := set["errors.deadletterqueue.topic.name"]; strings.HasPrefix(name, "__") {
		return errf(kerr.InvalidConfig, "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
	}
	return nil
}
