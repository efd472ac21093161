package netio

import (
	"fmt"
	"log/slog"
)

// gnetLogger routes gnet's own logging into slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(format string, args ...any) { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Infof(format string, args ...any)  { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.l.Warn(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Errorf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Fatalf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }
