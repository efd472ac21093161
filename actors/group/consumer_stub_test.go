package group

import "testing"

func (c *consumerGroup) checkInvariants(t *testing.T) {}
