// Package group is the consumer-group coordinator.
//
// Placeholder: the coordinator is being written; until then no group API is
// advertised.
package group

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// Options configures the coordinator.
type Options struct {
	DataDir string
	Root    *actor.RootContext
	Logger  *slog.Logger
}

// Manager owns every group's coordinator actor.
type Manager struct{}

// NewManager loads persisted groups and offsets.
func NewManager(o Options) (*Manager, error) { return &Manager{}, nil }

// Close stops every group actor.
func (m *Manager) Close() error { return nil }
