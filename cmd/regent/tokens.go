package main

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/users"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/storage/logconfig"
)

// tokenSettings reads the delegation token keys of --broker-config
// (Kafka's defaults where absent; the values were checked against their
// defs with the rest of --broker-config) and the expiry check interval.
func tokenSettings(overrides map[string]string) (protocol.TokenConfig, time.Duration) {
	ms := func(key string, dflt int64) int64 {
		if v, err := strconv.ParseInt(overrides[key], 10, 64); err == nil && v > 0 {
			return v
		}
		return dflt
	}
	c := protocol.TokenConfig{
		Secret:        []byte(overrides[logconfig.DelegationTokenSecretKey]),
		MaxLifetimeMs: ms(logconfig.DelegationTokenMaxLifetimeMs, 7*24*3600*1000),
		RenewMs:       ms(logconfig.DelegationTokenExpiryTimeMs, 24*3600*1000),
	}
	return c, time.Duration(ms(logconfig.DelegationTokenExpiryCheckIntervalMs, 3600*1000)) * time.Millisecond
}

// purgeExpiredTokens removes expired delegation tokens every interval
// until ctx ends. Every node runs it; only the cluster leader's proposal
// commits (a follower's is refused, NOT_CONTROLLER, and ignored), and the
// leader's clock decides, carried in the command.
func purgeExpiredTokens(ctx context.Context, store *users.Store, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := store.PurgeTokens(time.Now().UnixMilli())
		switch {
		case errors.Is(err, kerr.NotController):
		case err != nil:
			logger.Warn("expired delegation tokens not removed", "err", err)
		case n > 0:
			logger.Info("expired delegation tokens removed", "count", n)
		}
	}
}
