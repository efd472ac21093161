package quotas

// Resolution of a connection's quota, as Kafka's DefaultQuotaCallback:
// for each quota key on its own, the first of these entities that sets it
// (user is the principal's name, ANONYMOUS without authentication):
//
//  1. user=U, client-id=C
//  2. user=U, client-id=<default>
//  3. user=U
//  4. user=<default>, client-id=C
//  5. user=<default>, client-id=<default>
//  6. user=<default>
//  7. client-id=C
//  8. client-id=<default>
//
// The level found also says whose use the quota counts: a quota on a user
// (levels 3 and 6) is shared by all that user's client ids, one on a
// client id (7, 8) by all users of it, one on both (1, 2, 4, 5) by that
// pair. A default is not shared: each user (client id) it covers is
// measured on its own, as Kafka's metric tags make it.

// Sensor names whose use a quota counts: the key, and the user and client
// id it is measured for ("" where the level does not involve the part).
type Sensor struct {
	Key    string
	User   string
	Client string
	// IP is the address a connection_creation_rate sensor counts.
	IP string
}

// Resolve finds the quota for key of a connection of user with client id
// client in snap: the bound, the sensor counting it, and whether any
// level sets it.
func Resolve(snap *Snapshot, key, user, client string) (float64, Sensor, bool) {
	if snap == nil || len(snap.m) == 0 {
		return 0, Sensor{}, false
	}
	levels := [8]struct {
		e          Entity
		user, clnt bool // the sensor's tags
	}{
		{Entity{HasUser: true, User: user, HasClient: true, Client: client}, true, true},
		{Entity{HasUser: true, User: user, HasClient: true, ClientDefault: true}, true, true},
		{Entity{HasUser: true, User: user}, true, false},
		{Entity{HasUser: true, UserDefault: true, HasClient: true, Client: client}, true, true},
		{Entity{HasUser: true, UserDefault: true, HasClient: true, ClientDefault: true}, true, true},
		{Entity{HasUser: true, UserDefault: true}, true, false},
		{Entity{HasClient: true, Client: client}, false, true},
		{Entity{HasClient: true, ClientDefault: true}, false, true},
	}
	for _, l := range levels {
		v, ok := snap.m[l.e][key]
		if !ok {
			continue
		}
		s := Sensor{Key: key}
		if l.user {
			s.User = user
		}
		if l.clnt {
			s.Client = client
		}
		return v, s, true
	}
	return 0, Sensor{}, false
}

// ResolveIP finds the connection_creation_rate quota of connections from
// ip (canonical text form) in snap, as Kafka resolves it: the ip's own
// entity, else the default ip entity. Each address is measured on its
// own, under either.
func ResolveIP(snap *Snapshot, ip string) (float64, Sensor, bool) {
	if snap == nil || !snap.Sets(ConnectionCreationRate) {
		return 0, Sensor{}, false
	}
	for _, e := range [2]Entity{{HasIP: true, IP: ip}, {HasIP: true, IPDefault: true}} {
		if v, ok := snap.m[e][ConnectionCreationRate]; ok {
			return v, Sensor{Key: ConnectionCreationRate, IP: ip}, true
		}
	}
	return 0, Sensor{}, false
}
